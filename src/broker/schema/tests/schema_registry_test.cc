#include "broker/schema/schema_registry.h"

#include <google/protobuf/descriptor.pb.h>
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "base/blocking_wait.h"
#include "broker/common/base64.h"
#include "broker/schema/internal/java_json.h"
#include "broker/schema/schema_compatibility.h"
#include "broker/schema/schema_data_validator.h"
#include "metadata/local_store.h"
#include "net/event_loop.h"

namespace magnetar::broker {
namespace {

using S = SchemaCompatibilityStrategy;

const char* kV1 = R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"}]})";
// Adds a field without default: old readers ignore it, new readers cannot read old data.
const char* kV2NoDefault = R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"},)"
                           R"({"name":"b","type":"string"}]})";
// Adds a field with a default: compatible both ways.
const char* kV2Default = R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"},)"
                         R"({"name":"b","type":"string","default":"x"}]})";

SchemaData avro(const std::string& def) { return SchemaData{SchemaType::AVRO, def, {}}; }

std::shared_ptr<const AvroSchema> parse(const std::string& text) {
  auto s = parseAvroSchema(text);
  EXPECT_TRUE(s.isOk()) << text << ": " << s.status().toString();
  return s.isOk() ? *s : nullptr;
}

bool reads(const std::string& reader, const std::string& writer) {
  return canRead(*parse(reader), *parse(writer));
}

TEST(AvroResolution, FieldsAndDefaults) {
  EXPECT_TRUE(reads(kV1, kV2NoDefault));   // the extra writer field is skipped
  EXPECT_FALSE(reads(kV2NoDefault, kV1));  // reader field b has no default
  EXPECT_TRUE(reads(kV2Default, kV1));
  EXPECT_TRUE(reads(kV1, kV1));
}

TEST(AvroResolution, PromotionsAndNames) {
  auto rec = [](const std::string& type) {
    return R"({"type":"record","name":"R","fields":[{"name":"a","type":)" + type + "}]}";
  };
  EXPECT_TRUE(reads(rec("\"long\""), rec("\"int\"")));
  EXPECT_FALSE(reads(rec("\"int\""), rec("\"long\"")));
  EXPECT_TRUE(reads(rec("\"double\""), rec("\"float\"")));
  EXPECT_TRUE(reads(rec("\"string\""), rec("\"bytes\"")));
  EXPECT_FALSE(reads(rec("\"boolean\""), rec("\"int\"")));
  // A logical type annotates its base type.
  EXPECT_TRUE(reads(rec(R"({"type":"long","logicalType":"timestamp-millis"})"), rec("\"long\"")));
  // Avro's Resolver (Pulsar's SchemaValidator) does not compare record names; enums and fixeds
  // keep their simple names unless the reader has the writer's full name as an alias.
  EXPECT_TRUE(reads(R"({"type":"record","name":"Other","namespace":"b","fields":[]})",
                    R"({"type":"record","name":"R","namespace":"a","fields":[]})"));
  EXPECT_TRUE(reads(R"({"type":"record","name":"Other","aliases":["R"],"fields":[]})",
                    R"({"type":"record","name":"R","fields":[]})"));
  auto named = [&](const std::string& t) { return rec(t); };
  EXPECT_FALSE(reads(named(R"({"type":"enum","name":"F","symbols":["A"]})"),
                     named(R"({"type":"enum","name":"E","symbols":["A"]})")));
  EXPECT_TRUE(reads(named(R"({"type":"enum","name":"E","namespace":"b","symbols":["A"]})"),
                    named(R"({"type":"enum","name":"E","namespace":"a","symbols":["A"]})")));
  EXPECT_TRUE(reads(named(R"({"type":"enum","name":"F","aliases":["E"],"symbols":["A"]})"),
                    named(R"({"type":"enum","name":"E","symbols":["A"]})")));
  EXPECT_FALSE(reads(named(R"({"type":"fixed","name":"Y","size":4})"),
                     named(R"({"type":"fixed","name":"X","size":4})")));
}

TEST(AvroResolution, ReaderUnionBranchChoice) {
  auto rec = [](const std::string& type) {
    return R"({"type":"record","name":"R","fields":[{"name":"x","type":)" + type + "}]}";
  };
  const std::string in = R"({"type":"record","name":"In","fields":[{"name":"a","type":"int"}]})";
  const std::string in2 = R"({"type":"record","name":"In2","fields":[{"name":"a","type":"int"}]})";
  // A renamed record in a union: the branch that matches it field by field.
  EXPECT_TRUE(reads(rec(R"(["null",)" + in2 + "]"), rec(R"(["null",)" + in + "]")));
  // No structural match (reader field b has no default): no branch.
  const std::string inB =
      R"({"type":"record","name":"In2","fields":[{"name":"b","type":"string"}]})";
  EXPECT_FALSE(reads(rec(R"(["null",)" + inB + "]"), rec(R"(["null",)" + in + "]")));
  // The branch of the writer's full name is taken even when another would read it.
  const std::string inStr =
      R"({"type":"record","name":"In","fields":[{"name":"a","type":"string"}]})";
  EXPECT_FALSE(reads(rec("[" + in2 + "," + inStr + "]"), rec(in)));
  // An enum in a union needs its full name: a namespace change finds no branch.
  EXPECT_FALSE(
      reads(rec(R"(["null",{"type":"enum","name":"E","namespace":"b","symbols":["A"]}])"),
            rec(R"(["null",{"type":"enum","name":"E","namespace":"a","symbols":["A"]}])")));
  // A promotion reaches a branch when no branch has the writer's type.
  EXPECT_TRUE(reads(rec(R"(["null","double"])"), rec("\"int\"")));
}

TEST(AvroResolution, UnionsEnumsArraysRecursion) {
  auto rec = [](const std::string& type) {
    return R"({"type":"record","name":"R","fields":[{"name":"a","type":)" + type + "}]}";
  };
  EXPECT_TRUE(reads(rec(R"(["null","int"])"), rec("\"int\"")));
  EXPECT_FALSE(reads(rec("\"int\""), rec(R"(["null","int"])")));  // null branch unreadable
  EXPECT_TRUE(reads(rec(R"(["null","long"])"), rec(R"(["null","int"])")));
  std::string e2 = R"({"type":"enum","name":"E","symbols":["A","B"]})";
  std::string e3 = R"({"type":"enum","name":"E","symbols":["A","B","C"]})";
  std::string e2d = R"({"type":"enum","name":"E","symbols":["A","B"],"default":"A"})";
  EXPECT_TRUE(reads(rec(e3), rec(e2)));
  EXPECT_FALSE(reads(rec(e2), rec(e3)));
  EXPECT_TRUE(reads(rec(e2d), rec(e3)));
  EXPECT_TRUE(
      reads(rec(R"({"type":"array","items":"long"})"), rec(R"({"type":"array","items":"int"})")));
  EXPECT_FALSE(
      reads(rec(R"({"type":"map","values":"int"})"), rec(R"({"type":"map","values":"string"})")));
  std::string list = R"({"type":"record","name":"Node","fields":[{"name":"v","type":"int"},)"
                     R"({"name":"next","type":["null","Node"]}]})";
  EXPECT_TRUE(reads(list, list));
}

TEST(AvroResolution, ParseErrors) {
  EXPECT_FALSE(parseAvroSchema("{not json").isOk());
  EXPECT_FALSE(parseAvroSchema(R"({"type":"record","name":"R"})").isOk());  // no fields
  EXPECT_FALSE(parseAvroSchema(R"({"type":"object"})").isOk());  // old JSON-schema format
  EXPECT_FALSE(parseAvroSchema(R"({"type":"record","name":"R","fields":[{"name":"a",)"
                               R"("type":"Missing"}]})")
                   .isOk());
  EXPECT_TRUE(parseAvroSchema(R"("string")").isOk());
}

TEST(AvroResolution, PrettyPrintIsJacksons) {
  EXPECT_EQ(avroPrettyString(*parse(kV1)),
            "{\n  \"type\" : \"record\",\n  \"name\" : \"R\",\n  \"fields\" : [ {\n"
            "    \"name\" : \"a\",\n    \"type\" : \"int\"\n  } ]\n}");
}

Status check(std::vector<std::string> existingLatestFirst, const std::string& next, S s) {
  std::vector<SchemaData> data;
  for (auto& e : existingLatestFirst) data.push_back(avro(e));
  std::vector<const SchemaData*> ptrs;
  for (auto& d : data) ptrs.push_back(&d);
  return checkCompatibility(ptrs, avro(next), s);
}

TEST(SchemaCompatibility, Strategies) {
  EXPECT_TRUE(check({kV1}, kV2NoDefault, S::FORWARD).isOk());
  EXPECT_FALSE(check({kV1}, kV2NoDefault, S::BACKWARD).isOk());
  EXPECT_FALSE(check({kV1}, kV2NoDefault, S::FULL).isOk());
  EXPECT_TRUE(check({kV1}, kV2Default, S::FULL).isOk());
  EXPECT_TRUE(check({kV1}, kV2NoDefault, S::ALWAYS_COMPATIBLE).isOk());
  EXPECT_FALSE(check({kV1}, kV2Default, S::ALWAYS_INCOMPATIBLE).isOk());
  EXPECT_TRUE(check({kV1}, kV1, S::ALWAYS_INCOMPATIBLE).isOk());  // same definition
  EXPECT_TRUE(check({}, kV1, S::ALWAYS_INCOMPATIBLE).isOk());     // nothing stored yet
  // Transitive strategies look past the latest version.
  const char* v3 = R"({"type":"record","name":"R","fields":[{"name":"b","type":"string",)"
                   R"("default":"y"}]})";
  EXPECT_TRUE(check({kV2Default, kV1}, v3, S::BACKWARD).isOk());
  EXPECT_TRUE(check({kV2Default, kV1}, v3, S::BACKWARD_TRANSITIVE).isOk());
  EXPECT_TRUE(check({kV2Default, kV1}, v3, S::FORWARD).isOk() == false);  // a is gone
  EXPECT_FALSE(check({kV1, kV2NoDefault}, kV2NoDefault, S::FULL_TRANSITIVE).isOk());
  EXPECT_TRUE(check({kV1, kV2NoDefault}, kV2NoDefault, S::FULL).isOk() == false);
}

TEST(SchemaCompatibility, PulsarMessages) {
  Status s = check({kV1}, kV2NoDefault, S::FULL);
  EXPECT_EQ(s.code(), StatusCode::kNotAllowed);
  EXPECT_EQ(s.message().rfind("Error during schema compatibility check with strategy FULL: "
                              "org.apache.avro.SchemaValidationException: Unable to read schema: "
                              "\n{\n  \"type\" : \"record\"",
                              0),
            0u)
      << s.message();
  SchemaData a = avro(kV1);
  SchemaData str{SchemaType::STRING, "", {}};
  Status t = checkCompatibility({&a}, str, S::FULL);
  EXPECT_EQ(t.message(), "Incompatible schema: exists schema type AVRO, new schema type STRING");
  EXPECT_TRUE(checkCompatibility({&a}, str, S::ALWAYS_COMPATIBLE).isOk());
  SchemaData str2{SchemaType::STRING, "x", {}};
  EXPECT_TRUE(checkCompatibility({&str}, str2, S::FULL).isOk());
  EXPECT_EQ(checkCompatibility({&str}, str2, S::ALWAYS_INCOMPATIBLE).message(),
            "Schema compatibility strategy is ALWAYS_INCOMPATIBLE");
}

TEST(SchemaCompatibility, NamesAndWireForms) {
  EXPECT_EQ(strategyFromName("FULL_TRANSITIVE"), S::FULL_TRANSITIVE);
  EXPECT_FALSE(strategyFromName("full").has_value());
  EXPECT_EQ(schemaTypeFromProto(21), SchemaType::AUTO_CONSUME);
  EXPECT_EQ(schemaTypeFromProto(4), SchemaType::AVRO);
  EXPECT_EQ(schemaTypeToProto(SchemaType::BYTES), 0);
  EXPECT_STREQ(schemaTypeName(SchemaType::KEY_VALUE), "KEY_VALUE");
  EXPECT_EQ(encodeSchemaVersion(258), std::string("\0\0\0\0\0\0\x01\x02", 8));
  EXPECT_EQ(encodeSchemaVersion(std::nullopt), "");
  EXPECT_EQ(decodeSchemaVersion(std::string("\0\0\0\0\0\0\x01\x02", 8)), 258);
  EXPECT_FALSE(decodeSchemaVersion("abc").has_value());
  auto part = TopicName::parse("persistent://t/ns/x-partition-3");
  ASSERT_TRUE(part.isOk());
  EXPECT_EQ(schemaIdOf(*part), "t/ns/x");
  EXPECT_FALSE(validateSchemaData(SchemaData{SchemaType::AVRO, "{", {}}).isOk());
  // A JSON Schema document is no Avro schema: Pulsar refuses it too.
  EXPECT_FALSE(validateSchemaData(SchemaData{SchemaType::JSON, R"({"type":"object"})", {}}).isOk());
  EXPECT_TRUE(validateSchemaData(SchemaData{SchemaType::STRING, "null", {}}).isOk());
  EXPECT_EQ(validateSchemaData(SchemaData{SchemaType::STRING, "abc", {}}).message(),
            "Invalid schema definition data for string schema : 'abc'");
  EXPECT_FALSE(validateSchemaData(SchemaData{SchemaType::INT32, "x", {}}).isOk());
  EXPECT_TRUE(validateSchemaData(SchemaData{SchemaType::INT32, "", {}}).isOk());
}

// The registry's asynchronous calls, waited for here (the test thread is no executor).
Result<int64_t> waitFor(const std::function<void(SchemaRegistry::VersionCallback)>& call) {
  auto p = std::make_shared<std::promise<Result<int64_t>>>();
  std::future<Result<int64_t>> f = p->get_future();
  call([p](const Result<int64_t>& r) { p->set_value(r); });
  return blockingGet(f, "schema registry test");
}

Status attach(SchemaRegistry& reg, metadata::Store* store, net::Executor* loop) {
  auto p = std::make_shared<std::promise<Status>>();
  std::future<Status> f = p->get_future();
  reg.attach(store, loop, [p](const Status& s) { p->set_value(s); });
  return blockingGet(f, "schema registry test");
}

TEST(SchemaRegistry, VersionsDeletesAndPersistence) {
  auto backend = metadata::LocalBackend::create();
  auto session = backend->openSession();
  SchemaRegistry reg;
  SchemaRegistry again;
  net::EventLoop loop("test-metadata");  // stopped before the registries go
  loop.start();
  ASSERT_TRUE(attach(reg, session.get(), &loop).isOk());
  auto put = [&](SchemaRegistry& r, const SchemaData& d) {
    return waitFor([&](auto cb) { r.putSchemaIfAbsent("t/ns/x", d, S::FULL, &loop, cb); });
  };
  EXPECT_FALSE(reg.getSchema("t/ns/x").has_value());
  SchemaData v1 = avro(kV1);
  v1.properties["k"] = "v,=%\n";
  EXPECT_EQ(*put(reg, v1), 0);
  // The same definition with other whitespace is the same version.
  EXPECT_EQ(*put(reg, avro(R"({"type": "record", "name": "R",
      "fields": [{"name": "a", "type": "int"}]})")),
            0);
  auto refused = put(reg, avro(kV2NoDefault));
  EXPECT_EQ(refused.status().code(), StatusCode::kNotAllowed);
  EXPECT_EQ(*put(reg, avro(kV2Default)), 1);
  EXPECT_EQ(reg.findSchemaVersion("t/ns/x", avro(kV1)), 0);
  EXPECT_EQ(reg.findSchemaVersion("t/ns/x", avro(kV2NoDefault)), -1);
  EXPECT_EQ(reg.getSchema("t/ns/x")->version, 1);
  EXPECT_EQ(reg.getSchema("t/ns/x", 0)->schema.properties.at("k"), "v,=%\n");

  // Another broker (session) sees the same versions.
  auto otherSession = backend->openSession();
  ASSERT_TRUE(attach(again, otherSession.get(), &loop).isOk());
  ASSERT_EQ(again.getAllSchemas("t/ns/x").size(), 2u);
  EXPECT_EQ(again.getSchema("t/ns/x", 0)->schema.properties.at("k"), "v,=%\n");
  EXPECT_EQ(again.getSchema("t/ns/x", 1)->schema.data, kV2Default);

  // Delete: a tombstone version; older versions are gone; the next one continues the count.
  EXPECT_EQ(*waitFor([&](auto cb) { reg.deleteSchema("t/ns/x", false, &loop, cb); }), 2);
  EXPECT_FALSE(reg.getSchema("t/ns/x").has_value());
  EXPECT_FALSE(reg.getSchema("t/ns/x", 0).has_value());
  EXPECT_TRUE(reg.getAllSchemas("t/ns/x").empty());
  SchemaData str{SchemaType::STRING, "", {}};
  // Written through the other registry: it reads the tombstone from the store, not memory.
  EXPECT_EQ(*put(again, str), 3);
  EXPECT_EQ(reg.checkConsumerCompatibility("t/ns/y", str, S::FULL).code(), StatusCode::kNotFound);
  for (int i = 0; i < 500 && !reg.hasSchema("t/ns/x"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // the change reaches reg
  }
  EXPECT_TRUE(reg.checkConsumerCompatibility("t/ns/x", str, S::FULL).isOk());
  // Force delete forgets the record.
  EXPECT_EQ(*waitFor([&](auto cb) { reg.deleteSchema("t/ns/x", true, &loop, cb); }), 4);
  EXPECT_FALSE(reg.hasSchema("t/ns/x"));
  reg.detach();
  again.detach();
  loop.stop();
}

TEST(SchemaRegistry, InMemoryWithoutAStore) {
  net::EventLoop loop("test-metadata");
  loop.start();
  SchemaRegistry reg;
  SchemaData str{SchemaType::STRING, "", {}};
  EXPECT_EQ(*waitFor([&](auto cb) { reg.putSchemaIfAbsent("a/b/c", str, S::FULL, &loop, cb); }), 0);
  EXPECT_EQ(*waitFor([&](auto cb) { reg.deleteSchema("a/b/c", true, &loop, cb); }), 1);
  EXPECT_FALSE(reg.hasSchema("a/b/c"));
  loop.stop();
}

TEST(SchemaRegistry, RecordCodec) {
  StoredSchema a;
  a.version = 0;
  a.schema = SchemaData{SchemaType::PROTOBUF_NATIVE, std::string("\x00\x01,\xff\n", 5), {}};
  a.timestampMs = 17;
  StoredSchema d;
  d.version = 1;
  d.deleted = true;
  d.timestampMs = 18;
  std::string text = encodeSchemaRecord({a, d});
  EXPECT_EQ(text, "schema=0,PROTOBUF_NATIVE,17,%00%01%2C%FF%0A\ndeleted=1,18\n");
  auto back = decodeSchemaRecord(text + "bogus line\nschema=x,AVRO,1,\n");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].schema.data, a.schema.data);
  EXPECT_EQ(back[0].schema.type, SchemaType::PROTOBUF_NATIVE);
  EXPECT_TRUE(back[1].deleted);
}

}  // namespace
}  // namespace magnetar::broker

