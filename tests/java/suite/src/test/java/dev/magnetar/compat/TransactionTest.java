package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.api.transaction.Transaction;
import org.apache.pulsar.client.api.transaction.TransactionCoordinatorClientException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Transactions (PIP-31) with the Java client's API ({@code enableTransaction(true)},
 * {@code newTransaction()}, {@code newMessage(txn)}, {@code acknowledgeAsync(id, txn)}, commit,
 * abort). The transactional tests need a broker started by {@code with_broker.py --transactions}
 * (transactionCoordinatorEnabled=true, BROKER_TRANSACTIONS=1) and are skipped otherwise;
 * {@link #disabledBrokerRefusesTransactions} runs only on a broker without them.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TransactionTest {
    static final boolean ENABLED = "1".equals(System.getenv("BROKER_TRANSACTIONS"));
    static PulsarClient client;

    @BeforeAll
    static void open() throws Exception {
        if (ENABLED) {
            client = txnClient();
        }
    }

    @AfterAll
    static void close() throws Exception {
        if (client != null) {
            client.close();
        }
    }

    static PulsarClient txnClient() throws PulsarClientException {
        return PulsarClient.builder().serviceUrl(Env.BROKER_URL)
                .operationTimeout(30, TimeUnit.SECONDS).enableTransaction(true).build();
    }

    static Transaction txn(long timeoutS) throws Exception {
        return client.newTransaction().withTransactionTimeout(timeoutS, TimeUnit.SECONDS)
                .build().get(30, TimeUnit.SECONDS);
    }

    static Producer<String> producer(String topic) throws PulsarClientException {
        // Pulsar's producer with transactions: no send timeout (the client refuses one).
        return client.newProducer(Schema.STRING).topic(topic).enableBatching(false)
                .sendTimeout(0, TimeUnit.SECONDS).create();
    }

    static Consumer<String> consumer(String topic, String sub) throws PulsarClientException {
        return client.newConsumer(Schema.STRING).topic(topic).subscriptionName(sub)
                .subscriptionType(SubscriptionType.Shared).subscribe();
    }

    /** Receives until nothing comes for quietMs; the values in arrival order, acked. */
    static List<String> drain(Consumer<String> c, int quietMs) throws Exception {
        List<String> got = new ArrayList<>();
        Message<String> m;
        while ((m = c.receive(quietMs, TimeUnit.MILLISECONDS)) != null) {
            got.add(m.getValue());
            c.acknowledge(m);
        }
        return got;
    }

    static List<String> values(String prefix, int n) {
        List<String> v = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            v.add(prefix + i);
        }
        return v;
    }

    /** Subscription sub on topic, then vals sent there without a txn (its backlog). */
    static void seed(String topic, String sub, List<String> vals) throws Exception {
        consumer(topic, sub).close();
        try (Producer<String> p = producer(topic)) {
            for (String v : vals) {
                p.send(v);
            }
        }
    }

    /** What a fresh consumer of sub gets (drained, acked), sorted. */
    static List<String> remaining(String topic, String sub) throws Exception {
        try (Consumer<String> c = consumer(topic, sub)) {
            List<String> got = drain(c, 3000);
            got.sort(null);
            return got;
        }
    }

    static void sendInTxn(Producer<String> p, Transaction t, List<String> vals) throws Exception {
        for (String v : vals) {
            p.newMessage(t).value(v).sendAsync().get(30, TimeUnit.SECONDS);
        }
    }

    /**
     * vals sent in one txn to topic with a consumer of subscription "s" open: nothing reaches it
     * within 1.5 s; after the commit, what it gets (in arrival order).
     */
    static List<String> sendCommitDrain(String topic, List<String> vals) throws Exception {
        try (Consumer<String> c = consumer(topic, "s"); Producer<String> p = producer(topic)) {
            Transaction t = txn(60);
            sendInTxn(p, t, vals);
            assertNull(c.receive(1500, TimeUnit.MILLISECONDS), "visible before commit");
            t.commit().get(30, TimeUnit.SECONDS);
            return drain(c, 3000);
        }
    }

    /** The cause of a failed future's exception (the client's exception class). */
    static Throwable failure(Throwable e) {
        while ((e instanceof ExecutionException || e instanceof CompletionException)
                && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    @Test
    void commitMakesMessagesVisibleOnceInOrder() throws Exception {
        assumeTrue(ENABLED, "needs with_broker.py --transactions");
        String topic = Env.topic("txn-commit");
        assertEquals(values("m", 10), sendCommitDrain(topic, values("m", 10)));
    }

    @Test
    void abortMakesNoneVisible() throws Exception {
        assumeTrue(ENABLED, "needs with_broker.py --transactions");
        String topic = Env.topic("txn-abort");
        try (Consumer<String> c = consumer(topic, "s"); Producer<String> p = producer(topic)) {
            Transaction t = txn(60);
            sendInTxn(p, t, values("aborted", 5));
            t.abort().get(30, TimeUnit.SECONDS);
            p.send("after");
            assertEquals(List.of("after"), drain(c, 3000));
        }
        try (Reader<String> r = client.newReader(Schema.STRING).topic(topic)
                .startMessageId(MessageId.earliest).create()) {
            List<String> read = new ArrayList<>();
            Message<String> m;
            while ((m = r.readNext(3, TimeUnit.SECONDS)) != null) {
                read.add(m.getValue());
            }
            assertEquals(List.of("after"), read, "a reader skips the aborted messages");
        }
    }

    /** Acks with a txn: committed ones are not redelivered; aborted ones are. */
    @Test
    void acksFollowTheTransaction() throws Exception {
        assumeTrue(ENABLED, "needs with_broker.py --transactions");
        String topic = Env.topic("txn-acks");
        seed(topic, "s", values("a", 4));
        try (Consumer<String> c = consumer(topic, "s")) {
            Transaction commit = txn(60);
            Transaction abort = txn(60);
            for (int i = 0; i < 4; i++) {
                Message<String> m = c.receive(10, TimeUnit.SECONDS);
                Transaction t = m.getValue().equals("a0") || m.getValue().equals("a1") ? commit : abort;
                c.acknowledgeAsync(m.getMessageId(), t).get(30, TimeUnit.SECONDS);
            }
            commit.commit().get(30, TimeUnit.SECONDS);
            abort.abort().get(30, TimeUnit.SECONDS);
        }
        assertEquals(List.of("a2", "a3"), remaining(topic, "s"),
                "only the aborted acks' messages come back");
    }

    @Test
    void consumeTransformProduce() throws Exception {
        assumeTrue(ENABLED, "needs with_broker.py --transactions");
        String in = Env.topic("txn-in");
        String out = Env.topic("txn-out");
        seed(in, "s", values("x", 5));
        try (Consumer<String> outC = consumer(out, "o")) {
            try (Consumer<String> c = consumer(in, "s"); Producer<String> p = producer(out)) {
                Transaction t = txn(60);
                for (int i = 0; i < 5; i++) {
                    Message<String> m = c.receive(10, TimeUnit.SECONDS);
                    c.acknowledgeAsync(m.getMessageId(), t).get(30, TimeUnit.SECONDS);
                    p.newMessage(t).value(m.getValue().toUpperCase()).sendAsync()
                            .get(30, TimeUnit.SECONDS);
                }
                assertNull(outC.receive(1500, TimeUnit.MILLISECONDS), "output before commit");
                t.commit().get(30, TimeUnit.SECONDS);
            }
            assertEquals(values("X", 5), drain(outC, 3000));
        }
        assertEquals(List.of(), remaining(in, "s"), "input acked by the commit");
    }

    @Test
    void timedOutTransactionIsAborted() throws Exception {
        assumeTrue(ENABLED, "needs with_broker.py --transactions");
        String topic = Env.topic("txn-timeout");
        try (Consumer<String> c = consumer(topic, "s"); Producer<String> p = producer(topic)) {
            Transaction t = txn(2);
            sendInTxn(p, t, values("late", 3));
            Thread.sleep(5000);
            Throwable e = failure(assertThrowsAny(() -> t.commit().get(30, TimeUnit.SECONDS)));
            System.out.println("TXN commit after timeout: " + e.getClass().getName() + ": "
                    + e.getMessage() + " state " + t.getState());
            // The client's own timer marks it TIME_OUT; the broker aborts it: a later plain
            // message is delivered (no longer held back by the txn), the txn's never.
            assertTrue(e instanceof TransactionCoordinatorClientException.InvalidTxnStatusException
                    && e.getMessage().contains("TIME_OUT"), e.toString());
            p.send("after");
            Message<String> m = c.receive(30, TimeUnit.SECONDS);
            assertEquals("after", m == null ? null : m.getValue());
            c.acknowledge(m);
            assertEquals(List.of(), drain(c, 2000));
        }
    }

    @Test
    void conflictingAcksFail() throws Exception {
        assumeTrue(ENABLED, "needs with_broker.py --transactions");
        String topic = Env.topic("txn-conflict");
        seed(topic, "s", List.of("only"));
        try (Consumer<String> c = consumer(topic, "s")) {
            Message<String> m = c.receive(10, TimeUnit.SECONDS);
            Transaction t1 = txn(60);
            Transaction t2 = txn(60);
            c.acknowledgeAsync(m.getMessageId(), t1).get(30, TimeUnit.SECONDS);
            Throwable e = failure(assertThrowsAny(
                    () -> c.acknowledgeAsync(m.getMessageId(), t2).get(30, TimeUnit.SECONDS)));
            System.out.println("TXN conflict: " + e.getClass().getName() + ": " + e.getMessage());
            assertTrue(e instanceof PulsarClientException.TransactionConflictException,
                    e.toString());
            t1.commit().get(30, TimeUnit.SECONDS);
            t2.abort().get(30, TimeUnit.SECONDS);
        }
        assertEquals(List.of(), remaining(topic, "s"), "acked by the committed txn");
    }

    @Test
    void partitionedTopic() throws Exception {
        assumeTrue(ENABLED, "needs with_broker.py --transactions");
        String topic = Env.topic("txn-part");
        try (PulsarAdmin admin = Env.admin()) {
            admin.topics().createPartitionedTopic(topic, 3);
        }
        List<String> got = sendCommitDrain(topic, values("p", 9));
        got.sort(null);
        assertEquals(values("p", 9), got);
    }

    /** An open txn's first message is the topic's max read position: later plain messages wait. */
    @Test
    void openTransactionHoldsBackLaterMessages() throws Exception {
        assumeTrue(ENABLED, "needs with_broker.py --transactions");
        String topic = Env.topic("txn-maxread");
        try (Consumer<String> c = consumer(topic, "s"); Producer<String> p = producer(topic);
                Reader<String> r = client.newReader(Schema.STRING).topic(topic)
                        .startMessageId(MessageId.earliest).create()) {
            p.send("before");
            Transaction t = txn(60);
            sendInTxn(p, t, List.of("in-txn"));
            p.send("after");
            assertEquals(List.of("before"), drain(c, 2000));
            assertEquals("before", r.readNext(10, TimeUnit.SECONDS).getValue());
            assertNull(r.readNext(1500, TimeUnit.MILLISECONDS), "reader past the open txn");
            t.commit().get(30, TimeUnit.SECONDS);
            assertEquals(List.of("in-txn", "after"), drain(c, 3000));
            assertEquals("in-txn", r.readNext(10, TimeUnit.SECONDS).getValue());
            assertEquals("after", r.readNext(10, TimeUnit.SECONDS).getValue());
        }
    }

    /** pulsar-perf ARGS run in a temporary directory (it writes .hgrm files there): output. */
    static String perf(long timeoutS, String... args) throws Exception {
        Path dir = Files.createTempDirectory("perf-txn");
        Path out = dir.resolve("out");
        Process p = new ProcessBuilder(Env.cliCommand(Env.PULSAR_PERF, args)).directory(dir.toFile())
                .redirectErrorStream(true).redirectOutput(out.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start();
        boolean done = p.waitFor(timeoutS, TimeUnit.SECONDS);
        if (!done) {
            p.destroyForcibly().waitFor();
        }
        String text = Files.readString(out);
        try (var files = Files.list(dir)) {
            for (Path f : files.toList()) {
                Files.delete(f);
            }
        }
        Files.delete(dir);
        assertTrue(done && p.exitValue() == 0, "pulsar-perf " + String.join(" ", args)
                + (done ? " exited " + p.exitValue() : " hung") + ":\n" + text);
        return text;
    }

    static Matcher find(String regex, String out, String what) {
        Matcher m = Pattern.compile(regex).matcher(out);
        assertTrue(m.find(), what + ": no /" + regex + "/ in\n" + out);
        return m;
    }

    static final String TXN_COUNTS = "Transaction\\s*:\\s*(\\d+)\\s+transaction end successfully --- "
            + "0 transaction end failed --- (\\d+) transaction open successfully --- 0 transaction open failed";

    /**
     * pulsar-perf produce -txn (transactions of 10 messages) and consume -txn (acks in 10 txns of
     * 10). The tools' own totals are racy (the last commit may be counted or not, -m 100 may send
     * 102 or commit 110), so the broker's side is asserted: no failures, only whole transactions visible.
     */
    @Test
    void perfProduceAndConsumeWithTransactions() throws Exception {
        assumeTrue(ENABLED, "needs with_broker.py --transactions");
        String topic = Env.topic("perf-txn");
        try (PulsarAdmin admin = Env.admin()) {
            admin.topics().createNonPartitionedTopic(topic);
            admin.topics().createSubscription(topic, "check", MessageId.earliest);
        }
        String out = perf(120, "produce", "-u", Env.BROKER_URL, "-au", Env.ADMIN_URL, "-txn",
                "-nmt", "10", "-m", "100", "-r", "200", topic);
        Matcher m = find(TXN_COUNTS, out, "produce");
        int ended = Integer.parseInt(m.group(1));
        assertTrue(ended >= 9 && Integer.parseInt(m.group(2)) >= 10, out);
        int received = countReceived(topic, "check");
        // -m 100 is checked racily by the tool: a loaded run has committed an 11th transaction.
        assertTrue(received % 10 == 0 && received >= 90 && received <= 110,
                received + " messages: whole txns only");
        assertTrue(received >= 10 * ended, received + " messages of " + ended + " committed txns");
        out = perf(120, "consume", "-u", Env.BROKER_URL, "-txn", "-nmt", "10",
                "-ntxn", String.valueOf(received / 10), "-ss", "s", "-sp", "Earliest", "-time", "15",
                topic);
        find(TXN_COUNTS, out, "consume");
        find("Aggregated throughput stats --- " + received + " records received", out, "consume");
        try (PulsarAdmin admin = Env.admin()) {
            assertEquals(0, admin.topics().getStats(topic).getSubscriptions().get("s").getMsgBacklog(),
                    "the acks of the committed txns");
        }
    }

    /** Messages a fresh consumer of subscription sub gets until none comes for 3 s (acked). */
    static int countReceived(String topic, String sub) throws Exception {
        int n = 0;
        try (Consumer<byte[]> c = client.newConsumer().topic(topic).subscriptionName(sub).subscribe()) {
            Message<byte[]> msg;
            while ((msg = c.receive(3, TimeUnit.SECONDS)) != null) {
                c.acknowledge(msg);
                n++;
            }
        }
        return n;
    }

    /** pulsar-perf transaction: consume 2 + produce 2 per txn, 10 txns, all committed. */
    @Test
    void perfTransaction() throws Exception {
        assumeTrue(ENABLED, "needs with_broker.py --transactions");
        String in = Env.topic("perf-txn-in");
        String outTopic = Env.topic("perf-txn-out");
        try (PulsarAdmin admin = Env.admin()) {
            admin.topics().createNonPartitionedTopic(in);
            admin.topics().createNonPartitionedTopic(outTopic);
            admin.topics().createSubscription(outTopic, "check", MessageId.earliest);
        }
        try (Producer<byte[]> p = client.newProducer().topic(in).create()) {
            for (int i = 0; i < 40; i++) {
                p.send(new byte[100]);
            }
        }
        String out = perf(180, "transaction", "-u", Env.BROKER_URL, "-au", Env.ADMIN_URL,
                "--topics-c", in, "--topics-p", outTopic, "-ntxn", "10", "-nmc", "2", "-nmp", "2",
                "-ss", "t", "-sp", "Earliest", "-time", "60");
        find("Aggregated throughput stats --- 10 transaction executed", out, "transaction");
        find("10 transaction open successfully --- 0 transaction open failed --- 10 transaction"
                + " end successfully --- 0 transaction end failed --- 0 message ack failed --- 0 message"
                + " send failed --- 20 message ack success --- 20 message send success", out, "transaction");
        assertEquals(20, countReceived(outTopic, "check"), "the committed output");
    }

    /** Without transactionCoordinatorEnabled the transactional client fails to start. */
    @Test
    void disabledBrokerRefusesTransactions() throws Exception {
        assumeFalse(ENABLED, "runs on a broker without --transactions");
        Throwable e = failure(assertThrowsAny(() -> {
            try (PulsarClient c = txnClient()) {
                c.newTransaction().build().get(60, TimeUnit.SECONDS);
            }
        }));
        // The assign topic's partitioned metadata has no partitions on Pulsar standalone.
        assertTrue(e instanceof PulsarClientException && e.getMessage().contains(
                "The broker doesn't enable the transaction coordinator, or the transaction "
                + "coordinator has not initialized"), e.toString());
    }

    interface Body {
        void run() throws Exception;
    }

    static Throwable assertThrowsAny(Body b) {
        try {
            b.run();
        } catch (Throwable e) {
            return e;
        }
        throw new AssertionError("expected a failure");
    }
}
