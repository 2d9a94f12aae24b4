"""Schema registry: producers and consumers with JSON/STRING/Avro schemas register or are checked
against the topic's schema (FULL by default), the namespace schema policies, the
/admin/v2/schemas API, and GET_SCHEMA / PRODUCER_SUCCESS on raw frames (schema versions are
8-byte big-endian longs)."""

import json
import os
import sys
import uuid

import pulsar
import pytest
import requests
from pulsar.schema import Integer, JsonSchema, Record, String, StringSchema

from harness.util import temp_namespace

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from hostile_wire import WireClient, base_command, fb, frame, fv  # noqa: E402

PRODUCER, PRODUCER_SUCCESS, ERROR, SUBSCRIBE, SUCCESS = 5, 17, 14, 4, 13
LOOKUP, GET_SCHEMA, GET_SCHEMA_RESPONSE = 23, 34, 35
GET_OR_CREATE_SCHEMA, GET_OR_CREATE_SCHEMA_RESPONSE = 39, 40
INCOMPATIBLE_SCHEMA, TOPIC_NOT_FOUND = 18, 11
AVRO, STRING = 4, 1
PREFIX = "org.apache.pulsar.broker.service.schema.exceptions.IncompatibleSchemaException: "

AVRO_V1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
AVRO_V2_NO_DEFAULT = json.dumps({"type": "record", "name": "R", "fields": [
    {"name": "a", "type": "int"}, {"name": "b", "type": "string"}]})