namespace magnetar::broker {
namespace {

// Pulsar's StructSchemaDataValidator with its CompatibleNameValidator, and no top-level union.
TEST(SchemaDataValidator, AvroNamesAndUnions) {
  auto avro = [](const std::string& text) {
    return validateSchemaData(SchemaData{SchemaType::AVRO, text, {}});
  };
  auto record = [](const std::string& name, const std::string& field) {
    return R"({"type":"record","name":")" + name + R"(","fields":[{"name":")" + field +
           R"(","type":"int"}]})";
  };
  EXPECT_TRUE(avro(record("R", "a")).isOk());
  EXPECT_TRUE(avro(record("_R$x", "$a1")).isOk());
  EXPECT_TRUE(avro(record("a.b.R", "a")).isOk());
  EXPECT_EQ(avro(record("1R", "a")).message(), "Invalid schema definition data for AVRO schema");
  EXPECT_FALSE(avro(record("R-x", "a")).isOk());
  EXPECT_FALSE(avro(record("a.1b.R", "a")).isOk());
  EXPECT_FALSE(avro(record("R", "a-b")).isOk());
  EXPECT_FALSE(avro(R"({"type":"record","name":"R","namespace":"x..y","fields":[]})").isOk());
  EXPECT_FALSE(avro(R"({"type":"record","name":"R","fields":[{"name":"e","type":
      {"type":"enum","name":"E","symbols":["A","1B"]}}]})")
                   .isOk());
  EXPECT_FALSE(avro(R"({"type":"record","name":"R","fields":[{"name":"l","type":
      {"type":"array","items":{"type":"record","name":"In-x","fields":[]}}}]})")
                   .isOk());
  EXPECT_FALSE(avro(R"({"type":["null","string"]})").isOk());
  EXPECT_EQ(avro(R"(["null","string"])").message(), "Avro schema typed [UNION] is not supported");
  EXPECT_TRUE(avro(R"("string")").isOk());
  // JSON and PROTOBUF use the same validator; a top-level union is refused for AVRO only.
  EXPECT_FALSE(validateSchemaData(SchemaData{SchemaType::JSON, record("1R", "a"), {}}).isOk());
  EXPECT_TRUE(validateSchemaData(SchemaData{SchemaType::JSON, R"(["null","string"])", {}}).isOk());
}

