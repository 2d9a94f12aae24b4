package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.DeadLetterPolicy;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Negative acks, ack timeout, dead-letter and retry topics with Pulsar 4's names. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AckRedeliveryTest extends ClientTestBase {
    @Test
    void negativeAckRedeliversWithCount() throws Exception {
        String topic = Env.topic("nack");
        try (Consumer<String> c = consumerOn(topic, "s")
                .subscriptionType(SubscriptionType.Shared)
                .negativeAckRedeliveryDelay(200, TimeUnit.MILLISECONDS).subscribe();
             Producer<String> p = plainProducer(topic)) {
            p.send("one");
            p.send("two");
            Message<String> m1 = c.receive(10, TimeUnit.SECONDS);
            Message<String> m2 = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m1);
            assertNotNull(m2);
            assertEquals(0, m1.getRedeliveryCount());
            c.acknowledge(m2);
            c.negativeAcknowledge(m1);
            Message<String> again = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(again, "nacked message redelivered");
            assertEquals("one", again.getValue());
            assertEquals(m1.getMessageId(), again.getMessageId());
            assertEquals(1, again.getRedeliveryCount());
            c.acknowledge(again);
            assertNull(c.receive(1, TimeUnit.SECONDS), "the acked one does not come back");
        }
    }

    @Test
    void ackTimeoutRedeliversUnacked() throws Exception {
        String topic = Env.topic("acktimeout");
        try (Consumer<String> c = consumerOn(topic, "s")
                .subscriptionType(SubscriptionType.Shared)
                .ackTimeout(1, TimeUnit.SECONDS).ackTimeoutTickTime(100, TimeUnit.MILLISECONDS)
                .subscribe();
             Producer<String> p = plainProducer(topic)) {
            p.send("late");
            Message<String> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m);
            assertEquals(0, m.getRedeliveryCount());
            long t0 = System.currentTimeMillis();
            Message<String> again = c.receive(15, TimeUnit.SECONDS);
            assertNotNull(again, "redelivered after the ack timeout");
            assertTrue(System.currentTimeMillis() - t0 >= 500, "not before the timeout");
            assertEquals("late", again.getValue());
            assertEquals(1, again.getRedeliveryCount());
            c.acknowledge(again);
        }
    }

    @Test
    void deadLetterTopicNamedTopicSubscriptionDlq() throws Exception {
        String topic = Env.topic("dlq");
        String dlq = topic + "-s-DLQ";
        try (Consumer<String> dlqConsumer = consumerOn(dlq, "check")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .subscribe();
             Consumer<String> c = consumerOn(topic, "s")
                     .subscriptionType(SubscriptionType.Shared)
                     .negativeAckRedeliveryDelay(100, TimeUnit.MILLISECONDS)
                     .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(2).build())
                     .subscribe();
             Producer<String> p = plainProducer(topic)) {
            p.newMessage().key("k").value("poison").property("x", "y").send();
            int deliveries = 0;
            Message<String> m;
            while ((m = c.receive(3, TimeUnit.SECONDS)) != null) {
                assertEquals("poison", m.getValue());
                deliveries++;
                c.negativeAcknowledge(m);
            }
            assertEquals(3, deliveries, "first delivery plus maxRedeliverCount redeliveries");
            Message<String> dead = dlqConsumer.receive(20, TimeUnit.SECONDS);
            assertNotNull(dead, "message on " + dlq);
            assertEquals("poison", dead.getValue());
            assertEquals("k", dead.getKey());
            assertEquals("y", dead.getProperty("x"));
            assertEquals(topic, dead.getProperty("REAL_TOPIC"));
            dlqConsumer.acknowledge(dead);
        }
        try (var admin = Env.admin()) {
            assertTrue(admin.topics().getList("public/default",
                    org.apache.pulsar.common.naming.TopicDomain.persistent).contains(dlq),
                    "the DLQ topic is listed: " + dlq);
        }
    }

    @Test
    void retryTopicNamedTopicSubscriptionRetry() throws Exception {
        String topic = Env.topic("retry");
        String retry = topic + "-s-RETRY";
        try (Consumer<String> retryWatcher = consumerOn(retry, "check")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .subscribe();
             Consumer<String> c = consumerOn(topic, "s")
                     .subscriptionType(SubscriptionType.Shared).enableRetry(true)
                     .deadLetterPolicy(DeadLetterPolicy.builder().maxRedeliverCount(5).build())
                     .subscribe();
             Producer<String> p = plainProducer(topic)) {
            p.send("again-later");
            Message<String> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m);
            c.reconsumeLater(m, 1, TimeUnit.SECONDS);
            // only arrival on the retry topic is checked here, not the delay
            Message<String> r = retryWatcher.receive(20, TimeUnit.SECONDS);
            assertNotNull(r, "message on " + retry);
            assertEquals("again-later", r.getValue());
            assertEquals("1", r.getProperty("RECONSUMETIMES"));
            assertEquals(topic, r.getProperty("REAL_TOPIC"));
            retryWatcher.acknowledge(r);
        }
    }
}
