package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.common.policies.data.AuthAction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Token authentication and authorization with the Java client, PulsarAdmin and pulsar-admin:
 * needs a broker started by {@code with_broker.py --auth-token} (AUTH_SECRET_KEY, the HS256 key
 * in base64; super-user role "admin"), skipped otherwise.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class AuthTokenTest {
    static final String NS = "public/default";
    static final String TOKEN_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationToken";
    static byte[] key;
    static String adminToken;
    static PulsarAdmin admin;

    @BeforeAll
    static void setUp() throws Exception {
        String k = System.getenv("AUTH_SECRET_KEY");
        assumeTrue(k != null && !k.isEmpty(), "needs with_broker.py --auth-token");
        key = Base64.getDecoder().decode(k);
        adminToken = token("admin");
        admin = PulsarAdmin.builder().serviceHttpUrl(Env.ADMIN_URL)
                .authentication(AuthenticationFactory.token(adminToken)).build();
        Env.waitForNamespace(admin, NS);
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (admin != null) {
            admin.close();
        }
    }

    /** An HS256 JWT with subject {@code role}, signed with the broker's key. */
    static String token(String role) throws Exception {
        Base64.Encoder b64 = Base64.getUrlEncoder().withoutPadding();
        String head = b64.encodeToString("{\"alg\":\"HS256\"}".getBytes(StandardCharsets.UTF_8));
        String body = b64.encodeToString(("{\"sub\":\"" + role + "\"}").getBytes(StandardCharsets.UTF_8));
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key, "HmacSHA256"));
        byte[] sig = mac.doFinal((head + "." + body).getBytes(StandardCharsets.UTF_8));
        return head + "." + body + "." + b64.encodeToString(sig);
    }

    static PulsarClient client(String token) throws PulsarClientException {
        return PulsarClient.builder().serviceUrl(Env.BROKER_URL)
                .authentication(AuthenticationFactory.token(token))
                .operationTimeout(10, TimeUnit.SECONDS).build();
    }

    static String role() {
        return "role-" + UUID.randomUUID().toString().substring(0, 8);
    }

    @Test
    void superUserProducesAndConsumes() throws Exception {
        String topic = Env.topic("auth-super");
        try (PulsarClient c = client(adminToken);
             Consumer<String> consumer = c.newConsumer(Schema.STRING).topic(topic)
                     .subscriptionName("s").subscribe();
             Producer<String> producer = c.newProducer(Schema.STRING).topic(topic).create()) {
            producer.send("hello");
            assertEquals("hello", consumer.receive(10, TimeUnit.SECONDS).getValue());
        }
    }

    @Test
    void tokenFileWithTrailingNewline() throws Exception {
        // "file:" token parameters: the Java client and PulsarAdmin trim what they read.
        Path f = Files.createTempFile("admin-token", ".txt");
        try {
            Files.writeString(f, adminToken + "\n");
            String params = "file://" + f;
            String topic = Env.topic("auth-token-file");
            try (PulsarClient c = PulsarClient.builder().serviceUrl(Env.BROKER_URL)
                            .authentication(AuthenticationFactory.create(TOKEN_PLUGIN, params))
                            .operationTimeout(10, TimeUnit.SECONDS).build();
                    Producer<byte[]> p = c.newProducer().topic(topic).create()) {
                p.send("from a token file".getBytes(StandardCharsets.UTF_8));
            }
            try (PulsarAdmin fileAdmin = PulsarAdmin.builder().serviceHttpUrl(Env.ADMIN_URL)
                    .authentication(AuthenticationFactory.create(TOKEN_PLUGIN, params)).build()) {
                assertTrue(fileAdmin.tenants().getTenants().contains("public"));
            }
        } finally {
            Files.deleteIfExists(f);
        }
    }

    @Test
    void roleWithoutPermissionIsRefused() throws Exception {
        String topic = Env.topic("auth-denied");
        try (PulsarClient c = client(token(role()))) {
            assertThrows(PulsarClientException.AuthorizationException.class,
                    () -> c.newProducer().topic(topic).create());
            assertThrows(PulsarClientException.AuthorizationException.class,
                    () -> c.newConsumer().topic(topic).subscriptionName("s").subscribe());
        }
    }

    @Test
    void namespacePermissionsGrantListRevoke() throws Exception {
        String role = role();
        admin.namespaces().grantPermissionOnNamespace(NS, role,
                EnumSet.of(AuthAction.produce, AuthAction.consume));
        Map<String, Set<AuthAction>> perms = admin.namespaces().getPermissions(NS);
        assertEquals(EnumSet.of(AuthAction.produce, AuthAction.consume), perms.get(role));

        String topic = Env.topic("auth-ns-grant");
        try (PulsarClient c = client(token(role))) {
            try (Producer<byte[]> p = retry(() -> c.newProducer().topic(topic).create())) {
                p.send("granted".getBytes(StandardCharsets.UTF_8));
            }
            try (Consumer<byte[]> consumer = c.newConsumer().topic(topic).subscriptionName("s")
                    .subscribe()) {
                assertTrue(consumer.isConnected());
            }
            admin.namespaces().revokePermissionsOnNamespace(NS, role);
            assertFalse(admin.namespaces().getPermissions(NS).containsKey(role));
            String other = Env.topic("auth-ns-revoked");
            assertTrue(Env.waitFor(15_000, () -> refused(c, other)));
        }
    }

    @Test
    void topicPermissionsGrantListRevoke() throws Exception {
        String role = role();
        String topic = Env.topic("auth-topic-grant");
        try (PulsarClient adminClient = client(adminToken);
             Producer<String> producer = adminClient.newProducer(Schema.STRING).topic(topic).create();
             PulsarClient c = client(token(role))) {
            admin.topics().grantPermission(topic, role, EnumSet.of(AuthAction.consume));
            assertEquals(EnumSet.of(AuthAction.consume), admin.topics().getPermissions(topic).get(role));
            try (Consumer<String> consumer = retry(() -> c.newConsumer(Schema.STRING).topic(topic)
                    .subscriptionName("s").subscribe())) {
                producer.send("for the role");
                assertEquals("for the role", consumer.receive(10, TimeUnit.SECONDS).getValue());
            }
            // consume only: producing stays refused
            assertThrows(PulsarClientException.AuthorizationException.class,
                    () -> c.newProducer().topic(topic).create());
            admin.topics().revokePermissions(topic, role);
            assertFalse(admin.topics().getPermissions(topic).containsKey(role));
        }
    }

    @Test
    void nonAdminRoleCannotGrant() throws Exception {
        try (PulsarAdmin other = PulsarAdmin.builder().serviceHttpUrl(Env.ADMIN_URL)
                .authentication(AuthenticationFactory.token(token(role()))).build()) {
            assertThrows(PulsarAdminException.NotAuthorizedException.class,
                    () -> other.namespaces().grantPermissionOnNamespace(NS, "x",
                            EnumSet.of(AuthAction.produce)));
            assertThrows(PulsarAdminException.NotAuthorizedException.class,
                    () -> other.tenants().getTenants());
        }
    }

    @Test
    void pulsarAdminCliGrantsAndListsPermissions() throws Exception {
        String role = role();
        Env.CliResult grant = cli("namespaces", "grant-permission", NS, "--role", role,
                "--actions", "produce,consume");
        assertEquals(0, grant.exitCode(), grant.toString());
        Env.CliResult list = cli("namespaces", "permissions", NS);
        assertEquals(0, list.exitCode(), list.toString());
        // a map printed as lines "role    [action, action]"
        String line = list.stdout().lines().filter(l -> l.startsWith(role + " ")).findFirst()
                .orElseThrow(() -> new AssertionError(list.toString()));
        String actions = line.substring(role.length()).trim();
        assertEquals(Set.of("produce", "consume"),
                Set.of(actions.substring(1, actions.length() - 1).split(",\\s*")), line);
        Env.CliResult revoke = cli("namespaces", "revoke-permission", NS, "--role", role);
        assertEquals(0, revoke.exitCode(), revoke.toString());
        assertFalse(admin.namespaces().getPermissions(NS).containsKey(role));
    }

    static Env.CliResult cli(String... args) throws Exception {
        String[] full = new String[args.length + 6];
        full[0] = "--admin-url";
        full[1] = Env.ADMIN_URL;
        full[2] = "--auth-plugin";
        full[3] = TOKEN_PLUGIN;
        full[4] = "--auth-params";
        full[5] = "token:" + adminToken;
        System.arraycopy(args, 0, full, 6, args.length);
        return Env.runCli(60, Env.PULSAR_ADMIN, full);
    }

    static boolean refused(PulsarClient c, String topic) {
        try (Producer<byte[]> p = c.newProducer().topic(topic).create()) {
            return false;
        } catch (PulsarClientException.AuthorizationException e) {
            return true;
        } catch (PulsarClientException e) {
            return false;
        }
    }

    interface Attempt<T> {
        T run() throws Exception;
    }

    /** A grant reaches Pulsar's policy cache asynchronously: retries for up to 15 s. */
    static <T> T retry(Attempt<T> a) throws Exception {
        long deadline = System.currentTimeMillis() + 15_000;
        while (true) {
            try {
                return a.run();
            } catch (PulsarClientException.AuthorizationException e) {
                if (System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }
}