AVRO_V2_DEFAULT = json.dumps({"type": "record", "name": "R", "fields": [
    {"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "x"}]})


class User(Record):
    name = String(required=True)
    age = Integer(required=True)


class UserWithEmail(Record):
    _avro_name = "User"
    name = String(required=True)
    age = Integer(required=True)
    email = String(required=True)


def version_bytes(v):
    return v.to_bytes(8, "big")


def message_version(msg):
    """The message's schema version as bytes (the client returns it as a str)."""
    v = msg.schema_version()
    return v.encode("latin-1") if isinstance(v, str) else v


# --- raw frames -------------------------------------------------------------------------------

def schema_body(data, type_, props=()):
    body = fb(1, "s") + fb(3, data) + fv(4, type_)
    for k, v in props:
        body += fb(5, fb(1, k) + fb(2, v))
    return body


def connect(broker):
    c = WireClient(int(broker.service_url.rsplit(":", 1)[1]), timeout=15)
    c.handshake()
    return c


def lookup(c, topic):
    c.send(frame(base_command(LOOKUP, fb(1, topic) + fv(2, 9999))))
    c.recv_command()


def create_producer(c, topic, producer_id, schema=None):
    body = fb(1, topic) + fv(2, producer_id) + fv(3, 100 + producer_id)
    if schema is not None:
        body += fb(7, schema)
    c.send(frame(base_command(PRODUCER, body)))
    return c.recv_command()


def subscribe(c, topic, consumer_id, sub, schema=None):
    body = fb(1, topic) + fb(2, sub) + fv(3, 1) + fv(4, consumer_id) + fv(5, 200 + consumer_id)
    if schema is not None:
        body += fb(12, schema)
    c.send(frame(base_command(SUBSCRIBE, body)))
    return c.recv_command()


def get_schema(c, topic, request_id, version=None):
    body = fv(1, request_id) + fb(2, topic)
    if version is not None:
        body += fb(3, version_bytes(version))
    c.send(frame(base_command(GET_SCHEMA, body)))
    return c.recv_command()


def get_or_create_schema(c, topic, request_id, schema):
    body = fv(1, request_id) + fb(2, topic) + fb(3, schema)
    c.send(frame(base_command(GET_OR_CREATE_SCHEMA, body)))
    return c.recv_command()


def parse_fields(buf):
    """Fields of a protobuf message as {number: [values]} (varints as ints, others bytes)."""
    from hostile_wire import decode
    return decode(buf)


# --- tests ------------------------------------------------------------------------------------

def test_json_producer_consumer_roundtrip_and_admin_get(client, topic, admin_url):
    producer = client.create_producer(topic, schema=JsonSchema(User))
    consumer = client.subscribe(topic, "sub", schema=JsonSchema(User))
    producer.send(User(name="ann", age=7))
    msg = consumer.receive(timeout_millis=10000)
    assert msg.value().name == "ann" and msg.value().age == 7
    assert message_version(msg) == version_bytes(0)
    local = topic.rsplit("/", 1)[1]
    r = requests.get(f"{admin_url}/admin/v2/schemas/public/default/{local}/schema", timeout=10)
    assert r.status_code == 200
    body = r.json()
    assert body["version"] == 0 and body["type"] == "JSON"
    definition = json.loads(body["data"])
    assert definition["name"] == "User"
    assert [f["name"] for f in definition["fields"]] == ["name", "age"]
    # A second producer with the same schema gets the same version.
    producer2 = client.create_producer(topic, schema=JsonSchema(User))
    producer2.send(User(name="bob", age=8))
    assert message_version(consumer.receive(timeout_millis=10000)) == version_bytes(0)


def test_string_producer_refused_on_json_topic(client, topic):
    client.create_producer(topic, schema=JsonSchema(User))
    with pytest.raises(pulsar.exceptions.IncompatibleSchema):
        client.create_producer(topic, schema=StringSchema())
    with pytest.raises(pulsar.exceptions.IncompatibleSchema):
        client.subscribe(topic, "s2", schema=StringSchema())
    # A producer without schema (BYTES) is accepted: validation is not enforced by default.
    client.create_producer(topic).send(b"raw")


def test_full_refuses_a_new_field_without_default(client, topic, admin_url):
    client.create_producer(topic, schema=JsonSchema(User))
    with pytest.raises(pulsar.exceptions.IncompatibleSchema):
        client.create_producer(topic, schema=JsonSchema(UserWithEmail))
    local = topic.rsplit("/", 1)[1]
    r = requests.get(f"{admin_url}/admin/v2/schemas/public/default/{local}/schemas", timeout=10)
    assert r.status_code == 200
    assert [s["version"] for s in r.json()["getSchemaResponses"]] == [0]


def test_raw_producer_success_versions_and_messages(broker):
    topic = f"persistent://public/default/schema-raw-{uuid.uuid4().hex[:8]}"
    c = connect(broker)
    lookup(c, topic)
    t, body = create_producer(c, topic, 1, schema_body(AVRO_V1, AVRO))
    assert t == PRODUCER_SUCCESS and body[4] == [version_bytes(0)]
    t, body = create_producer(c, topic, 2, schema_body(AVRO_V2_NO_DEFAULT, AVRO))
    assert t == ERROR and body[2] == [INCOMPATIBLE_SCHEMA]
    msg = body[3][0].decode()
    assert msg.startswith(PREFIX + "Error during schema compatibility check with strategy FULL: "
                          "org.apache.avro.SchemaValidationException: Unable to read schema: \n{\n"
                          '  "type" : "record",'), msg
    assert " caused by " + PREFIX in msg
    t, body = create_producer(c, topic, 3, schema_body("", STRING))
    assert t == ERROR and body[2] == [INCOMPATIBLE_SCHEMA]
    assert body[3][0].decode() == (
        PREFIX + "Incompatible schema: exists schema type AVRO, new schema type STRING caused by "
        + PREFIX + "Incompatible schema: exists schema type AVRO, new schema type STRING")
    t, body = create_producer(c, topic, 4, schema_body(AVRO_V2_DEFAULT, AVRO, [("k", "v")]))
    assert t == PRODUCER_SUCCESS and body[4] == [version_bytes(1)]
    t, body = create_producer(c, topic, 8, schema_body("abc", STRING))
    assert t == ERROR and body[2] == [INCOMPATIBLE_SCHEMA]
    assert body[3] == [b"Invalid schema definition data for string schema : 'abc'"]
    t, body = create_producer(c, topic, 9, schema_body("{bad", AVRO))
    assert t == ERROR and body[2] == [INCOMPATIBLE_SCHEMA]
    assert body[3][0].startswith(b"Invalid schema definition data for AVRO schema")
    t, body = create_producer(c, topic, 5)  # no schema
    assert t == PRODUCER_SUCCESS and body[4] == [b""]
    # A consumer's incompatible schema: the bare message.
    t, body = subscribe(c, topic, 6, "sub", schema_body("", STRING))
    assert t == ERROR and body[2] == [INCOMPATIBLE_SCHEMA]
    assert body[3][0].decode() == (
        "Incompatible schema: exists schema type AVRO, new schema type STRING")
    t, body = subscribe(c, topic, 7, "sub", schema_body(AVRO_V2_DEFAULT, AVRO))
    assert t == SUCCESS
    c.close()


def test_raw_get_schema(broker):
    topic = f"persistent://public/default/schema-get-{uuid.uuid4().hex[:8]}"
    c = connect(broker)
    lookup(c, topic)
    t, body = get_schema(c, topic, 1)
    assert t == GET_SCHEMA_RESPONSE
    assert body[2] == [TOPIC_NOT_FOUND]
    assert body[3] == [f"Topic not found or no-schema {topic}".encode()]
    create_producer(c, topic, 1, schema_body(AVRO_V1, AVRO))
    create_producer(c, topic, 2, schema_body(AVRO_V2_DEFAULT, AVRO, [("k", "v")]))
    t, body = get_schema(c, topic, 2)
    assert t == GET_SCHEMA_RESPONSE and body[5] == [version_bytes(1)]
    schema = parse_fields(body[4][0])
    assert schema[1] == [topic.split("://")[1].encode()]
    assert schema[3] == [AVRO_V2_DEFAULT.encode()] and schema[4] == [AVRO]
    assert parse_fields(schema[5][0]) == {1: [b"k"], 2: [b"v"]}
    t, body = get_schema(c, topic, 3, version=0)
    assert body[5] == [version_bytes(0)] and parse_fields(body[4][0])[3] == [AVRO_V1.encode()]
    t, body = get_schema(c, topic, 4, version=7)
    assert body[2] == [TOPIC_NOT_FOUND]

    # GET_OR_CREATE_SCHEMA: an existing version, a new compatible one, an incompatible one.
    t, body = get_or_create_schema(c, topic, 5, schema_body(AVRO_V1, AVRO))
    assert t == GET_OR_CREATE_SCHEMA_RESPONSE and body[4] == [version_bytes(0)]
    newer = json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "x"},
        {"name": "c", "type": "long", "default": 0}]})
    t, body = get_or_create_schema(c, topic, 6, schema_body(newer, AVRO))
    assert body[4] == [version_bytes(2)]
    t, body = get_or_create_schema(c, topic, 7, schema_body("", STRING))
    assert body[2] == [INCOMPATIBLE_SCHEMA]
    assert body[3][0].decode().startswith(PREFIX + "Incompatible schema: exists schema type AVRO")
    missing = f"persistent://public/default/schema-none-{uuid.uuid4().hex[:8]}"
    lookup(c, missing)
    t, body = get_or_create_schema(c, missing, 8, schema_body(AVRO_V1, AVRO))
    assert body[2] == [TOPIC_NOT_FOUND] and body[3] == [f"Topic not found {missing}".encode()]
    c.close()


