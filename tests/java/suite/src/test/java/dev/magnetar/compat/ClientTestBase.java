package dev.magnetar.compat;

import java.util.ArrayList;
import java.util.List;
import org.apache.pulsar.client.api.ConsumerBuilder;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * Base of the test classes that share one PulsarClient (Env.client()) across their tests: opened
 * before the first test of the class, closed after the last. Classes run one after the other in
 * the suite's single JVM, so the static field is never used by two classes at once.
 */
abstract class ClientTestBase {
    static PulsarClient client;

    @BeforeAll
    static void openClient() throws Exception {
        client = Env.client();
    }

    @AfterAll
    static void closeClient() throws Exception {
        client = closed(client);
    }

    /** Closes c unless it is null; returns null, for the static field it was kept in. */
    static <T extends AutoCloseable> T closed(T c) throws Exception {
        if (c != null) {
            c.close();
        }
        return null;
    }

    /** A String producer of the shared client on topic, batching off. */
    static Producer<String> plainProducer(String topic) throws PulsarClientException {
        return client.newProducer(Schema.STRING).topic(topic).enableBatching(false).create();
    }

    /** A String consumer builder of the shared client on topic and subscription. */
    static ConsumerBuilder<String> consumerOn(String topic, String subscription) {
        return client.newConsumer(Schema.STRING).topic(topic).subscriptionName(subscription);
    }

    /** Sends prefix + i for i in 0..n-1 with a plainProducer. */
    static List<MessageId> produce(String topic, String prefix, int n) throws Exception {
        List<MessageId> ids = new ArrayList<>();
        try (Producer<String> p = plainProducer(topic)) {
            for (int i = 0; i < n; i++) {
                ids.add(p.send(prefix + i));
            }
        }
        return ids;
    }
}
