package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.EnumSet;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Authentication;
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
 * Basic authentication (Pulsar's AuthenticationProviderBasic) with the Java client's
 * AuthenticationBasic, PulsarAdmin and pulsar-admin: needs a broker started by
 * {@code with_broker.py --auth-basic} (the users of harness/auth.py BASIC_USERS; super-users
 * "admin" and "basic-admin"), skipped otherwise.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class AuthBasicTest {
    static final String NS = "public/default";
    static final String BASIC_PLUGIN = "org.apache.pulsar.client.impl.auth.AuthenticationBasic";
    static final String SUPER_USER = "basic-admin";
    static final String SUPER_PASSWORD = "averyveryverylongpassword-over-16";
    static PulsarAdmin admin;

    @BeforeAll
    static void setUp() throws Exception {
        String conf = System.getenv("AUTH_BASIC_CONF");
        assumeTrue(conf != null && !conf.isEmpty(), "needs with_broker.py --auth-basic");
        admin = PulsarAdmin.builder().serviceHttpUrl(Env.ADMIN_URL)
                .authentication(basic(SUPER_USER, SUPER_PASSWORD)).build();
        Env.waitForNamespace(admin, NS);
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (admin != null) {
            admin.close();
        }
    }

    static String params(String user, String password) {
        return "{\"userId\":\"" + user + "\",\"password\":\"" + password + "\"}";
    }

    static Authentication basic(String user, String password) throws Exception {
        return AuthenticationFactory.create(BASIC_PLUGIN, params(user, password));
    }

    static PulsarClient client(String user, String password) throws Exception {
        return PulsarClient.builder().serviceUrl(Env.BROKER_URL)
                .authentication(basic(user, password))
                .operationTimeout(30, TimeUnit.SECONDS).build();
    }

    @Test
    void superUserAdministersOverHttp() throws Exception {
        assertTrue(admin.tenants().getTenants().contains("public"));
    }

    @Test
    void grantedUsersProduceAndConsume() throws Exception {
        // des-user: a DES crypt entry, apr-user: an apr1 entry.
        String[][] users = {{"des-user", "secret"}, {"apr-user", "aprpass"}};
        for (String[] u : users) {
            String topic = Env.topic("java-auth-basic");
            try (PulsarClient c = client(u[0], u[1])) {
                assertThrows(PulsarClientException.AuthorizationException.class,
                        () -> c.newProducer().topic(topic).create());
                admin.namespaces().grantPermissionOnNamespace(NS, u[0],
                        EnumSet.of(AuthAction.produce, AuthAction.consume));
                assertTrue(Env.producerAllowed(c, topic, 20_000));
                try (Consumer<String> consumer = c.newConsumer(Schema.STRING).topic(topic)
                                .subscriptionName("s").subscribe();
                        Producer<String> producer =
                                c.newProducer(Schema.STRING).topic(topic).create()) {
                    producer.send("basic " + u[0]);
                    assertEquals("basic " + u[0],
                            consumer.receive(10, TimeUnit.SECONDS).getValue());
                }
            }
        }
    }

    @Test
    void wrongPasswordIsAnAuthenticationErrorAtOnce() throws Exception {
        // The broker answers CONNECT with AuthenticationError; the Java client does not retry it.
        try (PulsarClient c = client("des-user", "wrong")) {
            long start = System.nanoTime();
            assertThrows(PulsarClientException.AuthenticationException.class,
                    () -> c.newProducer().topic(Env.topic("java-auth-basic-bad")).create());
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(20));
        }
        try (PulsarAdmin bad = PulsarAdmin.builder().serviceHttpUrl(Env.ADMIN_URL)
                .authentication(basic("nobody", "secret")).build()) {
            assertThrows(PulsarAdminException.NotAuthorizedException.class,
                    () -> bad.tenants().getTenants());
        }
    }

    @Test
    void pulsarAdminCliWithBasicAuth() throws Exception {
        Env.CliResult list = Env.runCli(60, Env.PULSAR_ADMIN, "--admin-url", Env.ADMIN_URL,
                "--auth-plugin", BASIC_PLUGIN, "--auth-params", params(SUPER_USER, SUPER_PASSWORD),
                "tenants", "list");
        assertEquals(0, list.exitCode(), list.toString());
        assertTrue(list.stdout().lines().anyMatch("public"::equals), list.toString());
    }
}
