package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * pulsar-perf produce and pulsar-perf consume on one topic for perf.duration seconds (default 20)
 * at perf.rate msg/s (default 2000; 0 = as fast as possible) of perf.size bytes (default 1024):
 * every message sent is received, nothing fails. Prints one summary line per tool.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class PerfIT {
    static final int DURATION = Integer.getInteger("perf.duration", 20);
    static final int RATE = Integer.getInteger("perf.rate", 2000);
    static final int SIZE = Integer.getInteger("perf.size", 1024);

    static final Pattern THROUGHPUT_SENT = Pattern.compile(
            "Aggregated throughput stats --- (\\d+) records sent --- ([\\d.,]+) msg/s --- ([\\d.,]+) Mbit/s");
    static final Pattern THROUGHPUT_RECEIVED = Pattern.compile(
            "Aggregated throughput stats --- (\\d+) records received --- ([\\d.,]+) msg/s --- ([\\d.,]+) Mbit/s"
                    + "(?: --- AckRate: ([\\d.,]+)\\s*msg/s --- ack failed (\\d+) msg)?");
    static final Pattern LATENCY = Pattern.compile(
            "Aggregated latency stats --- Latency: mean: +([\\d.,]+) ms - med: +([\\d.,]+) - 95pct: +([\\d.,]+)"
                    + " - 99pct: +([\\d.,]+) - 99.9pct: +([\\d.,]+) - 99.99pct: +([\\d.,]+)"
                    + " - 99.999pct: +([\\d.,]+) - Max: +([\\d.,]+)");

    static double num(String s) {
        return Double.parseDouble(s.replace(",", ""));
    }

    static Map<String, Double> latency(String out, String what) {
        Matcher m = LATENCY.matcher(out);
        assertTrue(m.find(), what + ": no aggregated latency line in\n" + out);
        Map<String, Double> l = new LinkedHashMap<>();
        String[] names = {"mean", "p50", "p95", "p99", "p99.9", "p99.99", "p99.999", "max"};
        for (int i = 0; i < names.length; i++) {
            l.put(names[i], num(m.group(i + 1)));
        }
        return l;
    }

    static String fmt(Map<String, Double> l) {
        StringBuilder sb = new StringBuilder();
        for (var e : l.entrySet()) {
            sb.append(' ').append(e.getKey()).append('=').append(String.format("%.3f", e.getValue())).append("ms");
        }
        return sb.toString().trim();
    }

    @Test
    void produceAndConsumeOneTopic() throws Exception {
        String topic = Env.topic("perf");
        try (PulsarAdmin admin = Env.admin()) {
            admin.topics().createNonPartitionedTopic(topic);
        }
        Path consOut = Files.createTempFile("perf-consume", ".out");
        ProcessBuilder cpb = new ProcessBuilder(Env.cliCommand(Env.PULSAR_PERF, "consume",
                "-u", Env.BROKER_URL, "-ss", "perf-sub", "-sp", "Earliest",
                "-time", String.valueOf(DURATION + 120), "-i", "5", topic));
        cpb.redirectErrorStream(true).redirectOutput(consOut.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        Process consumer = cpb.start();
        try (PulsarAdmin admin = Env.admin()) {
            assertTrue(Env.waitFor(60000, () -> {
                try {
                    var sub = admin.topics().getStats(topic).getSubscriptions().get("perf-sub");
                    return sub != null && !sub.getConsumers().isEmpty();
                } catch (Exception e) {
                    return false;
                }
            }), "pulsar-perf consume subscribed\n" + Files.readString(consOut));

            Env.CliResult prod = Env.runCli(DURATION + 120, Env.PULSAR_PERF, "produce",
                    "-u", Env.BROKER_URL, "-au", Env.ADMIN_URL, "-r", String.valueOf(RATE),
                    "-s", String.valueOf(SIZE), "-time", String.valueOf(DURATION), "-i", "5", topic);
            String pout = prod.output();
            assertEquals(0, prod.exitCode(), "pulsar-perf produce\n" + pout);
            Matcher sent = THROUGHPUT_SENT.matcher(pout);
            assertTrue(sent.find(), "no aggregated throughput line\n" + pout);
            long nSent = Long.parseLong(sent.group(1));
            assertTrue(nSent > 0, pout);
            assertTrue(!pout.contains("Exception") && !pout.contains("ERROR"), "no errors\n" + pout);
            Map<String, Double> platency = latency(pout, "produce");

            // the producer has exited: what the broker accepted is final (the tool's own total
            // may leave out the last few sends whose receipts came after it printed)
            long nStored = admin.topics().getStats(topic).getMsgInCounter();
            assertTrue(nStored >= nSent, "broker stored " + nStored + " of " + nSent + " reported sent");
            // wait until the consumer has everything, then stop it (it prints its totals on exit)
            boolean drained = Env.waitFor(60000, () -> {
                try {
                    var sub = admin.topics().getStats(topic).getSubscriptions().get("perf-sub");
                    return sub != null && sub.getMsgBacklog() == 0 && sub.getMsgOutCounter() >= nStored;
                } catch (Exception e) {
                    return false;
                }
            });
            var topicStats = admin.topics().getStats(topic);
            consumer.destroy(); // SIGTERM: its shutdown hook prints the aggregated stats
            assertTrue(consumer.waitFor(60, TimeUnit.SECONDS), "pulsar-perf consume stopped");
            String cout = Files.readString(consOut, StandardCharsets.UTF_8);
            assertTrue(drained, "subscription drained: " + topicStats.getSubscriptions().get("perf-sub")
                    + "\n" + cout);

            Matcher rec = THROUGHPUT_RECEIVED.matcher(cout);
            assertTrue(rec.find(), "no aggregated throughput line from pulsar-perf consume\n" + cout);
            long nReceived = Long.parseLong(rec.group(1));
            assertEquals(nStored, nReceived, "every message received\n" + cout);
            if (rec.group(5) != null) {
                assertEquals(0, Long.parseLong(rec.group(5)), "ack failures\n" + cout);
            }
            assertTrue(!cout.contains("Exception") && !cout.contains(" ERROR "), "no errors\n" + cout);
            Map<String, Double> clatency = latency(cout, "consume");

            String kind = Env.BROKER_KIND.isEmpty() ? "broker" : Env.BROKER_KIND;
            System.out.printf("PERF %s produce: %d msgs x %d B in %d s at -r %d: %.1f msg/s, %.3f Mbit/s;"
                            + " publish latency %s%n",
                    kind, nSent, SIZE, DURATION, RATE, num(sent.group(2)), num(sent.group(3)), fmt(platency));
            System.out.printf("PERF %s consume: %d msgs received (%d stored by the broker): %.1f msg/s, %.3f Mbit/s;"
                            + " end-to-end latency %s%n",
                    kind, nReceived, nStored, num(rec.group(2)), num(rec.group(3)), fmt(clatency));
        } finally {
            if (consumer.isAlive()) {
                consumer.destroyForcibly();
            }
            Files.deleteIfExists(consOut);
        }
    }
}