TEST(SchemaDataValidator, KeyValueParts) {
  std::string data = encodeKeyValueSchemaData(R"({"type":"record","name":"K","fields":[]})", "");
  auto parts = decodeKeyValueSchemaData(data);
  ASSERT_TRUE(parts.has_value());
  EXPECT_EQ(parts->second, "");
  EXPECT_FALSE(decodeKeyValueSchemaData(data.substr(0, data.size() - 1)).has_value());
  std::map<std::string, std::string> props{{"key.schema.type", "AVRO"},
                                           {"value.schema.type", "STRING"}};
  SchemaData kv{SchemaType::KEY_VALUE, data, props};
  EXPECT_TRUE(validateSchemaData(kv).isOk());
  EXPECT_EQ(keyValueDataToJson(kv),
            R"({"key":{"type":"record","name":"K","fields":[]},"value":""})");
  // Each part is validated as its type; without type properties both are BYTES (not checked).
  kv.data = encodeKeyValueSchemaData(R"({"type":"record","name":"1K","fields":[]})", "");
  EXPECT_EQ(validateSchemaData(kv).message(), "Invalid schema definition data for AVRO schema");
  kv.properties.clear();
  EXPECT_TRUE(validateSchemaData(kv).isOk());
  kv.properties["key.schema.type"] = "nonsense";
  EXPECT_EQ(validateSchemaData(kv).code(), StatusCode::kInternal);
  EXPECT_FALSE(validateSchemaData(SchemaData{SchemaType::KEY_VALUE, "abc", {}}).isOk());
  // The REST form.
  auto stored = keyValueDataFromJson(R"({"key": {"type": "string"}, "value": 1})");
  ASSERT_TRUE(stored.isOk());
  EXPECT_EQ(*stored, encodeKeyValueSchemaData(R"({"type":"string"})", "1"));
  EXPECT_FALSE(keyValueDataFromJson("garbage").isOk());
  EXPECT_FALSE(keyValueDataFromJson(R"({"key":{}})").isOk());
  // Client-side part types are refused as Pulsar's SchemaDataValidator refuses them (422).
  kv.data = encodeKeyValueSchemaData("", "");
  for (const char* t : {"AUTO", "AUTO_PUBLISH", "AUTO_CONSUME"}) {
    kv.properties = {{"key.schema.type", "STRING"}, {"value.schema.type", t}};
    Status st = validateSchemaData(kv);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << t;
    EXPECT_EQ(st.message(), std::string("Schema ") + t + " is a client-side schema type");
  }
  kv.properties = {{"key.schema.type", "EXTERNAL"}, {"value.schema.type", "STRING"}};
  EXPECT_TRUE(validateSchemaData(kv).isOk());
}

