package dev.magnetar.compat;

import org.apache.pulsar.client.api.PulsarClient;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * Base of the test classes that share one PulsarClient (Env.client()) across their tests: opened
 * before the first test of the class, closed after the last. Classes run one after the other in
 * the suite's single JVM, so the static field is never used by two classes at once.
 */
abstract class ClientTestBase {
    static PulsarClient client;

    @BeforeAll
    static void openClient() throws Exception {
        client = Env.client();
    }

    @AfterAll
    static void closeClient() throws Exception {
        if (client != null) {
            client.close();
            client = null;
        }
    }
}
