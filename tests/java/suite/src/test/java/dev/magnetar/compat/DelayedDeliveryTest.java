package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.common.policies.data.DelayedDeliveryPolicies;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** deliverAfter on Shared and Exclusive subscriptions, and reconsumeLater through the retry topic. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class DelayedDeliveryTest extends ClientTestBase {
    @Test
    void deliverAfterHoldsSharedNotExclusive() throws Exception {
        String topic = Env.topic("delayed");
        try (Consumer<String> shared = client.newConsumer(Schema.STRING).topic(topic)
                .subscriptionName("shared").subscriptionType(SubscriptionType.Shared).subscribe();
             Consumer<String> excl = client.newConsumer(Schema.STRING).topic(topic)
                     .subscriptionName("excl").subscriptionType(SubscriptionType.Exclusive).subscribe();
             Producer<String> p = client.newProducer(Schema.STRING).topic(topic).create()) {
            long sent = System.currentTimeMillis();
            p.newMessage().value("late").deliverAfter(3, TimeUnit.SECONDS).send();
            p.send("now");
            Message<String> e1 = excl.receive(5, TimeUnit.SECONDS);
            assertNotNull(e1);
            assertEquals("late", e1.getValue(), "Exclusive: at once, in order");
            Message<String> s1 = shared.receive(5, TimeUnit.SECONDS);
            assertNotNull(s1);
            assertEquals("now", s1.getValue(), "the message behind a delayed one is not held");
            shared.acknowledge(s1);
            Message<String> s2 = shared.receive(10, TimeUnit.SECONDS);
            assertNotNull(s2);
            assertEquals("late", s2.getValue());
            long waited = System.currentTimeMillis() - sent;
            // Not strict by default: at most one tick (1 s) early.
            assertTrue(waited >= 1800, "delivered after " + waited + " ms");
            shared.acknowledge(s2);
        }
    }

    @Test
    void reconsumeLaterGoesThroughTheRetryTopic() throws Exception {
        String topic = Env.topic("retry");
        try (Consumer<String> c = client.newConsumer(Schema.STRING).topic(topic).subscriptionName("s")
                .subscriptionType(SubscriptionType.Shared).enableRetry(true).subscribe();
             Producer<String> p = client.newProducer(Schema.STRING).topic(topic).create()) {
            p.send("job");
            Message<String> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m);
            long asked = System.currentTimeMillis();
            c.reconsumeLater(m, 3, TimeUnit.SECONDS);
            assertNull(c.receive(1, TimeUnit.SECONDS), "not before the delay");
            Message<String> again = c.receive(15, TimeUnit.SECONDS);
            assertNotNull(again, "redelivered from the retry topic");
            long waited = System.currentTimeMillis() - asked;
            assertEquals("job", again.getValue());
            assertEquals("1", again.getProperty("RECONSUMETIMES"));
            assertTrue(waited >= 1800, "redelivered after " + waited + " ms");
            c.acknowledge(again);
        }
    }

    @Test
    void delayOverTheNamespaceMaximumIsRefused() throws Exception {
        String ns = "public/" + Env.uniqueName("delayed-max");
        try (PulsarAdmin admin = Env.admin()) {
            admin.namespaces().createNamespace(ns);
            admin.namespaces().setDelayedDeliveryMessages(ns, DelayedDeliveryPolicies.builder()
                    .active(true).tickTime(1000).maxDeliveryDelayInMillis(2000).build());
            assertEquals(2000, admin.namespaces().getDelayedDelivery(ns).getMaxDeliveryDelayInMillis());
            String topic = "persistent://" + ns + "/" + Env.uniqueName("t");
            try (Producer<String> p = client.newProducer(Schema.STRING).topic(topic)
                    .enableBatching(false).create()) {
                // The policy reaches Pulsar's topic asynchronously.
                assertTrue(Env.waitFor(20000, () -> {
                    try {
                        p.newMessage().value("x").deliverAfter(30, TimeUnit.SECONDS).send();
                        return false;
                    } catch (PulsarClientException e) {
                        return e instanceof PulsarClientException.NotAllowedException
                                && e.getMessage().contains(
                                        "Exceeds max allowed delivery delay of 2000 milliseconds");
                    }
                }));
                p.newMessage().value("ok").deliverAfter(1, TimeUnit.SECONDS).send();
            }
        }
    }
}