TEST(SchemaCompatibility, KeyValueChecksEachPartByItsType) {
  using S = SchemaCompatibilityStrategy;
  std::map<std::string, std::string> avroBoth{{"key.schema.type", "AVRO"},
                                              {"value.schema.type", "AVRO"}};
  auto kv = [&](const std::string& key, const std::string& value,
                std::map<std::string, std::string> props) {
    return SchemaData{SchemaType::KEY_VALUE, encodeKeyValueSchemaData(key, value),
                      std::move(props)};
  };
  SchemaData v1 = kv(kV1, kV1, avroBoth);
  SchemaData newFieldNoDefault = kv(kV1, kV2NoDefault, avroBoth);
  SchemaData newFieldDefault = kv(kV1, kV2Default, avroBoth);
  EXPECT_EQ(checkCompatibility({&v1}, newFieldNoDefault, S::FULL).code(), StatusCode::kNotAllowed);
  EXPECT_TRUE(checkCompatibility({&v1}, newFieldNoDefault, S::FORWARD).isOk());
  EXPECT_TRUE(checkCompatibility({&v1}, newFieldDefault, S::FULL).isOk());
  EXPECT_TRUE(checkCompatibility({&v1}, newFieldNoDefault, S::ALWAYS_COMPATIBLE).isOk());
  // A part's type may not change.
  SchemaData bytesKey = kv("", kV1, {{"key.schema.type", "BYTES"}, {"value.schema.type", "AVRO"}});
  Status st = checkCompatibility({&v1}, bytesKey, S::FULL);
  EXPECT_EQ(st.message(),
            "Key schemas or Value schemas are different schema type, from key schema type is "
            "AVRO and to key schema is BYTES, from value schema is AVRO and to value schema is "
            "AVRO");
  // ALWAYS_INCOMPATIBLE: the key part alone, identical, is refused already (Pulsar's
  // NeverSchemaValidator on the key).
  EXPECT_FALSE(checkCompatibility({&v1}, newFieldDefault, S::ALWAYS_INCOMPATIBLE).isOk());
  // Transitive: every live version's parts (latest first).
  EXPECT_TRUE(checkCompatibility({&newFieldDefault, &v1}, newFieldNoDefault, S::BACKWARD).isOk());
  EXPECT_FALSE(
      checkCompatibility({&newFieldDefault, &v1}, newFieldNoDefault, S::BACKWARD_TRANSITIVE)
          .isOk());
}

