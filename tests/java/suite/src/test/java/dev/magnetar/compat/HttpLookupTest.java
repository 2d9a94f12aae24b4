package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.schema.GenericRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Java client with the web service's http:// URL as its service URL (issue 53, item 4): its
 * HttpLookupService asks the partitioned metadata, /lookup/v2/topic/{domain}/..., the namespace's
 * topics (pattern consumers) and the schema (AUTO_CONSUME) over HTTP, on a namespace created just
 * before.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class HttpLookupTest extends ClientAdminTestBase {
    static PulsarClient httpClient;

    @BeforeAll
    static void openHttpClient() throws Exception {
        httpClient = PulsarClient.builder().serviceUrl(Env.ADMIN_URL)
                .operationTimeout(10, TimeUnit.SECONDS).build();
    }

    @AfterAll
    static void closeHttpClient() throws Exception {
        if (httpClient != null) {
            httpClient.close();
        }
    }

    private static String newNamespace() throws Exception {
        String ns = "public/" + Env.uniqueName("jhttp");
        admin.namespaces().createNamespace(ns);
        return ns;
    }

    @Test
    void persistentAndNonPersistentTopicsOfNewNamespace() throws Exception {
        String ns = newNamespace();
        for (String topic : List.of("persistent://" + ns + "/t1", "non-persistent://" + ns + "/t3")) {
            try (Consumer<String> c = httpClient.newConsumer(Schema.STRING).topic(topic)
                    .subscriptionName("s").subscribe();
                 Producer<String> p = httpClient.newProducer(Schema.STRING).topic(topic).create()) {
                p.send("hello " + topic);
                Message<String> m = c.receive(10, TimeUnit.SECONDS);
                assertNotNull(m, topic);
                assertEquals("hello " + topic, m.getValue());
            }
        }
    }

    @Test
    void autoConsumeReadsTheSchemaOverHttp() throws Exception {
        String topic = "persistent://" + newNamespace() + "/schema";
        try (Producer<String> p = httpClient.newProducer(Schema.STRING).topic(topic).create();
             Consumer<GenericRecord> c = httpClient.newConsumer(Schema.AUTO_CONSUME()).topic(topic)
                     .subscriptionName("s").subscribe()) {
            p.send("typed");
            Message<GenericRecord> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m);
            assertEquals("typed", m.getValue().getNativeObject());
        }
    }

    @Test
    void partitionedTopicAndPatternConsumer() throws Exception {
        String ns = newNamespace();
        String parted = "persistent://" + ns + "/parted";
        admin.topics().createPartitionedTopic(parted, 2);
        assertEquals(List.of(parted + "-partition-0", parted + "-partition-1"),
                httpClient.getPartitionsForTopic(parted).get(10, TimeUnit.SECONDS));
        List<String> topics = List.of(parted, "persistent://" + ns + "/rx-a");
        List<Producer<String>> producers = new java.util.ArrayList<>();
        for (String t : topics) {
            producers.add(httpClient.newProducer(Schema.STRING).topic(t).enableBatching(false)
                    .create());
        }
        try (Consumer<String> c = httpClient.newConsumer(Schema.STRING)
                .topicsPattern(Pattern.compile("persistent://" + ns + "/.*"))
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .subscriptionName("s").subscribe()) {
            Set<String> sent = new HashSet<>();
            for (int i = 0; i < producers.size(); i++) {
                for (int j = 0; j < 4; j++) {
                    producers.get(i).send(i + "-" + j);
                    sent.add(i + "-" + j);
                }
            }
            Set<String> got = new HashSet<>();
            while (got.size() < sent.size()) {
                Message<String> m = c.receive(10, TimeUnit.SECONDS);
                assertNotNull(m, "got " + got);
                got.add(m.getValue());
            }
            assertEquals(sent, got);
        } finally {
            for (Producer<String> p : producers) {
                p.close();
            }
        }
    }

    @Test
    void missingNamespaceIsNotFound() {
        String topic = "persistent://public/" + Env.uniqueName("nope") + "/t";
        // The partitioned metadata answers 404 ("Namespace not found").
        assertThrows(PulsarClientException.NotFoundException.class,
                () -> httpClient.newProducer().topic(topic).create());
    }
}
