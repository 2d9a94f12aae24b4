package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Paths;
import java.util.EnumSet;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.admin.PulsarAdmin;
import org.apache.pulsar.client.admin.PulsarAdminException;
import org.apache.pulsar.client.api.Authentication;
import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
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
 * AuthenticationTls (the role is the client certificate's CN) with the Java client and
 * PulsarAdmin over HTTPS: needs a broker started by {@code with_broker.py --auth-tls}
 * (TLS_CERTS_DIR with client-admin, client-app-1 and other-client certificates, ADMIN_URL_TLS),
 * skipped otherwise.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AuthTlsTest {
    static final String CERTS = System.getenv().getOrDefault("TLS_CERTS_DIR", "");
    static final String TLS_URL = System.getenv().getOrDefault("BROKER_URL_TLS", "");
    static final String ADMIN_TLS = System.getenv().getOrDefault("ADMIN_URL_TLS", "");
    static PulsarAdmin admin;

    static String file(String name) {
        return Paths.get(CERTS, name).toString();
    }

    static Authentication tls(String who) {
        return AuthenticationFactory.TLS(file(who + ".pem"), file(who + ".key"));
    }

    static PulsarClient client(String who) throws PulsarClientException {
        return PulsarClient.builder().serviceUrl(TLS_URL).tlsTrustCertsFilePath(file("ca.pem"))
                .authentication(tls(who)).operationTimeout(8, TimeUnit.SECONDS).build();
    }

    @BeforeAll
    static void setUp() throws Exception {
        assumeTrue(!ADMIN_TLS.isEmpty() && !CERTS.isEmpty(), "needs with_broker.py --auth-tls");
        admin = PulsarAdmin.builder().serviceHttpUrl(ADMIN_TLS).tlsTrustCertsFilePath(file("ca.pem"))
                .authentication(tls("client-admin")).build();
        Env.waitForNamespace(admin, "public/default");
    }

    @AfterAll
    static void tearDown() throws Exception {
        if (admin != null) {
            admin.close();
        }
    }

    @Test
    void grantedCommonNameProducesAndTheOtherIsRefused() throws Exception {
        String topic = Env.topic("java-auth-tls");
        try (PulsarClient app = client("client-app-1")) {
            assertThrows(PulsarClientException.AuthorizationException.class,
                    () -> app.newProducer().topic(topic).create());
            // Pulsar grants only on a topic that exists: create it first.
            assertThrows(PulsarAdminException.NotFoundException.class,
                    () -> admin.topics().grantPermission(topic, "app-1",
                            EnumSet.of(AuthAction.produce)));
            admin.topics().createNonPartitionedTopic(topic);
            admin.topics().grantPermission(topic, "app-1",
                    EnumSet.of(AuthAction.produce, AuthAction.consume));
            assertEquals(EnumSet.of(AuthAction.produce, AuthAction.consume),
                    admin.topics().getPermissions(topic).get("app-1"));
            assertTrue(Env.producerAllowed(app, topic, 20_000));
            try (Consumer<String> consumer = app.newConsumer(Schema.STRING).topic(topic)
                            .subscriptionName("s").subscribe();
                    Producer<String> producer =
                            app.newProducer(Schema.STRING).topic(topic).create()) {
                producer.send("over mTLS");
                Message<String> m = consumer.receive(10, TimeUnit.SECONDS);
                assertNotNull(m);
                assertEquals("over mTLS", m.getValue());
            }
        }
        try (PulsarClient other = client("client-app-2")) {
            assertThrows(PulsarClientException.AuthorizationException.class,
                    () -> other.newProducer().topic(topic).create());
        }
    }

    @Test
    void adminCallsNeedAnAuthorizedCertificate() throws Exception {
        try (PulsarAdmin app = PulsarAdmin.builder().serviceHttpUrl(ADMIN_TLS)
                .tlsTrustCertsFilePath(file("ca.pem")).authentication(tls("client-app-1"))
                .build()) {
            assertThrows(PulsarAdminException.NotAuthorizedException.class,
                    () -> app.tenants().getTenants());
        }
        assertTrue(admin.tenants().getTenants().contains("public"));
    }

    @Test
    void certificateFromAnotherCaIsRefused() throws Exception {
        try (PulsarClient stranger = client("other-client")) {
            assertThrows(PulsarClientException.class,
                    () -> stranger.newProducer().topic(Env.topic("java-auth-tls-bad")).create());
        }
    }
}