// {"fileDescriptorSet": base64, "rootMessageTypeName", "rootFileDescriptorName"}.
std::string protobufNative(const google::protobuf::FileDescriptorSet& set, const std::string& root,
                           const std::string& rootFile) {
  return R"({"fileDescriptorSet":")" + base64Encode(set.SerializeAsString()) +
         R"(","rootMessageTypeName":")" + root + R"(","rootFileDescriptorName":")" + rootFile +
         R"("})";
}

TEST(SchemaDataValidator, ProtobufNativeDescriptors) {
  google::protobuf::FileDescriptorSet set;
  auto* dep = set.add_file();
  dep->set_name("dep.proto");
  dep->set_package("pkg");
  dep->add_message_type()->set_name("Inner");
  auto* file = set.add_file();
  file->set_name("m.proto");
  file->set_package("pkg");
  file->add_dependency("dep.proto");
  auto* msg = file->add_message_type();
  msg->set_name("Msg");
  auto* field = msg->add_field();
  field->set_name("inner");
  field->set_number(1);
  field->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  field->set_type(google::protobuf::FieldDescriptorProto::TYPE_MESSAGE);
  field->set_type_name(".pkg.Inner");
  auto check = [](const std::string& text) {
    return validateSchemaData(SchemaData{SchemaType::PROTOBUF_NATIVE, text, {}});
  };
  EXPECT_TRUE(check(protobufNative(set, "pkg.Msg", "m.proto")).isOk());
  EXPECT_EQ(check(protobufNative(set, "pkg.Nope", "m.proto")).message(),
            "protobuf root message descriptor is null, please recheck rootMessageTypeName or "
            "rootFileDescriptorName conf. ");
  EXPECT_FALSE(check(protobufNative(set, "pkg.Inner", "m.proto")).isOk());  // not in the root file
  EXPECT_EQ(check(protobufNative(set, "pkg.Msg", "x.proto")).message(),
            "deserialize ProtobufNative Schema failed");
  google::protobuf::FileDescriptorSet missingDep;
  *missingDep.add_file() = *file;
  EXPECT_FALSE(check(protobufNative(missingDep, "pkg.Msg", "m.proto")).isOk());
  EXPECT_FALSE(check("garbage").isOk());
  EXPECT_FALSE(check("").isOk());
  EXPECT_FALSE(check(R"({"fileDescriptorSet":"!!!!","rootMessageTypeName":"a",)"
                     R"("rootFileDescriptorName":"b"})")
                   .isOk());
}

