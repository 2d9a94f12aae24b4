package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerEventListener;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.impl.ChunkMessageIdImpl;
import org.apache.pulsar.common.util.Murmur3_32Hash;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Seek to the id of a chunked message (issue 53, item 5) and the Failover consumer events of a
 * non-partitioned topic (issue 53, item 6), as the Java client sees them.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SeekChunkedFailoverEventsTest extends ClientTestBase {

    /** Small chunks keep the test fast: 3 chunks per message. */
    static final int CHUNK = 100 * 1024;

    static List<MessageId> receiveIds(Consumer<byte[]> c, int n) throws Exception {
        List<MessageId> got = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Message<byte[]> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m, "message " + i + " of " + n + " (got " + got + ")");
            got.add(m.getMessageId());
        }
        return got;
    }

    @Test
    void seekToAChunkedMessageId() throws Exception {
        String topic = Env.topic("seekchunk");
        byte[] payload = new byte[CHUNK * 5 / 2];
        new Random(53).nextBytes(payload);
        List<MessageId> sent = new ArrayList<>();
        try (Consumer<byte[]> c1 = client.newConsumer().topic(topic).subscriptionName("s")
                .startMessageIdInclusive().subscribe();
             Producer<byte[]> p = client.newProducer().topic(topic).enableBatching(false)
                     .enableChunking(true).chunkMaxMessageSize(CHUNK).create()) {
            for (int i = 0; i < 5; i++) {
                sent.add(p.send(payload));
            }
            ChunkMessageIdImpl id1 = assertInstanceOf(ChunkMessageIdImpl.class, sent.get(1));
            assertEquals(2, id1.getLastChunkMessageId().getEntryId() - id1.getFirstChunkMessageId().getEntryId(),
                    "3 chunks per message");
            assertEquals(sent, receiveIds(c1, 5));
            // The client seeks to the first chunk; an inclusive consumer gets that message again.
            c1.seek(sent.get(1));
            assertEquals(sent.subList(1, 5), receiveIds(c1, 4), "inclusive: from the message sought");
            assertNull(c1.receive(1, TimeUnit.SECONDS));
            // Nothing left to deliver to c2 before its seek: a chunked message half received when
            // the seek comes is lost by the C++ client (its chunk cache outlives the seek).
            c1.acknowledgeCumulative(sent.get(4));
        }
        try (Consumer<byte[]> c2 = client.newConsumer().topic(topic).subscriptionName("s").subscribe()) {
            assertNull(c2.receive(500, TimeUnit.MILLISECONDS), "all acknowledged");
            c2.seek(sent.get(1));
            assertEquals(sent.subList(2, 5), receiveIds(c2, 3), "exclusive: after the message sought");
            assertNull(c2.receive(1, TimeUnit.SECONDS));
            c2.seek(sent.get(3));
            assertEquals(sent.subList(4, 5), receiveIds(c2, 1));
        }
    }

    /** Counts ConsumerEventListener calls (partition -1 on a non-partitioned topic). */
    static final class Events implements ConsumerEventListener {
        final AtomicInteger active = new AtomicInteger();
        final AtomicInteger inactive = new AtomicInteger();

        @Override
        public void becameActive(Consumer<?> consumer, int partitionId) {
            assertEquals(-1, partitionId);
            active.incrementAndGet();
        }

        @Override
        public void becameInactive(Consumer<?> consumer, int partitionId) {
            assertEquals(-1, partitionId);
            inactive.incrementAndGet();
        }

        String counts() {
            return active.get() + " active, " + inactive.get() + " inactive";
        }
    }

    /**
     * The Failover consumer Pulsar makes active on a non-partitioned topic: consumers sorted by
     * name, 100 ring points each at hash(name + j) (a later consumer wins a collision), the first
     * point at or after hash(topic), wrapping (AbstractDispatcherSingleActiveConsumer).
     */
    static String predictedActive(String fullTopic, List<String> names) {
        List<String> sorted = new ArrayList<>(names);
        sorted.sort(null);
        TreeMap<Integer, String> ring = new TreeMap<>();
        for (String n : sorted) {
            for (int j = 0; j < 100; j++) {
                ring.put(Murmur3_32Hash.getInstance().makeHash((n + j).getBytes(StandardCharsets.UTF_8)) & Integer.MAX_VALUE, n);
            }
        }
        var e = ring.ceilingEntry(Murmur3_32Hash.getInstance().makeHash(fullTopic.getBytes(StandardCharsets.UTF_8)) & Integer.MAX_VALUE);
        return (e != null ? e : ring.firstEntry()).getValue();
    }

    /** A topic on which the second consumer c2 takes over from c1 (or not). */
    static String failoverTopic(boolean c2TakesOver) {
        while (true) {
            String topic = Env.topic("fo-events");
            if (predictedActive(topic, List.of("c1", "c2")).equals("c2") == c2TakesOver) {
                return topic;
            }
        }
    }

    /** Pulsar tells of a change activeConsumerFailoverDelayTimeMillis (1 s) after it. */
    static void settle() throws InterruptedException {
        Thread.sleep(2000);
    }

    void failoverEvents(boolean c2TakesOver) throws Exception {
        String topic = failoverTopic(c2TakesOver);
        Events e1 = new Events();
        Events e2 = new Events();
        Consumer<byte[]> c1 = client.newConsumer().topic(topic).subscriptionName("s").consumerName("c1")
                .subscriptionType(SubscriptionType.Failover).consumerEventListener(e1)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
        settle();
        assertEquals("1 active, 0 inactive", e1.counts(), "c1 alone");
        Consumer<byte[]> c2 = client.newConsumer().topic(topic).subscriptionName("s").consumerName("c2")
                .subscriptionType(SubscriptionType.Failover).consumerEventListener(e2)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe();
        settle();
        if (c2TakesOver) {
            // The active consumer changed: every consumer is told.
            assertEquals("1 active, 1 inactive", e1.counts(), "c1 after c2 took over");
            assertEquals("1 active, 0 inactive", e2.counts(), "c2 after taking over");
        } else {
            // Unchanged: only the newcomer is told it is inactive.
            assertEquals("1 active, 0 inactive", e1.counts(), "c1 still active");
            assertEquals("0 active, 1 inactive", e2.counts(), "c2 standby");
        }
        c1.close();
        settle();
        // c2 is told it is active only if it was not already.
        assertEquals(c2TakesOver ? "1 active, 0 inactive" : "1 active, 1 inactive", e2.counts(),
                "c2 after c1 closed");
        c2.close();
    }

    @Test
    void failoverEventsWhenTheNewcomerStaysStandby() throws Exception {
        failoverEvents(false);
    }

    @Test
    void failoverEventsWhenTheNewcomerTakesOver() throws Exception {
        failoverEvents(true);
    }
}