def test_consumer_schema_registers_on_an_idle_topic_only(broker):
    c = connect(broker)
    idle = f"persistent://public/default/schema-idle-{uuid.uuid4().hex[:8]}"
    lookup(c, idle)
    t, _ = subscribe(c, idle, 1, "sub", schema_body(AVRO_V1, AVRO))
    assert t == SUCCESS
    t, body = get_schema(c, idle, 2)
    assert body[5] == [version_bytes(0)]
    busy = f"persistent://public/default/schema-busy-{uuid.uuid4().hex[:8]}"
    lookup(c, busy)
    create_producer(c, busy, 3)  # a producer without schema keeps the topic active
    t, body = subscribe(c, busy, 4, "sub", schema_body(AVRO_V1, AVRO))
    assert t == ERROR and body[2] == [INCOMPATIBLE_SCHEMA]
    assert body[3] == [b"Failed to add schema to an active topic with empty(BYTES) schema: "
                       b"new schema type AVRO"]
    c.close()


def test_admin_schema_api(admin_url):
    local = f"schema-admin-{uuid.uuid4().hex[:8]}"
    base = f"{admin_url}/admin/v2/schemas/public/default/{local}"
    assert requests.get(base + "/schema", timeout=10).status_code == 404
    assert requests.get(base + "/schemas", timeout=10).json() == {"getSchemaResponses": []}
    r = requests.post(base + "/compatibility", json={"type": "AVRO", "schema": AVRO_V1},
                      timeout=10)
    assert r.status_code == 202
    assert r.json() == {"schemaCompatibilityStrategy": "FULL", "compatibility": True}
    post = {"type": "AVRO", "schema": AVRO_V1, "properties": {"k": "v"}}
    r = requests.post(base + "/schema", json=post, timeout=10)
    assert r.status_code == 200 and r.json() == {"version": {"version": 0}}
    assert requests.post(base + "/schema", json=post, timeout=10).json() == {
        "version": {"version": 0}}
    got = requests.get(base + "/schema", timeout=10).json()
    assert (got["version"], got["type"], got["data"], got["properties"]) == (
        0, "AVRO", AVRO_V1, {"k": "v"})
    assert isinstance(got["timestamp"], int) and got["timestamp"] > 0
    assert requests.get(base + "/schema/0", timeout=10).json()["data"] == AVRO_V1
    assert requests.get(base + "/schema/5", timeout=10).status_code == 404
    assert requests.post(base + "/version", json=post, timeout=10).json() == {"version": 0}
    assert requests.post(base + "/version", json={"type": "AVRO", "schema": AVRO_V2_DEFAULT},
                         timeout=10).json() == {"version": -1}
    bad = {"type": "AVRO", "schema": AVRO_V2_NO_DEFAULT}
    assert requests.post(base + "/compatibility", json=bad, timeout=10).status_code == 500
    assert requests.post(base + "/schema", json=bad, timeout=10).status_code == 409
    assert requests.post(base + "/schema", json={"type": "STRING", "schema": ""},
                         timeout=10).status_code == 409
    assert requests.post(base + "/schema", json={"type": "AVRO", "schema": "{nope"},
                         timeout=10).status_code == 422
    r = requests.post(base + "/schema", json={"type": "AVRO", "schema": AVRO_V2_DEFAULT},
                      timeout=10)
    assert r.json() == {"version": {"version": 1}}
    all_versions = requests.get(base + "/schemas", timeout=10).json()["getSchemaResponses"]
    assert [s["version"] for s in all_versions] == [0, 1]
    # Delete: a tombstone version; what came before is gone; numbering continues.
    r = requests.delete(base + "/schema", timeout=10)
    assert r.status_code == 200 and r.json() == {"version": 2}
    assert requests.get(base + "/schema", timeout=10).status_code == 404
    assert requests.get(base + "/schema/0", timeout=10).status_code == 404
    assert requests.get(base + "/schemas", timeout=10).json() == {"getSchemaResponses": []}
    r = requests.post(base + "/schema", json={"type": "STRING", "schema": ""}, timeout=10)
    assert r.json() == {"version": {"version": 3}}