TEST(SchemaCompatibility, ProtobufNativeKeepsTheRootMessage) {
  google::protobuf::FileDescriptorSet set;
  auto* file = set.add_file();
  file->set_name("m.proto");
  file->set_package("pkg");
  file->add_message_type()->set_name("Msg");
  file->add_message_type()->set_name("Other");
  SchemaData v1{SchemaType::PROTOBUF_NATIVE, protobufNative(set, "pkg.Msg", "m.proto"), {}};
  auto* field = file->mutable_message_type(0)->add_field();
  field->set_name("a");
  field->set_number(1);
  field->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  field->set_type(google::protobuf::FieldDescriptorProto::TYPE_INT32);
  SchemaData newField{SchemaType::PROTOBUF_NATIVE, protobufNative(set, "pkg.Msg", "m.proto"), {}};
  SchemaData otherRoot{
      SchemaType::PROTOBUF_NATIVE, protobufNative(set, "pkg.Other", "m.proto"), {}};
  // Fields are not compared (Pulsar's ProtobufNativeSchemaCompatibilityCheck).
  EXPECT_TRUE(checkCompatibility({&v1}, newField, S::FULL).isOk());
  EXPECT_EQ(checkCompatibility({&v1}, otherRoot, S::BACKWARD).message(),
            "Protobuf root message change is not allowed under the 'BACKWARD' strategy. Original "
            "message name: 'pkg.Msg', new message name: 'pkg.Other'.");
  EXPECT_TRUE(checkCompatibility({&v1}, otherRoot, S::ALWAYS_COMPATIBLE).isOk());
  // Transitive strategies look at every version, the others at the latest only.
  EXPECT_TRUE(checkCompatibility({&otherRoot, &v1}, otherRoot, S::FULL).isOk());
  EXPECT_FALSE(checkCompatibility({&otherRoot, &v1}, otherRoot, S::FULL_TRANSITIVE).isOk());
  EXPECT_EQ(checkCompatibility({&v1}, newField, S::ALWAYS_INCOMPATIBLE).message(),
            "Unknown SchemaCompatibilityStrategy.");
  // PROTOBUF has no checker of its own: an Avro-incompatible change is accepted.
  SchemaData pb1{SchemaType::PROTOBUF, R"({"type":"record","name":"R","fields":[]})", {}};
  SchemaData pb2{SchemaType::PROTOBUF,
                 R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"}]})",
                 {}};
  EXPECT_TRUE(checkCompatibility({&pb1}, pb2, S::FULL).isOk());
}

