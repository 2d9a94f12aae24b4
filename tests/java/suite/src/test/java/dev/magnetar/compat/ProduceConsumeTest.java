package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.BatcherBuilder;
import org.apache.pulsar.client.api.CompressionType;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Producers and consumers of every subscription type, batching, compression, chunking. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ProduceConsumeTest extends ClientTestBase {
    static List<Message<String>> receiveN(Consumer<String> c, int n, int timeoutMs)
            throws PulsarClientException {
        List<Message<String>> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (got.size() < n) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
                break;
            }
            Message<String> m = c.receive((int) left, TimeUnit.MILLISECONDS);
            if (m == null) {
                break;
            }
            got.add(m);
            c.acknowledge(m);
        }
        return got;
    }

    /** All messages until none arrives for quietMs. */
    static List<Message<String>> drain(Consumer<String> c, int quietMs) throws PulsarClientException {
        List<Message<String>> got = new ArrayList<>();
        Message<String> m;
        while ((m = c.receive(quietMs, TimeUnit.MILLISECONDS)) != null) {
            got.add(m);
            c.acknowledge(m);
        }
        return got;
    }

    @Test
    void exclusiveInOrderAndSecondConsumerRefused() throws Exception {
        String topic = Env.topic("excl");
        try (Consumer<String> c = consumerOn(topic, "s")
                .subscriptionType(SubscriptionType.Exclusive).subscribe();
             Producer<String> p = plainProducer(topic)) {
            MessageId prev = null;
            for (int i = 0; i < 100; i++) {
                MessageId id = p.send("m-" + i);
                if (prev != null) {
                    assertTrue(id.compareTo(prev) > 0, "message ids increase: " + prev + " then " + id);
                }
                prev = id;
            }
            List<Message<String>> got = receiveN(c, 100, 20000);
            assertEquals(100, got.size());
            for (int i = 0; i < 100; i++) {
                assertEquals("m-" + i, got.get(i).getValue());
            }
            assertThrows(PulsarClientException.ConsumerBusyException.class, () ->
                    consumerOn(topic, "s")
                            .subscriptionType(SubscriptionType.Exclusive).subscribe());
        }
    }

    @Test
    void sharedSpreadsWithoutDuplicates() throws Exception {
        String topic = Env.topic("shared");
        try (Consumer<String> c1 = consumerOn(topic, "s")
                .subscriptionType(SubscriptionType.Shared).receiverQueueSize(10).subscribe();
             Consumer<String> c2 = consumerOn(topic, "s")
                     .subscriptionType(SubscriptionType.Shared).receiverQueueSize(10).subscribe();
             Producer<String> p = plainProducer(topic)) {
            for (int i = 0; i < 200; i++) {
                p.sendAsync("m-" + i);
            }
            p.flush();
            Set<String> seen = new HashSet<>();
            int n1 = 0;
            int n2 = 0;
            long deadline = System.currentTimeMillis() + 30000;
            while (seen.size() < 200 && System.currentTimeMillis() < deadline) {
                for (Consumer<String> c : List.of(c1, c2)) {
                    Message<String> m = c.receive(50, TimeUnit.MILLISECONDS);
                    if (m != null) {
                        assertTrue(seen.add(m.getValue()), "duplicate " + m.getValue());
                        c.acknowledge(m);
                        if (c == c1) {
                            n1++;
                        } else {
                            n2++;
                        }
                    }
                }
            }
            assertEquals(200, seen.size());
            assertTrue(n1 > 0 && n2 > 0, "both Shared consumers got messages: " + n1 + " / " + n2);
        }
    }

    @Test
    void failoverOneActiveConsumerThenSwitchOver() throws Exception {
        String topic = Env.topic("failover");
        Consumer<String> c1 = consumerOn(topic, "s")
                .consumerName("c1").subscriptionType(SubscriptionType.Failover).subscribe();
        Consumer<String> c2 = consumerOn(topic, "s")
                .consumerName("c2").subscriptionType(SubscriptionType.Failover).subscribe();
        try (Producer<String> p = plainProducer(topic)) {
            for (int i = 0; i < 20; i++) {
                p.send("a-" + i);
            }
            // exactly one of them is active and gets everything, in order
            List<Message<String>> got1 = drain(c1, 2000);
            List<Message<String>> got2 = drain(c2, 500);
            assertTrue(got1.isEmpty() != got2.isEmpty(),
                    "one active consumer: c1 got " + got1.size() + ", c2 got " + got2.size());
            List<Message<String>> active = got1.isEmpty() ? got2 : got1;
            assertEquals(20, active.size());
            for (int i = 0; i < 20; i++) {
                assertEquals("a-" + i, active.get(i).getValue());
            }
            Consumer<String> standby = got1.isEmpty() ? c1 : c2;
            (got1.isEmpty() ? c2 : c1).close();
            for (int i = 0; i < 10; i++) {
                p.send("b-" + i);
            }
            List<Message<String>> after = receiveN(standby, 10, 20000);
            assertEquals(10, after.size(), "the standby took over");
            assertEquals("b-0", after.get(0).getValue());
        } finally {
            c1.close();
            c2.close();
        }
    }

    @Test
    void keySharedKeepsEachKeyOnOneConsumerInOrder() throws Exception {
        String topic = Env.topic("keyshared");
        try (Consumer<String> c1 = consumerOn(topic, "s")
                .subscriptionType(SubscriptionType.Key_Shared).subscribe();
             Consumer<String> c2 = consumerOn(topic, "s")
                     .subscriptionType(SubscriptionType.Key_Shared).subscribe();
             Producer<String> p = plainProducer(topic)) {
            int keys = 20;
            int perKey = 10;
            for (int i = 0; i < perKey; i++) {
                for (int k = 0; k < keys; k++) {
                    p.newMessage().key("k" + k).value("k" + k + ":" + i).sendAsync();
                }
            }
            p.flush();
            Map<String, Consumer<String>> owner = new HashMap<>();
            Map<String, Integer> next = new HashMap<>();
            int total = 0;
            long deadline = System.currentTimeMillis() + 30000;
            while (total < keys * perKey && System.currentTimeMillis() < deadline) {
                for (Consumer<String> c : List.of(c1, c2)) {
                    Message<String> m = c.receive(50, TimeUnit.MILLISECONDS);
                    if (m == null) {
                        continue;
                    }
                    String key = m.getKey();
                    Consumer<String> prev = owner.putIfAbsent(key, c);
                    assertTrue(prev == null || prev == c, "key " + key + " went to two consumers");
                    int seq = Integer.parseInt(m.getValue().split(":")[1]);
                    assertEquals(next.getOrDefault(key, 0), seq, "order of key " + key);
                    next.put(key, seq + 1);
                    c.acknowledge(m);
                    total++;
                }
            }
            assertEquals(keys * perKey, total);
            assertTrue(owner.containsValue(c1) && owner.containsValue(c2),
                    "20 keys spread over both consumers");
        }
    }

    @Test
    void defaultBatchingPacksMessagesIntoBatches() throws Exception {
        String topic = Env.topic("batch");
        try (Consumer<String> c = consumerOn(topic, "s")
                .subscribe();
             Producer<String> p = client.newProducer(Schema.STRING).topic(topic)
                     .enableBatching(true).batchingMaxPublishDelay(50, TimeUnit.MILLISECONDS)
                     .batchingMaxMessages(100).create()) {
            List<CompletableFuture<MessageId>> futures = new ArrayList<>();
            for (int i = 0; i < 500; i++) {
                futures.add(p.sendAsync("m-" + i));
            }
            p.flush();
            CompletableFuture.allOf(futures.toArray(new CompletableFuture[0])).get(30, TimeUnit.SECONDS);
            List<Message<String>> got = receiveN(c, 500, 30000);
            assertEquals(500, got.size());
            Map<String, Integer> perEntry = new HashMap<>();
            for (int i = 0; i < 500; i++) {
                Message<String> m = got.get(i);
                assertEquals("m-" + i, m.getValue());
                MessageIdAdv id = (MessageIdAdv) m.getMessageId();
                perEntry.merge(id.getLedgerId() + ":" + id.getEntryId(), 1, Integer::sum);
                assertTrue(id.getBatchIndex() >= 0, "a batched message has a batch index: " + id);
                assertEquals(futures.get(i).get(), m.getMessageId(), "send receipt id == received id");
            }
            assertTrue(perEntry.size() < 500 && perEntry.values().stream().anyMatch(n -> n > 1),
                    "500 messages in fewer entries: " + perEntry.size());
        }
    }

    @Test
    void keyBasedBatcherGroupsByKey() throws Exception {
        String topic = Env.topic("keybatch");
        try (Consumer<String> c = consumerOn(topic, "s")
                .subscriptionType(SubscriptionType.Key_Shared).subscribe();
             Producer<String> p = client.newProducer(Schema.STRING).topic(topic)
                     .enableBatching(true).batcherBuilder(BatcherBuilder.KEY_BASED)
                     .batchingMaxPublishDelay(50, TimeUnit.MILLISECONDS).create()) {
            for (int i = 0; i < 300; i++) {
                p.newMessage().key("k" + (i % 3)).value("k" + (i % 3) + ":" + i).sendAsync();
            }
            p.flush();
            List<Message<String>> got = receiveN(c, 300, 30000);
            assertEquals(300, got.size());
            Map<String, Set<String>> keysPerEntry = new HashMap<>();
            Map<String, Integer> sizes = new HashMap<>();
            for (Message<String> m : got) {
                MessageIdAdv id = (MessageIdAdv) m.getMessageId();
                String entry = id.getLedgerId() + ":" + id.getEntryId();
                keysPerEntry.computeIfAbsent(entry, e -> new HashSet<>()).add(m.getKey());
                sizes.merge(entry, 1, Integer::sum);
                assertEquals(m.getKey(), m.getValue().split(":")[0]);
            }
            for (var e : keysPerEntry.entrySet()) {
                assertEquals(1, e.getValue().size(), "one key per KEY_BASED batch: " + e);
            }
            assertTrue(sizes.values().stream().anyMatch(n -> n > 1), "some batches hold several messages");
        }
    }

    @ParameterizedTest
    @EnumSource(value = CompressionType.class, names = {"LZ4", "ZLIB", "ZSTD", "SNAPPY"})
    void compressionRoundTrip(CompressionType type) throws Exception {
        String topic = Env.topic("compr-" + type.name().toLowerCase());
        Random rnd = new Random(42);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < 2000; i++) {
            sb.append("telemetry-").append(i % 10).append(" ");
        }
        String big = sb.toString(); // ~30 KB, compressible
        try (Consumer<String> c = consumerOn(topic, "s")
                .subscribe();
             Producer<String> batched = client.newProducer(Schema.STRING).topic(topic)
                     .compressionType(type).enableBatching(true)
                     .batchingMaxPublishDelay(20, TimeUnit.MILLISECONDS).create();
             Producer<String> single = client.newProducer(Schema.STRING).topic(topic)
                     .compressionType(type).enableBatching(false).create()) {
            for (int i = 0; i < 50; i++) {
                batched.sendAsync("b-" + i + "-" + big.substring(0, 100 + i));
            }
            batched.flush();
            single.send(big);
            List<Message<String>> got = receiveN(c, 51, 30000);
            assertEquals(51, got.size());
            for (int i = 0; i < 50; i++) {
                assertEquals("b-" + i + "-" + big.substring(0, 100 + i), got.get(i).getValue());
            }
            assertEquals(big, got.get(50).getValue());
        }
        // the broker stored the compressed form: far less than the 30 KB + 50 * 150 B sent
        try (var admin = Env.admin()) {
            long stored = admin.topics().getStats(topic).getBytesInCounter();
            assertTrue(stored > 0 && stored < 20000, type + ": bytes in " + stored);
        }
    }

    @Test
    void chunkingCarriesAMessageBiggerThanMaxMessageSize() throws Exception {
        String topic = Env.topic("chunk");
        byte[] payload = new byte[7 * 1024 * 1024];
        new Random(7).nextBytes(payload);
        try (Consumer<byte[]> c = client.newConsumer().topic(topic).subscriptionName("s").subscribe();
             // 1 MiB chunks: Pulsar's own default chunk size (the broker's 5 MiB maxMessageSize
             // minus metadata) makes ~5 MiB bookie entries that the reference standalone's bookie
             // refuses (the send times out), so the suite names a chunk size both brokers take
             Producer<byte[]> p = client.newProducer().topic(topic).enableBatching(false)
                     .enableChunking(true).chunkMaxMessageSize(1024 * 1024).create()) {
            MessageId sent = p.send(payload);
            p.send("small".getBytes());
            Message<byte[]> m = c.receive(60, TimeUnit.SECONDS);
            assertNotNull(m, "chunked message received");
            assertArrayEquals(payload, m.getData());
            assertEquals(sent, m.getMessageId());
            c.acknowledge(m);
            Message<byte[]> m2 = c.receive(20, TimeUnit.SECONDS);
            assertNotNull(m2);
            assertEquals("small", new String(m2.getData()));
            c.acknowledge(m2);
        }
        // without chunking the same payload is refused (max message size from CONNECTED)
        try (Producer<byte[]> p = client.newProducer().topic(topic).enableBatching(false).create()) {
            assertThrows(PulsarClientException.class, () -> p.send(payload));
        }
    }

    @Test
    void metadataRoundTrip() throws Exception {
        String topic = Env.topic("meta");
        try (Consumer<String> c = consumerOn(topic, "s")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
             Producer<String> p = client.newProducer(Schema.STRING).topic(topic).producerName("prod-x")
                     .enableBatching(false).create()) {
            p.newMessage().key("the-key").value("v").property("a", "1").property("b", "2")
                    .eventTime(123456789L).send();
            Message<String> m = c.receive(20, TimeUnit.SECONDS);
            assertNotNull(m);
            assertEquals("v", m.getValue());
            assertEquals("the-key", m.getKey());
            assertEquals(Map.of("a", "1", "b", "2"), m.getProperties());
            assertEquals(123456789L, m.getEventTime());
            assertEquals("prod-x", m.getProducerName());
            assertTrue(m.getPublishTime() > 0);
            assertEquals(topic, m.getTopicName());
            assertNull(c.receive(200, TimeUnit.MILLISECONDS));
        }
    }
}
