package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.MessageRoutingMode;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.TableView;
import org.apache.pulsar.client.api.TopicMessageId;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Partitioned topics, regex (pattern) consumers that discover new topics, TableView. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TopicsTest extends ClientAdminTestBase {
    @Test
    void partitionedTopicProduceConsumeIdsCarryPartition() throws Exception {
        String topic = Env.topic("part");
        admin.topics().createPartitionedTopic(topic, 3);
        assertEquals(3, client.getPartitionsForTopic(topic).get(10, TimeUnit.SECONDS).size());
        try (Consumer<String> c = consumerOn(topic, "s")
                .subscribe();
             Producer<String> p = client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                     .messageRoutingMode(MessageRoutingMode.RoundRobinPartition).create()) {
            Set<Integer> sentPartitions = new HashSet<>();
            for (int i = 0; i < 30; i++) {
                MessageIdAdv id = (MessageIdAdv) p.send("m-" + i);
                sentPartitions.add(id.getPartitionIndex());
            }
            assertEquals(Set.of(0, 1, 2), sentPartitions);
            Map<Integer, Integer> perPartition = new HashMap<>();
            Set<String> seen = new HashSet<>();
            for (int i = 0; i < 30; i++) {
                Message<String> m = c.receive(10, TimeUnit.SECONDS);
                assertNotNull(m, "message " + i + " of 30");
                seen.add(m.getValue());
                int idx = ((MessageIdAdv) m.getMessageId()).getPartitionIndex();
                String owner = ((TopicMessageId) m.getMessageId()).getOwnerTopic();
                assertEquals(topic + "-partition-" + idx, owner);
                assertEquals(owner, m.getTopicName());
                perPartition.merge(idx, 1, Integer::sum);
                c.acknowledge(m);
            }
            assertEquals(30, seen.size());
            assertEquals(Map.of(0, 10, 1, 10, 2, 10), perPartition, "round robin over 3 partitions");
        }
        assertEquals(3, admin.topics().getPartitionedTopicMetadata(topic).partitions);
    }

    @Test
    void patternConsumerSeesTopicCreatedLater() throws Exception {
        String base = Env.uniqueName("pat");
        String t1 = "persistent://public/default/" + base + "-one";
        String t2 = "persistent://public/default/" + base + "-two";
        admin.topics().createNonPartitionedTopic(t1);
        try (Consumer<String> c = client.newConsumer(Schema.STRING)
                .topicsPattern(Pattern.compile("persistent://public/default/" + base + "-.*"))
                .subscriptionName("s").subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .patternAutoDiscoveryPeriod(1, TimeUnit.SECONDS).subscribe();
             Producer<String> p1 = client.newProducer(Schema.STRING).topic(t1).create()) {
            p1.send("from-one");
            Message<String> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m);
            assertEquals("from-one", m.getValue());
            c.acknowledge(m);
            try (Producer<String> p2 = client.newProducer(Schema.STRING).topic(t2).create()) {
                p2.send("from-two");
                Message<String> m2 = c.receive(30, TimeUnit.SECONDS);
                assertNotNull(m2, "the pattern consumer discovered " + t2);
                assertEquals("from-two", m2.getValue());
                assertEquals(t2, m2.getTopicName());
                c.acknowledge(m2);
            }
        }
    }

    @Test
    void tableViewHoldsLatestValuePerKey() throws Exception {
        String topic = Env.topic("table");
        try (Producer<String> p = plainProducer(topic)) {
            p.newMessage().key("a").value("1").send();
            p.newMessage().key("b").value("2").send();
            p.newMessage().key("a").value("3").send();
            p.newMessage().key("c").value("4").send();
            p.newMessage().key("c").value(null).send(); // tombstone
            try (TableView<String> tv = client.newTableView(Schema.STRING).topic(topic).create()) {
                Map<String, String> snapshot = new HashMap<>();
                tv.forEach(snapshot::put);
                assertEquals(Map.of("a", "3", "b", "2"), snapshot);
                Map<String, String> updates = new java.util.concurrent.ConcurrentHashMap<>();
                tv.listen(updates::put);
                p.newMessage().key("b").value("5").send();
                assertTrue(Env.waitFor(10000, () -> "5".equals(tv.get("b"))), "update seen: " + tv.get("b"));
                assertEquals("5", updates.get("b"));
                assertEquals(2, tv.size());
            }
        }
    }
}
