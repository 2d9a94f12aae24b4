package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Paths;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * pulsar+ssl:// with the Java client: the broker's certificate checked against the test CA with
 * hostname verification. Runs when the broker was started with `with_broker.py --tls`.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TlsTest {
    static final String TLS_URL = System.getenv().getOrDefault("BROKER_URL_TLS", "");
    static final String CERTS = System.getenv().getOrDefault("TLS_CERTS_DIR", "");

    static PulsarClient tlsClient(String caFile) throws PulsarClientException {
        return PulsarClient.builder()
                .serviceUrl(TLS_URL)
                .tlsTrustCertsFilePath(caFile)
                .enableTlsHostnameVerification(true)
                .operationTimeout(10, TimeUnit.SECONDS)
                .build();
    }

    @Test
    void produceAndConsumeOverTls() throws Exception {
        Assumptions.assumeFalse(TLS_URL.isEmpty(), "no TLS listener (with_broker.py --tls)");
        String topic = Env.topic("java-tls");
        try (PulsarClient client = tlsClient(Paths.get(CERTS, "ca.pem").toString());
                Consumer<String> consumer = client.newConsumer(Schema.STRING)
                        .topic(topic).subscriptionName("s").subscribe();
                Producer<String> producer = client.newProducer(Schema.STRING).topic(topic).create()) {
            for (int i = 0; i < 10; i++) {
                producer.send("tls-" + i);
            }
            for (int i = 0; i < 10; i++) {
                Message<String> m = consumer.receive(10, TimeUnit.SECONDS);
                assertNotNull(m);
                assertEquals("tls-" + i, m.getValue());
                consumer.acknowledge(m);
            }
        }
    }

    @Test
    void brokerCertificateFromAnotherCaIsRefused() throws Exception {
        Assumptions.assumeFalse(TLS_URL.isEmpty(), "no TLS listener (with_broker.py --tls)");
        try (PulsarClient client = tlsClient(Paths.get(CERTS, "other-ca.pem").toString())) {
            assertThrows(PulsarClientException.class,
                    () -> client.newProducer().topic(Env.topic("java-tls-bad")).create());
        }
    }
}