def test_partitions_share_the_partitioned_topics_schema(client, admin_url):
    local = f"schema-part-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{local}"
    r = requests.put(f"{admin_url}/admin/v2/persistent/public/default/{local}/partitions",
                     json=2, timeout=10)
    assert r.status_code == 204
    producer = client.create_producer(topic, schema=JsonSchema(User))
    producer.send(User(name="p", age=1))
    got = requests.get(f"{admin_url}/admin/v2/schemas/public/default/{local}/schema", timeout=10)
    assert got.status_code == 200 and got.json()["type"] == "JSON"
    with pytest.raises(pulsar.exceptions.IncompatibleSchema):
        client.create_producer(f"{topic}-partition-1", schema=StringSchema())


def test_topic_delete_removes_its_schema(client, admin_url):
    post = {"type": "AVRO", "schema": AVRO_V1}
    plain = f"schema-del-{uuid.uuid4().hex[:8]}"
    assert requests.put(f"{admin_url}/admin/v2/persistent/public/default/{plain}",
                        timeout=10).status_code == 204
    schema_url = f"{admin_url}/admin/v2/schemas/public/default/{plain}/schema"
    assert requests.post(schema_url, json=post, timeout=10).status_code == 200
    assert requests.delete(f"{admin_url}/admin/v2/persistent/public/default/{plain}",
                           timeout=10).status_code == 204
    assert requests.get(schema_url, timeout=10).status_code == 404
    # A partition's delete keeps the partitioned topic's schema; deleting the topic drops it.
    part = f"schema-delp-{uuid.uuid4().hex[:8]}"
    base = f"{admin_url}/admin/v2/persistent/public/default/{part}"
    assert requests.put(base + "/partitions", json=2, timeout=10).status_code == 204
    schema_url = f"{admin_url}/admin/v2/schemas/public/default/{part}/schema"
    assert requests.post(schema_url, json=post, timeout=10).status_code == 200
    client.create_producer(f"persistent://public/default/{part}-partition-0").close()
    assert requests.delete(base + "-partition-0", timeout=10).status_code == 204
    assert requests.get(schema_url, timeout=10).status_code == 200
    assert requests.delete(base + "/partitions", timeout=10).status_code == 204
    assert requests.get(schema_url, timeout=10).status_code == 404


@pytest.fixture
def namespace(admin_url):
    yield from temp_namespace(admin_url, "schema")


def test_namespace_schema_policies(client, admin_url, namespace):
    url = f"{admin_url}/admin/v2/namespaces/{namespace}"
    assert requests.get(url + "/schemaCompatibilityStrategy", timeout=10).json() == "UNDEFINED"
    assert requests.get(url + "/isAllowAutoUpdateSchema", timeout=10).json() is True
    assert requests.get(url + "/schemaValidationEnforced", timeout=10).json() is False
    policies = requests.get(url, timeout=10).json()
    assert policies["schema_compatibility_strategy"] == "UNDEFINED"
    assert policies["is_allow_auto_update_schema"] is True
    assert policies["schema_validation_enforced"] is False

    # ALWAYS_COMPATIBLE: a new field without default is accepted.
    assert requests.put(url + "/schemaCompatibilityStrategy", json="ALWAYS_COMPATIBLE",
                        timeout=10).status_code == 204
    assert requests.get(url + "/schemaCompatibilityStrategy",
                        timeout=10).json() == "ALWAYS_COMPATIBLE"
    assert requests.get(url, timeout=10).json()["schema_compatibility_strategy"] == \
        "ALWAYS_COMPATIBLE"
    topic = f"persistent://{namespace}/evolve"
    client.create_producer(topic, schema=JsonSchema(User))
    client.create_producer(topic, schema=JsonSchema(UserWithEmail))

    # FORWARD: old readers must read the new data; dropping a field they need is refused.
    assert requests.put(url + "/schemaCompatibilityStrategy", json="FORWARD",
                        timeout=10).status_code == 204
    fwd = f"persistent://{namespace}/forward"
    client.create_producer(fwd, schema=JsonSchema(UserWithEmail))
    with pytest.raises(pulsar.exceptions.IncompatibleSchema):
        client.create_producer(fwd, schema=JsonSchema(User))

    # Auto update off: only stored versions are accepted.
    assert requests.put(url + "/schemaCompatibilityStrategy", json="ALWAYS_COMPATIBLE",
                        timeout=10).status_code == 204
    assert requests.post(url + "/isAllowAutoUpdateSchema", json=False,
                         timeout=10).status_code == 204
    assert requests.get(url + "/isAllowAutoUpdateSchema", timeout=10).json() is False
    fixed = f"persistent://{namespace}/fixed"
    local = "fixed"
    r = requests.post(f"{admin_url}/admin/v2/schemas/{namespace}/{local}/schema",
                      json={"type": "JSON", "schema": json.dumps(User.schema())}, timeout=10)
    assert r.status_code == 200
    client.create_producer(fixed, schema=JsonSchema(User))
    with pytest.raises(pulsar.exceptions.IncompatibleSchema):
        client.create_producer(fixed, schema=JsonSchema(UserWithEmail))

    # Validation enforced: a producer without schema is refused on a topic with a schema.
    assert requests.post(url + "/schemaValidationEnforced", json=True,
                         timeout=10).status_code == 204
    assert requests.get(url + "/schemaValidationEnforced", timeout=10).json() is True
    with pytest.raises(pulsar.exceptions.IncompatibleSchema):
        client.create_producer(fixed)
    client.create_producer(f"persistent://{namespace}/no-schema-yet")


