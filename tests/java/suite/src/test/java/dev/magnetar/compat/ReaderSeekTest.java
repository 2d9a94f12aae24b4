package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Readers (earliest, latest, from an id, inclusive), seek by message id and by publish time. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ReaderSeekTest extends ClientTestBase {
    static List<String> readAll(Reader<String> r, int quietMs) throws Exception {
        List<String> got = new ArrayList<>();
        Message<String> m;
        while ((m = r.readNext(quietMs, TimeUnit.MILLISECONDS)) != null) {
            got.add(m.getValue());
        }
        return got;
    }

    @Test
    void readerFromEarliestLatestAndAnId() throws Exception {
        String topic = Env.topic("reader");
        List<MessageId> ids = produce(topic, "m-", 10);
        try (Reader<String> r = client.newReader(Schema.STRING).topic(topic)
                .startMessageId(MessageId.earliest).create()) {
            assertEquals(List.of("m-0", "m-1", "m-2", "m-3", "m-4", "m-5", "m-6", "m-7", "m-8", "m-9"),
                    readAll(r, 1500));
            assertFalse(r.hasMessageAvailable());
        }
        try (Reader<String> r = client.newReader(Schema.STRING).topic(topic)
                .startMessageId(ids.get(4)).create()) {
            assertEquals("m-5", r.readNext(10, TimeUnit.SECONDS).getValue(), "exclusive start id");
        }
        try (Reader<String> r = client.newReader(Schema.STRING).topic(topic)
                .startMessageId(ids.get(4)).startMessageIdInclusive().create()) {
            assertEquals("m-4", r.readNext(10, TimeUnit.SECONDS).getValue(), "inclusive start id");
        }
        try (Reader<String> r = client.newReader(Schema.STRING).topic(topic)
                .startMessageId(MessageId.latest).create()) {
            assertNull(r.readNext(500, TimeUnit.MILLISECONDS), "latest: nothing old");
            produce(topic, "new-", 1);
            Message<String> m = r.readNext(10, TimeUnit.SECONDS);
            assertNotNull(m);
            assertEquals("new-0", m.getValue());
        }
        try (Consumer<String> c = client.newConsumer(Schema.STRING).topic(topic).subscriptionName("x")
                .subscribe()) {
            MessageId last = c.getLastMessageId();
            assertEquals(11, countUpTo(ids.get(0), last));
        }
    }

    static int countUpTo(MessageId first, MessageId last) {
        var a = (org.apache.pulsar.client.api.MessageIdAdv) first;
        var b = (org.apache.pulsar.client.api.MessageIdAdv) last;
        assertEquals(a.getLedgerId(), b.getLedgerId());
        return (int) (b.getEntryId() - a.getEntryId() + 1);
    }

    @Test
    void seekByMessageIdAndEarliestLatest() throws Exception {
        String topic = Env.topic("seekid");
        List<MessageId> ids = produce(topic, "m-", 10);
        try (Consumer<String> c = client.newConsumer(Schema.STRING).topic(topic).subscriptionName("s")
                .subscriptionInitialPosition(org.apache.pulsar.client.api.SubscriptionInitialPosition.Earliest)
                .subscribe()) {
            for (int i = 0; i < 10; i++) {
                Message<String> m = c.receive(10, TimeUnit.SECONDS);
                assertEquals("m-" + i, m.getValue());
                c.acknowledge(m);
            }
            c.seek(ids.get(3));
            Message<String> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m, "messages again after seek");
            assertEquals("m-4", m.getValue(), "the Java consumer resumes after the id it seeks to (as Pulsar)");
            c.seek(MessageId.earliest);
            assertEquals("m-0", c.receive(10, TimeUnit.SECONDS).getValue());
            c.seek(MessageId.latest);
            assertNull(c.receive(1, TimeUnit.SECONDS));
        }
    }

    @Test
    void seekByPublishTime() throws Exception {
        String topic = Env.topic("seektime");
        produce(topic, "before-", 5);
        Thread.sleep(300);
        long t = System.currentTimeMillis();
        Thread.sleep(300);
        produce(topic, "after-", 5);
        try (Consumer<String> c = client.newConsumer(Schema.STRING).topic(topic).subscriptionName("s")
                .subscriptionInitialPosition(org.apache.pulsar.client.api.SubscriptionInitialPosition.Earliest)
                .subscribe()) {
            Message<String> first = c.receive(10, TimeUnit.SECONDS);
            assertEquals("before-0", first.getValue());
            c.seek(t);
            List<String> got = new ArrayList<>();
            Message<String> m;
            while ((m = c.receive(1500, TimeUnit.MILLISECONDS)) != null) {
                got.add(m.getValue());
                assertTrue(m.getPublishTime() >= t, "published at or after the seek time");
                c.acknowledge(m);
            }
            assertEquals(List.of("after-0", "after-1", "after-2", "after-3", "after-4"), got);
            c.seek(0L);
            assertEquals("before-0", c.receive(10, TimeUnit.SECONDS).getValue(), "seek(0) rewinds to the start");
        }
    }
}