TEST(JavaJson, DoubleToStringAsJava17) {
  // Values printed by OpenJDK 17's Double.toString.
  EXPECT_EQ(javaDoubleToString(1.0), "1.0");
  EXPECT_EQ(javaDoubleToString(100.0), "100.0");
  EXPECT_EQ(javaDoubleToString(1.5e10), "1.5E10");
  EXPECT_EQ(javaDoubleToString(0.1), "0.1");
  EXPECT_EQ(javaDoubleToString(-0.0), "-0.0");
  EXPECT_EQ(javaDoubleToString(1e-7), "1.0E-7");
  EXPECT_EQ(javaDoubleToString(0.001), "0.001");
  EXPECT_EQ(javaDoubleToString(0.0001), "1.0E-4");
  EXPECT_EQ(javaDoubleToString(9999999.0), "9999999.0");
  EXPECT_EQ(javaDoubleToString(1e7), "1.0E7");
  EXPECT_EQ(javaDoubleToString(123456789.125), "1.23456789125E8");
  EXPECT_EQ(javaDoubleToString(1e300), "1.0E300");
  EXPECT_EQ(javaDoubleToString(-4.446421636188976E-28), "-4.446421636188976E-28");
  // Integer-valued doubles below 2^63 come from the exact value, not the shortest digits.
  EXPECT_EQ(javaDoubleToString(4.633992710283451E17), "4.6339927102834509E17");
  EXPECT_EQ(javaDoubleToString(1.328425050680555E18), "1.32842505068055501E18");
}