# --- schema definitions the broker refuses (Pulsar's SchemaDataValidator) ----------------------

def upload(admin_url, body, local=None, ns="public/default"):
    local = local or f"schema-bad-{uuid.uuid4().hex[:8]}"
    return requests.post(f"{admin_url}/admin/v2/schemas/{ns}/{local}/schema", json=body,
                         timeout=30)


def test_upload_to_a_missing_namespace_is_404(admin_url):
    missing = f"public/missing-{uuid.uuid4().hex[:8]}"
    base = f"{admin_url}/admin/v2/schemas/{missing}/t"
    for path in ("/schema", "/compatibility"):
        r = requests.post(base + path, json={"type": "AVRO", "schema": AVRO_V1}, timeout=30)
        assert r.status_code == 404 and r.json() == {"reason": "Namespace does not exist"}, path
    r = upload(admin_url, {"type": "STRING", "schema": ""},
               ns=f"missing-tenant-{uuid.uuid4().hex[:8]}/default")
    assert r.status_code == 404
    # Reads are answered as for a topic without a schema.
    assert requests.get(base + "/schema", timeout=30).status_code == 404
    assert requests.get(base + "/schemas", timeout=30).json() == {"getSchemaResponses": []}
    assert requests.get(f"{admin_url}/admin/v2/namespaces/{missing}",
                        timeout=30).status_code == 404  # nothing was created


def avro_record(name, field="a", namespace=None):
    d = {"type": "record", "name": name, "fields": [{"name": field, "type": "int"}]}
    if namespace is not None:
        d["namespace"] = namespace
    return json.dumps(d)


@pytest.mark.parametrize("definition,ok", [
    (avro_record("R"), True),
    (avro_record("R$x", "$a"), True),  # '$' is allowed (Pulsar's CompatibleNameValidator)
    (avro_record("a.b.R"), True),
    (json.dumps("string"), True),  # a primitive Avro schema
    (avro_record("1R"), False),
    (avro_record("R-x"), False),
    (avro_record("R", "a-b"), False),
    (avro_record("R", "1a"), False),
    (avro_record("R", namespace="a.1b"), False),
    (avro_record("a.1b.R"), False),
    (json.dumps({"type": "record", "name": "R", "fields": [{"name": "e", "type": {
        "type": "enum", "name": "E", "symbols": ["A", "1B"]}}]}), False),
    (json.dumps({"type": "record", "name": "R", "fields": [{"name": "l", "type": {
        "type": "array", "items": {"type": "record", "name": "In-x", "fields": []}}}]}), False),
    (json.dumps({"type": ["null", "string"]}), False),
])
def test_avro_names(admin_url, definition, ok):
    r = upload(admin_url, {"type": "AVRO", "schema": definition})
    if ok:
        assert r.status_code == 200 and r.json() == {"version": {"version": 0}}, r.text
    else:
        assert r.status_code == 422, r.text


def test_avro_top_level_union_refused_json_names_checked(admin_url):
    assert upload(admin_url, {"type": "AVRO", "schema": json.dumps(["null", "string"])}
                  ).status_code == 422
    assert upload(admin_url, {"type": "JSON", "schema": avro_record("1R")}).status_code == 422
    assert upload(admin_url, {"type": "PROTOBUF", "schema": avro_record("1R")}).status_code == 422
    # A JSON Schema document is not an Avro schema: refused for JSON too.
    assert upload(admin_url, {"type": "JSON", "schema": json.dumps(
        {"type": "object", "properties": {"a": {"type": "integer"}}})}).status_code == 422


def test_key_value_definitions(admin_url):
    kv_types = {"key.schema.type": "AVRO", "value.schema.type": "AVRO"}
    good = {"type": "KEY_VALUE", "properties": kv_types,
            "schema": json.dumps({"key": json.loads(AVRO_V1), "value": json.loads(AVRO_V1)})}
    local = f"schema-kv-{uuid.uuid4().hex[:8]}"
    r = upload(admin_url, good, local)
    assert r.status_code == 200 and r.json() == {"version": {"version": 0}}, r.text
    got = requests.get(f"{admin_url}/admin/v2/schemas/public/default/{local}/schema",
                       timeout=30).json()
    assert got["type"] == "KEY_VALUE" and got["properties"] == kv_types
    assert json.loads(got["data"]) == {"key": json.loads(AVRO_V1), "value": json.loads(AVRO_V1)}
    # Each part is validated as the type its property names.
    bad_key = dict(good, schema=json.dumps({"key": {"type": "record", "name": "1K", "fields": []},
                                            "value": json.loads(AVRO_V1)}))
    assert upload(admin_url, bad_key).status_code == 422
    string_key = {"type": "KEY_VALUE", "properties": {"key.schema.type": "STRING"},
                  "schema": json.dumps({"key": {"type": "x"}, "value": {}})}
    assert upload(admin_url, string_key).status_code == 422
    int_key = {"type": "KEY_VALUE", "properties": {"key.schema.type": "INT32"},
               "schema": json.dumps({"key": {}, "value": {}})}
    assert upload(admin_url, int_key).status_code == 422
    # Not the {"key", "value"} form, or a type name that does not exist: Pulsar answers 500.
    for schema in ("garbage", "", json.dumps({"key": {}})):
        assert upload(admin_url, {"type": "KEY_VALUE", "schema": schema}).status_code == 500
    assert upload(admin_url, {"type": "KEY_VALUE", "properties": {"key.schema.type": "nonsense"},
                              "schema": json.dumps({"key": {}, "value": {}})}).status_code == 500


