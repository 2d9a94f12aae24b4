package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.MessageIdAdv;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Pulsar's own pulsar-admin (PulsarAdminTool) run as a subprocess against the broker. */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class AdminCliTest extends ClientTestBase {
    static final ObjectMapper JSON = new ObjectMapper();
    /** pulsar-admin ARGS, which must exit 0; returns its stdout. */
    static String ok(String... args) throws Exception {
        return Env.adminOk(args);
    }

    /** pulsar-admin ARGS, which must fail; returns stdout + stderr. */
    static String fails(String... args) throws Exception {
        Env.CliResult r = Env.admin(args);
        assertNotEquals(0, r.exitCode(), "pulsar-admin " + String.join(" ", args) + " should fail\n" + r);
        return r.output();
    }

    static JsonNode json(String s) throws Exception {
        return JSON.readTree(s);
    }

    static List<String> lines(String s) {
        List<String> out = new ArrayList<>();
        for (String l : s.split("\n")) {
            if (!l.isBlank()) {
                out.add(l.trim());
            }
        }
        return out;
    }

    static long backlog(String topic, String sub) throws Exception {
        return json(ok("topics", "stats", topic)).path("subscriptions").path(sub).path("msgBacklog").asLong(-1);
    }

    static void awaitBacklog(String topic, String sub, long want) throws Exception {
        long deadline = System.currentTimeMillis() + 15000;
        long got = backlog(topic, sub);
        while (got != want && System.currentTimeMillis() < deadline) {
            Thread.sleep(300);
            got = backlog(topic, sub);
        }
        assertEquals(want, got, "backlog of " + sub + " on " + topic);
    }

    static String pos(MessageId id) {
        MessageIdAdv a = (MessageIdAdv) id;
        return a.getLedgerId() + ":" + a.getEntryId();
    }

    // ---- tenants, namespaces ----------------------------------------------------------------

    @Test
    void tenantsCreateListGetDelete() throws Exception {
        String tenant = Env.uniqueName("tenant");
        ok("tenants", "create", tenant, "--allowed-clusters", "standalone");
        assertTrue(lines(ok("tenants", "list")).contains(tenant));
        JsonNode info = json(ok("tenants", "get", tenant));
        assertEquals("standalone", info.path("allowedClusters").path(0).asText(), info.toString());
        assertTrue(fails("tenants", "create", tenant, "--allowed-clusters", "standalone")
                .contains("already exist"), "second create: 409 Tenant already exists");
        ok("tenants", "delete", tenant);
        assertFalse(lines(ok("tenants", "list")).contains(tenant));
        assertTrue(fails("tenants", "get", tenant).contains("does not exist"));
    }

    @Test
    void namespacesLifecycleAndPolicies() throws Exception {
        String tenant = Env.uniqueName("nst");
        String ns = tenant + "/ns1";
        ok("tenants", "create", tenant, "--allowed-clusters", "standalone");
        ok("namespaces", "create", ns, "--clusters", "standalone");
        assertEquals(List.of(ns), lines(ok("namespaces", "list", tenant)));
        JsonNode policies = json(ok("namespaces", "policies", ns));
        assertEquals("standalone", policies.path("replication_clusters").path(0).asText(), policies.toString());
        assertEquals(List.of("standalone"), lines(ok("namespaces", "get-clusters", ns)));

        ok("namespaces", "set-subscription-expiration-time", ns, "-t", "30");
        assertEquals("30", ok("namespaces", "get-subscription-expiration-time", ns));
        assertEquals(30, json(ok("namespaces", "policies", ns)).path("subscription_expiration_time_minutes").asInt());

        // auto topic creation policy: a new topic in the namespace becomes partitioned with 2
        ok("namespaces", "set-auto-topic-creation", ns, "--enable", "--type", "partitioned",
                "--num-partitions", "2");
        JsonNode auto = json(ok("namespaces", "get-auto-topic-creation", ns));
        assertEquals("partitioned", auto.path("topicType").asText(), auto.toString());
        assertEquals(2, auto.path("defaultNumPartitions").asInt(), auto.toString());
        String autoTopic = "persistent://" + ns + "/auto-part";
        produce(autoTopic, "x", 1);
        assertEquals(2, client.getPartitionsForTopic(autoTopic).get(10, TimeUnit.SECONDS).size());
        ok("namespaces", "remove-auto-topic-creation", ns);
        assertFalse(ok("namespaces", "get-auto-topic-creation", ns).contains("partitioned"));
        String plainTopic = "persistent://" + ns + "/auto-plain";
        produce(plainTopic, "y", 1);
        assertEquals(1, client.getPartitionsForTopic(plainTopic).get(10, TimeUnit.SECONDS).size(),
                "back to the broker default: non-partitioned");

        ok("namespaces", "unload", ns);
        // after the unload the topics are served again
        produce(plainTopic, "z", 1);

        assertTrue(fails("namespaces", "delete", ns).length() > 0, "not empty: refused");
        ok("topics", "delete-partitioned-topic", autoTopic);
        ok("topics", "delete", plainTopic);
        ok("namespaces", "delete", ns);
        assertEquals(List.of(), lines(ok("namespaces", "list", tenant)));
        ok("tenants", "delete", tenant);
    }

    // ---- data lifecycle: backlog quota, message TTL, expiry, inactive topics ---------------

    @Test
    void backlogQuotaTtlAndExpiry() throws Exception {
        String ns = "public/" + Env.uniqueName("life");
        ok("namespaces", "create", ns);
        ok("namespaces", "set-backlog-quota", ns, "--limit", "4K", "--policy", "producer_exception");
        // get-backlog-quotas prints Java's Map.toString; the policies are JSON.
        assertTrue(ok("namespaces", "get-backlog-quotas", ns).contains("destination_storage"));
        JsonNode quotas = json(ok("namespaces", "policies", ns)).path("backlog_quota_map");
        assertEquals(4096, quotas.path("destination_storage").path("limitSize").asLong(), quotas.toString());
        assertEquals("producer_exception", quotas.path("destination_storage").path("policy").asText());
        ok("namespaces", "set-message-ttl", ns, "-ttl", "3600");
        assertEquals("3600", ok("namespaces", "get-message-ttl", ns));
        ok("namespaces", "set-inactive-topic-policies", ns, "-e", "-t", "1h", "-m",
                "delete_when_subscriptions_caught_up");
        JsonNode inactive = json(ok("namespaces", "get-inactive-topic-policies", ns));
        assertEquals("delete_when_subscriptions_caught_up", inactive.path("inactiveTopicDeleteMode").asText(),
                inactive.toString());
        assertEquals(3600, inactive.path("maxInactiveDurationSeconds").asInt());

        String t = "persistent://" + ns + "/quota";
        ok("topics", "create-subscription", "-s", "sub", t);
        String payload = "x".repeat(1024);
        List<MessageId> ids = produce(t, payload, 8);
        // Over the 4 KB quota: a new producer is refused. The Java client takes the refusal as
        // retriable and gives up only after its operation timeout and the next backoff (~80 s at
        // the suite's 30 s), so this check uses a client with a 3 s timeout.
        try (PulsarClient quick = PulsarClient.builder().serviceUrl(Env.BROKER_URL)
                .operationTimeout(3, TimeUnit.SECONDS).build()) {
            assertThrows(PulsarClientException.ProducerBlockedQuotaExceededException.class,
                    () -> quick.newProducer(Schema.STRING).topic(t).create());
        }
        assertEquals(4096, json(ok("topics", "stats", t)).path("backlogQuotaLimitSize").asLong());

        // Expire up to (and including) the 5th message: 3 left; then everything older than 1 s.
        ok("topics", "expire-messages", "-s", "sub", "-p", pos(ids.get(4)), t);
        awaitBacklog(t, "sub", 3);
        JsonNode sub = json(ok("topics", "stats", t)).path("subscriptions").path("sub");
        assertEquals(5, sub.path("totalMsgExpired").asLong(), sub.toString());
        Thread.sleep(1100);
        ok("topics", "expire-messages", "-s", "sub", "-t", "1", t);
        awaitBacklog(t, "sub", 0);
        client.newProducer(Schema.STRING).topic(t).create().close();  // under the quota again

        ok("namespaces", "remove-backlog-quota", ns);
        assertEquals(0, json(ok("namespaces", "policies", ns)).path("backlog_quota_map").size());
        ok("namespaces", "remove-message-ttl", ns);
        ok("topics", "delete", t);
        ok("namespaces", "delete", ns);
    }

    // ---- topics -----------------------------------------------------------------------------

    @Test
    void topicsCreateListStatsDelete() throws Exception {
        String t = Env.topic("adm");
        String part = Env.topic("admpart");
        String props = Env.topic("admprops");
        ok("topics", "create", t);
        ok("topics", "create-partitioned-topic", part, "-p", "3");
        ok("topics", "create", props, "-m", "owner=team-a", "-m", "tier=gold");
        assertTrue(lines(ok("topics", "list", "public/default")).contains(t));
        List<String> partitioned = lines(ok("topics", "list-partitioned-topics", "public/default"));
        assertTrue(partitioned.contains(part), partitioned.toString());
        assertFalse(partitioned.contains(t));
        // pulsar-admin prints a map as lines "key    value"
        assertEquals(List.of("owner    team-a", "tier    gold"),
                lines(ok("topics", "get-properties", props)).stream().sorted().toList());

        ok("topics", "create-subscription", "-s", "sub", t);
        produce(t, "msg-", 10);
        JsonNode stats = json(ok("topics", "stats", t));
        assertEquals(10, stats.path("msgInCounter").asLong(), stats.toString());
        assertEquals(10, stats.path("subscriptions").path("sub").path("msgBacklog").asLong(), stats.toString());

        produce(part, "p-", 6);
        JsonNode pstats = json(ok("topics", "partitioned-stats", part));
        assertEquals(3, pstats.path("metadata").path("partitions").asInt(), pstats.toString());
        assertEquals(6, pstats.path("msgInCounter").asLong(), pstats.toString());
        JsonNode perPart = json(ok("topics", "partitioned-stats", "--per-partition", part));
        assertEquals(3, perPart.path("partitions").size(), perPart.toString());

        JsonNode internal = json(ok("topics", "stats-internal", t));
        assertEquals(10, internal.path("entriesAddedCounter").asLong(), internal.toString());
        assertTrue(internal.path("cursors").has("sub"), internal.toString());
        JsonNode info = json(ok("topics", "info-internal", t));
        assertTrue(info.path("ledgers").isArray() && info.path("ledgers").size() > 0, info.toString());
        assertTrue(info.path("cursors").has("sub"), info.toString());

        assertFalse(fails("topics", "stats", Env.topic("missing")).isEmpty());

        ok("topics", "delete", t);
        assertFalse(lines(ok("topics", "list", "public/default")).contains(t));
        ok("topics", "delete-partitioned-topic", part);
        assertFalse(lines(ok("topics", "list-partitioned-topics", "public/default")).contains(part));
    }

    @Test
    void topicsMessagesAndBacklog() throws Exception {
        String t = Env.topic("admmsg");
        ok("topics", "create", t);
        ok("topics", "create-subscription", "-s", "sub", t);
        List<MessageId> ids = produce(t, "msg-", 5);
        Thread.sleep(1200);
        Instant between = Instant.now();
        Thread.sleep(1200);
        ids.addAll(produce(t, "msg-", 5).stream().toList());

        // pulsar-admin 4.0.8 exits 0 even when the peek request fails: check what it printed
        Env.CliResult peekRun = Env.admin("topics", "peek-messages", "-s", "sub", "-n", "2", t);
        String peek = peekRun.stdout();
        assertTrue(peek.contains("msg-0") && peek.contains("msg-1") && !peek.contains("msg-2"), peekRun.toString());
        assertTrue(peek.contains(pos(ids.get(0))), "peek shows the message id: " + peek);

        String byTime = ok("topics", "get-message-id", "-d", between.toString(), t);
        assertTrue(idMatches(byTime, ids.get(5)), "first message at or after the time is msg-5 ("
                + pos(ids.get(5)) + "): " + byTime);

        String last = ok("topics", "last-message-id", t);
        assertTrue(idMatches(last, ids.get(9)), "last message id " + pos(ids.get(9)) + ": " + last);

        long size = Long.parseLong(ok("topics", "get-backlog-size", "-m", pos(ids.get(0)), t));
        assertTrue(size > 0 && size < 100_000, "backlog size in bytes: " + size);
        long sizeFrom8 = Long.parseLong(ok("topics", "get-backlog-size", "-m", pos(ids.get(8)), t));
        assertTrue(sizeFrom8 < size, "less backlog from a later position: " + sizeFrom8 + " vs " + size);

        JsonNode analysis = json(ok("topics", "analyze-backlog", "-s", "sub", t));
        assertEquals(10, analysis.path("messages").asLong(), analysis.toString());
        assertEquals(10, analysis.path("entries").asLong(), analysis.toString());

        ok("topics", "skip", "-s", "sub", "-n", "2", t);
        awaitBacklog(t, "sub", 8);
        ok("topics", "clear-backlog", "-s", "sub", t);
        awaitBacklog(t, "sub", 0);
        ok("topics", "reset-cursor", "-s", "sub", "-m", pos(ids.get(3)), t);
        awaitBacklog(t, "sub", 7);
        ok("topics", "reset-cursor", "-s", "sub", "-t", "1h", t);
        awaitBacklog(t, "sub", 10);

        // every message is older than 1 s now
        Thread.sleep(1100);
        ok("topics", "expire-messages", "-s", "sub", "-t", "1", t);
        awaitBacklog(t, "sub", 0);
        ok("topics", "reset-cursor", "-s", "sub", "-t", "1h", t);
        ok("topics", "create-subscription", "-s", "sub2", "-m", "earliest", t);
        awaitBacklog(t, "sub", 10);
        awaitBacklog(t, "sub2", 10);
        ok("topics", "expire-messages-all-subscriptions", "-t", "1", t);
        awaitBacklog(t, "sub", 0);
        awaitBacklog(t, "sub2", 0);

        List<String> subs = lines(ok("topics", "subscriptions", t));
        assertTrue(subs.contains("sub") && subs.contains("sub2"), subs.toString());
        ok("topics", "unsubscribe", "-s", "sub2", t);
        assertEquals(List.of("sub"), lines(ok("topics", "subscriptions", t)));

        ok("topics", "unload", t);
        List<MessageId> more = produce(t, "after-unload-", 1);
        assertTrue(((MessageIdAdv) more.get(0)).compareTo(ids.get(9)) > 0);
        assertEquals(1, backlog(t, "sub"));
    }

    @Test
    void topicsTruncate() throws Exception {
        String t = Env.topic("admtrunc");
        ok("topics", "create", t);
        ok("topics", "create-subscription", "-s", "sub", t);
        produce(t, "old-", 5);
        awaitBacklog(t, "sub", 5);
        // every durable subscription's backlog is cleared
        ok("topics", "truncate", t);
        awaitBacklog(t, "sub", 0);
        // the topic still takes and delivers new messages
        produce(t, "new-", 1);
        awaitBacklog(t, "sub", 1);
        try (Consumer<String> c = client.newConsumer(Schema.STRING).topic(t).subscriptionName("sub")
                .subscribe()) {
            Message<String> m = c.receive(10, TimeUnit.SECONDS);
            assertNotNull(m, "the message produced after the truncate");
            assertEquals("new-0", m.getValue());
            c.acknowledge(m);
        }
        awaitBacklog(t, "sub", 0);
    }

    /** Whether pulsar-admin's printed message id (JSON or L:E[:P]) is id's ledger and entry. */
    static boolean idMatches(String printed, MessageId id) {
        MessageIdAdv a = (MessageIdAdv) id;
        Matcher j = Pattern.compile("\"ledgerId\"\\s*:\\s*(\\d+).*?\"entryId\"\\s*:\\s*(\\d+)", Pattern.DOTALL)
                .matcher(printed);
        if (j.find()) {
            return Long.parseLong(j.group(1)) == a.getLedgerId() && Long.parseLong(j.group(2)) == a.getEntryId();
        }
        return printed.startsWith(a.getLedgerId() + ":" + a.getEntryId());
    }

    @Test
    void topicPoliciesGetSet() throws Exception {
        String t = Env.topic("admpol");
        ok("topics", "create", t);
        ok("topicPolicies", "set-message-ttl", t, "-t", "120");
        ok("topicPolicies", "set-max-consumers", t, "-c", "1");
        // topic policies reach the broker asynchronously in Pulsar: poll
        assertTrue(Env.waitFor(20000, () -> get("topicPolicies", "get-message-ttl", t).equals("120")),
                "message TTL 120: " + get("topicPolicies", "get-message-ttl", t));
        assertTrue(Env.waitFor(20000, () -> get("topicPolicies", "get-max-consumers", t).equals("1")),
                "max consumers 1: " + get("topicPolicies", "get-max-consumers", t));
        // enforced: a second consumer on the topic is refused
        try (Consumer<String> c1 = client.newConsumer(Schema.STRING).topic(t).subscriptionName("s")
                .subscriptionType(SubscriptionType.Shared).subscribe()) {
            assertThrows(PulsarClientException.class, () -> client.newConsumer(Schema.STRING).topic(t)
                    .subscriptionName("s").subscriptionType(SubscriptionType.Shared).subscribe());
        }
        ok("topicPolicies", "remove-max-consumers", t);
        assertTrue(Env.waitFor(20000, () -> !get("topicPolicies", "get-max-consumers", t).equals("1")));
    }

    static String get(String... args) {
        try {
            Env.CliResult r = Env.admin(args);
            return r.exitCode() == 0 ? r.stdout().trim() : "exit " + r.exitCode() + ": " + r.output().trim();
        } catch (Exception e) {
            return e.toString();
        }
    }

    // ---- brokers, broker-stats, clusters ----------------------------------------------------

    @Test
    void brokers() throws Exception {
        int webPort = URI.create(Env.ADMIN_URL).getPort();
        List<String> brokers = lines(ok("brokers", "list", "standalone"));
        assertEquals(1, brokers.size(), brokers.toString());
        assertTrue(brokers.get(0).endsWith(":" + webPort), brokers.toString());
        JsonNode leader = json(ok("brokers", "leader-broker"));
        assertTrue(leader.toString().contains(":" + webPort), leader.toString());
        String version = ok("brokers", "version");
        assertTrue(version.matches("(?s).*\\d+\\.\\d+\\.\\d+.*"), version);
        JsonNode internal = json(ok("brokers", "get-internal-config"));
        assertTrue(internal.has("metadataStoreUrl"), internal.toString());
        produce(Env.topic("admbrk"), "x", 1);
        // lines "public/default/0x..._0x...    {broker_assignment, is_controlled, is_active}"
        String owned = ok("brokers", "namespaces", "standalone", "--url", brokers.get(0));
        assertTrue(lines(owned).stream().anyMatch(l -> l.startsWith("public/default/0x")), owned);
        assertTrue(ok("brokers", "healthcheck").contains("ok"));
    }

    @Test
    void brokersDynamicConfig() throws Exception {
        List<String> keys = lines(ok("brokers", "list-dynamic-config"));
        assertTrue(keys.contains("dispatcherMaxReadBatchSize"), keys.toString());
        // a dynamic key Magnetar implements
        ok("brokers", "update-dynamic-config", "--config", "dispatcherMaxReadBatchSize", "--value", "50");
        assertTrue(Env.waitFor(10000, () -> dynamicValue("dispatcherMaxReadBatchSize").equals("50")),
                dynamicValue("dispatcherMaxReadBatchSize"));
        // a dynamic key of Pulsar's that Magnetar has no use for: accepted as Pulsar does
        ok("brokers", "update-dynamic-config", "--config", "loadBalancerSheddingEnabled", "--value", "false");
        assertTrue(Env.waitFor(10000, () -> dynamicValue("loadBalancerSheddingEnabled").equals("false")),
                dynamicValue("loadBalancerSheddingEnabled"));
        // not dynamic: refused
        fails("brokers", "update-dynamic-config", "--config", "brokerServicePort", "--value", "1234");
    }

    /** The value get-all-dynamic-config prints for key (lines "key    value"), "(absent)" if none. */
    static String dynamicValue(String key) {
        String out = get("brokers", "get-all-dynamic-config");
        for (String l : lines(out)) {
            String[] kv = l.split("\\s+", 2);
            if (kv[0].equals(key)) {
                return kv.length > 1 ? kv[1] : "";
            }
        }
        return "(absent) in " + out;
    }

    @Test
    void brokerStats() throws Exception {
        String t = Env.topic("admstats");
        try (Producer<String> p = client.newProducer(Schema.STRING).topic(t).create()) {
            p.send("x");
            // Pulsar refreshes these stats every statsUpdateFrequencyInSecs (60 s): poll
            assertTrue(Env.waitFor(75000, () -> get("broker-stats", "topics").contains(t)),
                    get("broker-stats", "topics"));
            JsonNode topics = json(ok("broker-stats", "topics"));
            // {"public/default": {"<bundle>": {"persistent": {"<topic>": {...}}}}}
            boolean found = false;
            for (JsonNode bundle : topics.path("public/default")) {
                found |= bundle.path("persistent").has(t);
            }
            assertTrue(found, topics.toString());
            // JSON objects one after the other: {"metrics": {...}, "dimensions": {...}}{...}...
            String out = ok("broker-stats", "monitoring-metrics");
            List<JsonNode> metrics = JSON.readerFor(JsonNode.class).<JsonNode>readValues(out).readAll();
            assertTrue(metrics.size() > 1, out);
            for (JsonNode m : metrics) {
                assertTrue(m.path("metrics").isObject() && m.path("dimensions").isObject(), m.toString());
            }
            boolean brk = false;
            for (JsonNode m : metrics) {
                for (var it = m.path("metrics").fieldNames(); it.hasNext(); ) {
                    brk |= it.next().startsWith("brk_");
                }
            }
            assertTrue(brk, "brk_* metrics: " + out);
        }
    }

    @Test
    void clusters() throws Exception {
        assertEquals(List.of("standalone"), lines(ok("clusters", "list")));
        JsonNode c = json(ok("clusters", "get", "standalone"));
        assertTrue(c.path("serviceUrl").asText().startsWith("http://"), c.toString());
        assertTrue(c.path("brokerServiceUrl").asText().startsWith("pulsar://"), c.toString());
        String peers = ok("clusters", "get-peer-clusters", "standalone");
        assertTrue(peers.isEmpty() || peers.equals("null") || peers.equals("[]"), peers);
        assertTrue(fails("clusters", "get", "no-such-cluster").contains("does not exist"));
    }

    @Test
    void unknownRestPathIs404WithReason() throws Exception {
        Env.Http missing = Env.httpGet("/admin/v2/tenants/" + Env.uniqueName("nosuch"));
        assertEquals(404, missing.status(), missing.body());
        assertTrue(json(missing.body()).path("reason").isTextual(), missing.body());
        Env.Http unknown = Env.httpGet("/admin/v2/no-such-resource/" + Env.uniqueName("x"));
        assertEquals(404, unknown.status(), unknown.body());
    }

    static String join(String... parts) {
        return String.join(" ", Arrays.asList(parts));
    }
}
