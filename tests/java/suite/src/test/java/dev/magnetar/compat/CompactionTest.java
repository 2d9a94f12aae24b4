package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.TableView;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Topic compaction through pulsar-admin (compact, compaction-status), a readCompacted reader and a
 * TableView that loads from the compacted view.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class CompactionTest extends ClientTestBase {
    /** key=value of every message a reader gets until none is available. */
    static List<String> readAll(String topic, boolean compacted) throws Exception {
        List<String> out = new ArrayList<>();
        try (Reader<String> r = client.newReader(Schema.STRING).topic(topic)
                .startMessageId(MessageId.earliest).readCompacted(compacted).create()) {
            while (r.hasMessageAvailable()) {
                Message<String> m = r.readNext(10, TimeUnit.SECONDS);
                assertNotNull(m, "hasMessageAvailable but nothing read");
                out.add(m.getKey() + "=" + m.getValue());
            }
        }
        return out;
    }

    @Test
    void compactThenReadCompactedAndTableView() throws Exception {
        String topic = Env.topic("compact");
        try (Producer<String> p = plainProducer(topic)) {
            p.newMessage().key("k1").value("v1").send();
            p.newMessage().key("k2").value("v1").send();
            p.newMessage().key("k1").value("v2").send();
            p.newMessage().key("k3").value("v1").send();
            p.newMessage().key("k2").value(null).send();  // null value: removes k2
            p.newMessage().key("k1").value("v3").send();

            assertTrue(Env.adminOk("topics", "compaction-status", topic).contains("Compaction has not been run for " + topic));
            assertTrue(Env.adminOk("topics", "compact", topic).contains("Topic compaction requested"));
            String status = Env.adminOk("topics", "compaction-status", "-w", topic);
            assertTrue(status.contains("Compaction was a success"), status);

            p.newMessage().key("k4").value("v1").send();  // after the horizon: the live tail

            // The latest value per key in position order, tombstoned k2 gone, then the tail.
            assertEquals(List.of("k3=v1", "k1=v3", "k4=v1"), readAll(topic, true));
            assertEquals(7, readAll(topic, false).size());

            try (TableView<String> tv = client.newTableView(Schema.STRING).topic(topic).create()) {
                Map<String, String> snapshot = new HashMap<>();
                tv.forEach(snapshot::put);
                assertEquals(Map.of("k1", "v3", "k3", "v1", "k4", "v1"), snapshot);
                // A live null value deletes the key from the view.
                p.newMessage().key("k1").value(null).send();
                assertTrue(Env.waitFor(10000, () -> !tv.containsKey("k1")), "k1 still " + tv.get("k1"));
                assertFalse(tv.containsKey("k2"));
                assertEquals(2, tv.size());
            }
        }
    }
}