def file_descriptor_set(root_message="Msg"):
    """A FileDescriptorSet with m.proto (package pkg, message Msg { int32 a = 1; })."""
    field = fb(1, "a") + fv(3, 1) + fv(4, 1) + fv(5, 5)  # optional int32 a = 1
    message = fb(1, root_message) + fb(2, field)
    file = fb(1, "m.proto") + fb(2, "pkg") + fb(4, message)
    return fb(1, file)


def protobuf_native(fds, root="pkg.Msg", root_file="m.proto"):
    import base64
    return json.dumps({"fileDescriptorSet": base64.b64encode(fds).decode(),
                       "rootMessageTypeName": root, "rootFileDescriptorName": root_file})


def test_protobuf_native_definitions(admin_url):
    ok = upload(admin_url, {"type": "PROTOBUF_NATIVE", "schema": protobuf_native(
        file_descriptor_set())})
    assert ok.status_code == 200 and ok.json() == {"version": {"version": 0}}, ok.text
    for schema in ("garbage", "", protobuf_native(b"\xff\xff"),
                   protobuf_native(file_descriptor_set(), root_file="x.proto"),
                   protobuf_native(file_descriptor_set(), root="pkg.Nope")):
        r = upload(admin_url, {"type": "PROTOBUF_NATIVE", "schema": schema})
        assert r.status_code == 422, (schema, r.text)


def proto_file(*messages):
    """A FileDescriptorSet with m.proto (package pkg) holding `messages`, each (name, [int32
    field names]) numbered from 1."""
    body = b""
    for name, fields in messages:
        body += fb(4, fb(1, name) + b"".join(
            fb(2, fb(1, f) + fv(3, i + 1) + fv(4, 1) + fv(5, 5)) for i, f in enumerate(fields)))
    return fb(1, fb(1, "m.proto") + fb(2, "pkg") + body)


PROTOBUF, PROTOBUF_NATIVE = 3, 20


def test_protobuf_native_compatibility_is_the_root_message(broker, admin_url):
    # Pulsar's default ProtobufNativeSchemaCompatibilityCheck (FULL): the root message's full
    # name may not change; its fields are not compared.
    local = f"schema-pbn-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{local}"
    v1 = protobuf_native(proto_file(("Msg", ["a"]), ("Other", ["a"])))
    more_fields = protobuf_native(proto_file(("Msg", ["b", "c"]), ("Other", ["a"])))
    other_root = protobuf_native(proto_file(("Msg", ["a"]), ("Other", ["a"])), root="pkg.Other")
    c = connect(broker)
    lookup(c, topic)
    t, body = create_producer(c, topic, 1, schema_body(v1, PROTOBUF_NATIVE))
    assert t == PRODUCER_SUCCESS and body[4] == [version_bytes(0)]
    t, body = create_producer(c, topic, 2, schema_body(more_fields, PROTOBUF_NATIVE))
    assert t == PRODUCER_SUCCESS and body[4] == [version_bytes(1)]
    why = ("Protobuf root message change is not allowed under the 'FULL' strategy. Original "
           "message name: 'pkg.Msg', new message name: 'pkg.Other'.")
    t, body = create_producer(c, topic, 3, schema_body(other_root, PROTOBUF_NATIVE))
    assert t == ERROR and body[2] == [INCOMPATIBLE_SCHEMA]
    assert body[3][0].decode() == PREFIX + why + " caused by " + PREFIX + why
    c.close()
    # The admin API answers as for an incompatible Avro schema.
    base = f"{admin_url}/admin/v2/schemas/public/default/{local}"
    other = {"type": "PROTOBUF_NATIVE", "schema": other_root}
    r = requests.post(base + "/compatibility", json=other, timeout=30)
    assert r.status_code == 500 and why in r.json()["reason"], r.text
    assert requests.post(base + "/schema", json=other, timeout=30).status_code == 409


def producers_get_versions(broker, topic, schema_type, expected):
    """A raw connection on topic (LOOKUP first) whose producers 1, 2, ... register (definition,
    schema_type) and each get back version v, for (definition, v) in `expected`; returns it."""
    c = connect(broker)
    lookup(c, topic)
    for producer_id, (definition, version) in enumerate(expected, start=1):
        t, body = create_producer(c, topic, producer_id, schema_body(definition, schema_type))
        assert t == PRODUCER_SUCCESS and body[4] == [version_bytes(version)], body
    return c


def test_protobuf_is_not_checked_as_avro(broker):
    # PROTOBUF definitions are Avro schemas, but Pulsar's default checkers have no PROTOBUF one:
    # only a type change is refused (AVRO_V2_NO_DEFAULT is refused for AVRO under FULL).
    topic = f"persistent://public/default/schema-pb-{uuid.uuid4().hex[:8]}"
    c = producers_get_versions(broker, topic, PROTOBUF,
                               [(AVRO_V1, 0), (AVRO_V2_NO_DEFAULT, 1), (AVRO_V1, 0)])
    t, body = create_producer(c, topic, 9, schema_body(AVRO_V1, AVRO))
    assert t == ERROR and body[2] == [INCOMPATIBLE_SCHEMA]
    c.close()


