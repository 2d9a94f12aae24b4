package dev.magnetar.compat;

import org.apache.pulsar.client.admin.PulsarAdmin;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** ClientTestBase plus one PulsarAdmin (Env.admin()) with the same lifetime. */
abstract class ClientAdminTestBase extends ClientTestBase {
    static PulsarAdmin admin;

    @BeforeAll
    static void openAdmin() throws Exception {
        admin = Env.admin();
    }

    @AfterAll
    static void closeAdmin() throws Exception {
        admin = closed(admin);
    }
}
