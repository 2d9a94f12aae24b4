package dev.magnetar.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.schema.GenericRecord;
import org.apache.pulsar.common.schema.SchemaInfo;
import org.apache.pulsar.common.schema.SchemaType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The schema registry seen by the Java client: JSON POJOs, AUTO_CONSUME, AUTO_PRODUCE_BYTES,
 * an incompatible producer, the admin client and `pulsar-admin schemas`. */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class SchemaRegistryTest extends ClientAdminTestBase {
    /** A JSON-schema POJO (Jackson and Avro reflection need the no-argument constructor). */
    public static class User {
        public String name;
        public int age;

        public User() {}

        User(String name, int age) {
            this.name = name;
            this.age = age;
        }
    }

    @Test
    void jsonPojoAutoConsumeAndAutoProduce() throws Exception {
        String topic = Env.topic("schema-json");
        try (Consumer<User> typed = client.newConsumer(Schema.JSON(User.class)).topic(topic)
                        .subscriptionName("typed").subscribe();
                Consumer<GenericRecord> generic = client.newConsumer(Schema.AUTO_CONSUME())
                        .topic(topic).subscriptionName("generic").subscribe();
                Producer<User> producer = client.newProducer(Schema.JSON(User.class)).topic(topic)
                        .create()) {
            producer.send(new User("ann", 7));
            Message<User> m = typed.receive(10, TimeUnit.SECONDS);
            assertEquals("ann", m.getValue().name);
            assertEquals(7, m.getValue().age);
            Message<GenericRecord> g = generic.receive(10, TimeUnit.SECONDS);
            assertEquals("ann", g.getValue().getField("name"));
            assertEquals(7, g.getValue().getField("age"));
            assertEquals(SchemaType.JSON, g.getReaderSchema().get().getSchemaInfo().getType());

            // AUTO_PRODUCE_BYTES takes the topic's schema and validates the bytes against it.
            try (Producer<byte[]> bytes = client.newProducer(Schema.AUTO_PRODUCE_BYTES())
                    .topic(topic).create()) {
                bytes.send("{\"name\":\"bob\",\"age\":8}".getBytes(StandardCharsets.UTF_8));
            }
            assertEquals("bob", typed.receive(10, TimeUnit.SECONDS).getValue().name);

            // A STRING producer does not fit a JSON topic.
            PulsarClientException e = assertThrows(PulsarClientException.class,
                    () -> client.newProducer(Schema.STRING).topic(topic).create());
            assertTrue(e instanceof PulsarClientException.IncompatibleSchemaException, e.toString());
            assertTrue(e.getMessage().contains(
                    "Incompatible schema: exists schema type JSON, new schema type STRING"),
                    e.getMessage());
        }
    }

    @Test
    void adminClientAndCli() throws Exception {
        String topic = Env.topic("schema-admin");
        try (Producer<User> producer = client.newProducer(Schema.JSON(User.class)).topic(topic)
                .create()) {
            producer.send(new User("c", 1));
        }
        SchemaInfo info = admin.schemas().getSchemaInfo(topic);
        assertEquals(SchemaType.JSON, info.getType());
        assertTrue(info.getSchemaDefinition().contains("\"User\""), info.getSchemaDefinition());
        assertEquals(1, admin.schemas().getAllSchemas(topic).size());
        assertEquals(0L, admin.schemas().getSchemaInfoWithVersion(topic).getVersion());

        Env.CliResult got = Env.admin("schemas", "get", topic);
        assertEquals(0, got.exitCode(), got.toString());
        assertTrue(got.stdout().contains("JSON"), got.stdout());

        Env.CliResult del = Env.admin("schemas", "delete", topic);
        assertEquals(0, del.exitCode(), del.toString());
        Env.CliResult after = Env.admin("schemas", "get", topic);
        assertNotEquals(0, after.exitCode(), after.toString());
        // After the delete a new schema of another type is accepted.
        try (Producer<String> p = client.newProducer(Schema.STRING).topic(topic).create()) {
            p.send("s");
        }
        assertEquals(SchemaType.STRING, admin.schemas().getSchemaInfo(topic).getType());
    }

    @Test
    void autoConsumeReadsOldMessagesWithTheirVersion() throws Exception {
        String topic = Env.topic("schema-versions");
        try (Producer<User> p = client.newProducer(Schema.JSON(User.class)).topic(topic).create()) {
            p.send(new User("v0", 0));
        }
        try (Consumer<GenericRecord> c = client.newConsumer(Schema.AUTO_CONSUME()).topic(topic)
                .subscriptionName("auto")
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe()) {
            Message<GenericRecord> m = c.receive(10, TimeUnit.SECONDS);
            assertEquals("v0", m.getValue().getField("name"));
            assertEquals(0L, java.nio.ByteBuffer.wrap(m.getSchemaVersion()).getLong());
        }
    }
}