def key_value_data(key, value):
    k, v = key.encode(), value.encode()
    return len(k).to_bytes(4, "big") + k + len(v).to_bytes(4, "big") + v


# Written as a client sends it: numbers and escapes in forms Java's JSON libraries print otherwise.
KV_KEY = ('{"type":"record","name":"K","fields":['
          '{"name":"a","type":"double","default":1e2},{"name":"b","type":"double","default":2.50},'
          '{"name":"c","type":"double","default":0.0001},{"name":"d","type":"long","default":-0},'
          '{"name":"s","type":"string","default":"\\u2028\\u001f\\/"}]}')
KV_CPX = ('{"type":"record","name":"cpx","fields":[{"name":"re","type":"double"},'
          '{"name":"im","type":"double"}]}')


def test_key_value_schema_over_http_is_pulsars_text(broker, admin_url):
    # GET answers each part as Jackson prints its tree (Pulsar's
    # convertKeyValueSchemaInfoDataToString); GET_SCHEMA answers the stored bytes.
    local = f"schema-kv-http-{uuid.uuid4().hex[:8]}"
    topic = f"persistent://public/default/{local}"
    props = [("key.schema.type", "JSON"), ("value.schema.type", "JSON")]
    stored = key_value_data(KV_KEY, KV_CPX)
    c = connect(broker)
    lookup(c, topic)
    t, body = create_producer(c, topic, 1, schema_body(stored, 15, props))
    assert t == PRODUCER_SUCCESS, body
    got = requests.get(f"{admin_url}/admin/v2/schemas/public/default/{local}/schema",
                       timeout=30).json()
    assert got["data"] == (
        '{"key":{"type":"record","name":"K","fields":['
        '{"name":"a","type":"double","default":100.0},'
        '{"name":"b","type":"double","default":2.5},'
        '{"name":"c","type":"double","default":1.0E-4},'
        '{"name":"d","type":"long","default":0},'
        '{"name":"s","type":"string","default":"\u2028\\u001F/"}]},'
        '"value":' + KV_CPX + '}')
    t, body = get_schema(c, topic, 7)
    assert t == GET_SCHEMA_RESPONSE and parse_fields(body[4][0])[3] == [stored]
    c.close()


def test_key_value_upload_stores_pulsars_text(broker, admin_url):
    # The REST form's parts are stored as Gson prints them (Pulsar's
    # convertKeyValueDataStringToSchemaInfoSchema): numbers as written, its escapes; "" empty.
    local = f"schema-kv-up-{uuid.uuid4().hex[:8]}"
    body = {"type": "KEY_VALUE",
            "properties": {"key.schema.type": "STRING", "value.schema.type": "JSON"},
            "schema": '{"key": "", "value": ' + KV_KEY.replace(",", ", ") + '}'}
    r = requests.post(f"{admin_url}/admin/v2/schemas/public/default/{local}/schema", json=body,
                      timeout=30)
    assert r.status_code == 200, r.text
    c = connect(broker)
    topic = f"persistent://public/default/{local}"
    lookup(c, topic)
    t, got = get_schema(c, topic, 7)
    assert t == GET_SCHEMA_RESPONSE
    assert parse_fields(got[4][0])[3] == [key_value_data("", KV_KEY.replace("\\/", "/"))]
    c.close()


# --- Avro record names (Pulsar's SchemaValidator runs Avro's Resolver, not SchemaCompatibility) --

def _wrap(field_type, name="Outer"):
    return {"type": "record", "name": name, "fields": [{"name": "x", "type": field_type}]}


_REC = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
_ENUM = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
# (old, new, compatible under the checking strategies): a record renamed alone matches.
_RENAMES = {
    "record": (_REC, dict(_REC, name="S"), True),
    "namespace": (dict(_REC, namespace="a"), dict(_REC, namespace="b"), True),
    "name_and_namespace": (dict(_REC, namespace="a"), dict(_REC, name="S", namespace="b"), True),
    "nested_record": (_wrap(dict(_REC, name="In")), _wrap(dict(_REC, name="In2")), True),
    "record_in_union": (_wrap(["null", dict(_REC, name="In")]),
                        _wrap(["null", dict(_REC, name="In2")]), True),
    # Enums keep their simple name (a namespace change is accepted).
    "enum": (_wrap(_ENUM), _wrap(dict(_ENUM, name="F")), False),
    "enum_namespace": (_wrap(dict(_ENUM, namespace="a")), _wrap(dict(_ENUM, namespace="b")), True),
}
_STRATEGIES = ["BACKWARD", "FORWARD", "FULL", "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE",
               "FULL_TRANSITIVE", "ALWAYS_COMPATIBLE", "ALWAYS_INCOMPATIBLE"]