TEST(JavaJson, JacksonAndGsonText) {
  const std::string text =
      R"( {"d":[1e2, 2.50, -0, 12345678901234567890123], "s":"\u00e9/\/\u2028\u001f\n",)"
      R"( "d":1, "e":{}, "t":[true,false,null]} trailing)";
  EXPECT_EQ(*rewriteJsonAsJava(text, JavaJsonStyle::kJackson),
            "{\"d\":1,\"s\":\"\xc3\xa9//\xe2\x80\xa8\\u001F\\n\",\"e\":{},"
            "\"t\":[true,false,null]}");
  EXPECT_EQ(
      *rewriteJsonAsJava(R"([1e2,2.50,-0,12345678901234567890123,1e400])", JavaJsonStyle::kJackson),
      R"([100.0,2.5,0,12345678901234567890123,"Infinity"])");
  EXPECT_EQ(*rewriteJsonAsJava(R"([1e2,2.50,-0,"\u2028\u001f\ud800"])", JavaJsonStyle::kGson),
            R"([1e2,2.50,-0,"\u2028\u001f?"])");
  EXPECT_FALSE(rewriteJsonAsJava("{\"a\":01}", JavaJsonStyle::kGson).isOk());
  EXPECT_FALSE(rewriteJsonAsJava("[1,]", JavaJsonStyle::kGson).isOk());
  EXPECT_FALSE(rewriteJsonAsJava("", JavaJsonStyle::kGson).isOk());
  // The admin REST form keeps the parts' numbers; a part "" is stored empty.
  EXPECT_EQ(*keyValueDataFromJson(R"({"key": "", "value": {"default": 1e2}})"),
            encodeKeyValueSchemaData("", R"({"default":1e2})"));
}

}  // namespace
}  // namespace magnetar::broker
