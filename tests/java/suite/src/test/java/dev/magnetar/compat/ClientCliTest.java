package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Pulsar's own pulsar-client (PulsarClientTool) produce and consume. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ClientCliTest {
    static int count(String haystack, String needle) {
        int n = 0;
        for (int i = haystack.indexOf(needle); i >= 0; i = haystack.indexOf(needle, i + 1)) {
            n++;
        }
        return n;
    }

    @Test
    void produceThenConsume() throws Exception {
        String topic = Env.topic("cli");
        Env.CliResult prod = Env.runCli(60, Env.PULSAR_CLIENT, "--url", Env.BROKER_URL, "produce",
                "-m", "hello-cli", "-n", "10", "-k", "kk", topic);
        assertEquals(0, prod.exitCode(), prod.toString());
        assertTrue(prod.output().contains("10 messages successfully produced"), prod.toString());

        // what pulsar-client produced is really there, with the key
        try (PulsarClient client = Env.client();
             // BYTES: pulsar-client produced without a schema, and Pulsar refuses a STRING consumer
             // on such a topic (IncompatibleSchemaException)
             Consumer<byte[]> c = client.newConsumer(Schema.BYTES).topic(topic).subscriptionName("java")
                     .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
            for (int i = 0; i < 10; i++) {
                Message<byte[]> m = c.receive(10, TimeUnit.SECONDS);
                assertNotNull(m, "message " + i);
                assertEquals("hello-cli", new String(m.getValue(), java.nio.charset.StandardCharsets.UTF_8));
                assertEquals("kk", m.getKey());
            }
        }

        Env.CliResult cons = Env.runCli(60, Env.PULSAR_CLIENT, "--url", Env.BROKER_URL, "consume",
                "-s", "cli-sub", "-p", "Earliest", "-n", "10", topic);
        assertEquals(0, cons.exitCode(), cons.toString());
        assertTrue(cons.output().contains("10 messages successfully consumed"), cons.toString());
        assertEquals(10, count(cons.output(), "content:hello-cli"), cons.toString());
        assertEquals(10, count(cons.output(), "key:[kk]"), cons.toString());
    }
}
