package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;

/** The broker under test (from with_broker.py's environment) and helpers shared by the tests. */
public final class Env {
    private Env() {}

    public static final String BROKER_URL = require("BROKER_URL");
    public static final String ADMIN_URL = require("ADMIN_URL");
    /** "magnetar", "pulsar" or "" when the broker was started some other way. */
    public static final String BROKER_KIND = System.getenv().getOrDefault("BROKER_KIND", "");

    private static String require(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException(name + " is not set: run the suite through "
                    + "tests/harness/with_broker.py --broker magnetar|pulsar -- mvn ...");
        }
        return v.endsWith("/") ? v.substring(0, v.length() - 1) : v;
    }

    public static boolean isPulsar() {
        return "pulsar".equals(BROKER_KIND);
    }

    /** A fresh short topic name in public/default; the full name is persistent://public/default/NAME. */
    public static String uniqueName(String prefix) {
        return prefix + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    public static String topic(String prefix) {
        return "persistent://public/default/" + uniqueName(prefix);
    }

    public static PulsarClient client() throws PulsarClientException {
        return PulsarClient.builder()
                .serviceUrl(BROKER_URL)
                .operationTimeout(30, TimeUnit.SECONDS)
                .build();
    }

    public static PulsarAdmin admin() throws PulsarClientException {
        return PulsarAdmin.builder().serviceHttpUrl(ADMIN_URL).build();
    }

    /** Polls cond every 100 ms until it holds or timeoutMs passes; returns whether it held. */
    public static boolean waitFor(long timeoutMs, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            if (cond.getAsBoolean()) {
                return true;
            }
            Thread.sleep(100);
        }
        return cond.getAsBoolean();
    }

    /** Whether c may create a producer on topic within timeoutMs (a grant reaches Pulsar's
     * policy cache asynchronously); each producer made is closed. */
    public static boolean producerAllowed(PulsarClient c, String topic, long timeoutMs)
            throws InterruptedException {
        return waitFor(timeoutMs, () -> {
            try {
                c.newProducer().topic(topic).create().close();
                return true;
            } catch (PulsarClientException e) {
                return false;
            }
        });
    }

    /** Asserts that namespace ns (tenant/name) is listed within 120 s: Pulsar creates
     * public/default a little after it reports healthy. */
    public static void waitForNamespace(PulsarAdmin admin, String ns) throws InterruptedException {
        String tenant = ns.substring(0, ns.indexOf('/'));
        assertTrue(waitFor(120_000, () -> {
            try {
                return admin.namespaces().getNamespaces(tenant).contains(ns);
            } catch (PulsarAdminException e) {
                return false;
            }
        }), ns + " not listed");
    }

    // ---- plain HTTP (for what the admin client does not expose) ------------------------------

    public record Http(int status, String body) {}

    private static final HttpClient HTTP = HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(10)).build();

    public static Http httpGet(String path) throws IOException, InterruptedException {
        HttpRequest req = HttpRequest.newBuilder(URI.create(ADMIN_URL + path))
                .timeout(Duration.ofSeconds(30)).GET().build();
        HttpResponse<String> r = HTTP.send(req, HttpResponse.BodyHandlers.ofString());
        return new Http(r.statusCode(), r.body());
    }

    // ---- Pulsar's command line tools as subprocesses -----------------------------------------

    public static final String PULSAR_ADMIN = "org.apache.pulsar.admin.cli.PulsarAdminTool";
    public static final String PULSAR_CLIENT = "org.apache.pulsar.client.cli.PulsarClientTool";
    public static final String PULSAR_PERF = "org.apache.pulsar.testclient.PulsarPerfTestTool";

    public record CliResult(int exitCode, String stdout, String stderr) {
        public String output() {
            return stdout + stderr;
        }

        @Override
        public String toString() {
            return "exit " + exitCode + "\n--- stdout ---\n" + stdout + "\n--- stderr ---\n" + stderr;
        }
    }

    private static String cliClasspath;
    private static Path clientConf;

    static synchronized String cliClasspath() throws IOException {
        if (cliClasspath == null) {
            String file = System.getProperty("cli.classpath.file", "../tools/target/cli.classpath");
            cliClasspath = Files.readString(Paths.get(file)).trim();
        }
        return cliClasspath;
    }

    /** client.conf the tools get as their first argument (as Pulsar's bin/ scripts pass it). */
    static synchronized Path clientConf() throws IOException {
        if (clientConf == null) {
            clientConf = Files.createTempFile("magnetar-java-compat-client", ".conf");
            clientConf.toFile().deleteOnExit();
            Files.writeString(clientConf, "webServiceUrl=" + ADMIN_URL + "/\n"
                    + "brokerServiceUrl=" + BROKER_URL + "/\n");
        }
        return clientConf;
    }

    /** The java command line for one tool: java -cp CP MAIN client.conf ARGS... */
    public static List<String> cliCommand(String mainClass, String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        // pulsar-perf's latency recorders alone need a few hundred MB
        cmd.add(PULSAR_PERF.equals(mainClass) ? "-Xmx1g" : "-Xmx256m");
        if (!PULSAR_PERF.equals(mainClass)) {
            // short-lived tools: start fast, little JIT and GC work on 2 cores
            cmd.add("-XX:TieredStopAtLevel=1");
            cmd.add("-XX:+UseSerialGC");
        }
        cmd.add("-Dlog4j2.configurationFile=" + logConfig());
        cmd.add("-cp");
        cmd.add(cliClasspath());
        cmd.add(mainClass);
        cmd.add(clientConf().toString());
        cmd.addAll(List.of(args));
        return cmd;
    }

    static String logConfig() {
        var url = Env.class.getResource("/cli-log4j2.xml");
        return url == null ? "" : Paths.get(URI.create(url.toString())).toString();
    }

    /** Runs a tool to completion (killed after timeoutS) and returns its exit code and output. */
    public static CliResult runCli(long timeoutS, String mainClass, String... args)
            throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(cliCommand(mainClass, args));
        Path out = Files.createTempFile("cli", ".out");
        Path err = Files.createTempFile("cli", ".err");
        pb.redirectOutput(out.toFile());
        pb.redirectError(err.toFile());
        pb.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
        Process p = pb.start();
        boolean done = p.waitFor(timeoutS, TimeUnit.SECONDS);
        if (!done) {
            p.destroyForcibly();
            p.waitFor();
        }
        String so = Files.readString(out, StandardCharsets.UTF_8);
        String se = Files.readString(err, StandardCharsets.UTF_8);
        Files.deleteIfExists(out);
        Files.deleteIfExists(err);
        return new CliResult(done ? p.exitValue() : -1, so, done ? se : se + "\n(killed after " + timeoutS + " s)");
    }

    /** pulsar-admin ARGS with a 60 s limit. */
    public static CliResult admin(String... args) throws IOException, InterruptedException {
        String[] full = new String[args.length + 2];
        full[0] = "--admin-url";
        full[1] = ADMIN_URL;
        System.arraycopy(args, 0, full, 2, args.length);
        return InProcessTool.ENABLED ? InProcessTool.admin(60, full) : runCli(60, PULSAR_ADMIN, full);
    }

    /** pulsar-admin ARGS, which must exit 0 (asserted); returns its trimmed stdout. */
    public static String adminOk(String... args) throws IOException, InterruptedException {
        CliResult r = admin(args);
        assertEquals(0, r.exitCode(), "pulsar-admin " + String.join(" ", args) + "\n" + r);
        return r.stdout().trim();
    }
}