@pytest.mark.parametrize("strategy", _STRATEGIES)
def test_avro_record_rename_is_compatible(admin_url, namespace, strategy):
    r = requests.put(f"{admin_url}/admin/v2/namespaces/{namespace}/schemaCompatibilityStrategy",
                     json=strategy, timeout=10)
    assert r.status_code == 204, r.text
    for case, (old, new, compatible) in _RENAMES.items():
        ok = strategy == "ALWAYS_COMPATIBLE" or (compatible and strategy != "ALWAYS_INCOMPATIBLE")
        base = f"{admin_url}/admin/v2/schemas/{namespace}/rename-{uuid.uuid4().hex[:8]}"
        first = requests.post(base + "/schema", json={"type": "AVRO", "schema": json.dumps(old)},
                              timeout=30)
        assert first.status_code == 200, (case, first.text)
        body = {"type": "AVRO", "schema": json.dumps(new)}
        check = requests.post(base + "/compatibility", json=body, timeout=30)
        put = requests.post(base + "/schema", json=body, timeout=30)
        if ok:
            assert check.status_code == 202 and check.json() == {
                "schemaCompatibilityStrategy": strategy, "compatibility": True}, (case, check.text)
            assert put.status_code == 200 and put.json() == {"version": {"version": 1}}, (
                case, put.text)
        else:
            assert check.status_code == 500, (case, check.status_code)
            assert put.status_code == 409, (case, put.status_code)
            versions = requests.get(base + "/schemas", timeout=30).json()["getSchemaResponses"]
            assert len(versions) == 1, case  # the refused one left nothing behind


def test_avro_producer_with_a_renamed_record(broker):
    # A producer whose Avro record has another name and namespace (same fields) registers a new
    # version under the default FULL strategy (raw frames: the venv's client has no fastavro).
    topic = f"persistent://public/default/schema-rename-{uuid.uuid4().hex[:8]}"
    renamed = json.dumps(dict(json.loads(AVRO_V1), name="Renamed", namespace="other"))
    producers_get_versions(broker, topic, AVRO, [(AVRO_V1, 0), (renamed, 1), (AVRO_V1, 0)]).close()


def test_key_value_upload_refusals_keep_the_schema(admin_url):
    # Pulsar's KeyValueSchemaCompatibilityCheck (each part by its type's checker, the part types
    # fixed) and SchemaDataValidator (client-side part types: 422); nothing refused is stored.
    avro = {"key.schema.type": "AVRO", "value.schema.type": "AVRO"}
    v1, no_default, with_default = (json.loads(d) for d in (AVRO_V1, AVRO_V2_NO_DEFAULT,
                                                            AVRO_V2_DEFAULT))

    def kv(key, value, props=avro):
        return {"type": "KEY_VALUE", "properties": props,
                "schema": json.dumps({"key": key, "value": value})}

    base = f"{admin_url}/admin/v2/schemas/public/default/schema-kv-keep-{uuid.uuid4().hex[:8]}"
    r = requests.post(base + "/schema", json=kv(v1, v1), timeout=30)
    assert r.status_code == 200 and r.json() == {"version": {"version": 0}}, r.text

    def versions():
        return len(requests.get(base + "/schemas", timeout=30).json()["getSchemaResponses"])

    # FULL: a value field without default is refused, 409 on upload, 500 on /compatibility.
    r = requests.post(base + "/schema", json=kv(v1, no_default), timeout=30)
    assert r.status_code == 409 and "Error during schema compatibility check" in r.text, r.text
    assert requests.post(base + "/compatibility", json=kv(v1, no_default),
                         timeout=30).status_code == 500
    # A part's type may not change.
    bytes_key = kv("", v1, {"key.schema.type": "BYTES", "value.schema.type": "AVRO"})
    why = ("Key schemas or Value schemas are different schema type, from key schema type is AVRO "
           "and to key schema is BYTES, from value schema is AVRO and to value schema is AVRO")
    r = requests.post(base + "/schema", json=bytes_key, timeout=30)
    assert r.status_code == 409 and why in r.text, r.text
    # Client-side part types are invalid data (Magnetar answered 500 for AUTO, AUTO_PUBLISH).
    for t in ("AUTO", "AUTO_PUBLISH", "AUTO_CONSUME"):
        r = requests.post(base + "/schema", json=kv(v1, "", {"key.schema.type": "AVRO",
                                                             "value.schema.type": t}), timeout=30)
        assert r.status_code == 422 and f"Schema {t} is a client-side schema type" in r.text, (
            t, r.text)
    # /compatibility validates the definition first (Pulsar: 500 with the validator's message).
    r = requests.post(base + "/compatibility", json=kv(v1, "garbage", {
        "key.schema.type": "AVRO", "value.schema.type": "JSON"}), timeout=30)
    assert r.status_code == 500 and "Invalid schema definition data for JSON schema" in r.text, (
        r.text)
    assert versions() == 1
    got = requests.get(base + "/schema", timeout=30).json()
    assert got["version"] == 0 and json.loads(got["data"]) == {"key": v1, "value": v1}
    # A compatible value change is a new version.
    assert requests.post(base + "/compatibility", json=kv(v1, with_default),
                         timeout=30).status_code == 202
    r = requests.post(base + "/schema", json=kv(v1, with_default), timeout=30)
    assert r.status_code == 200 and r.json() == {"version": {"version": 1}}, r.text
    assert versions() == 2
