#include "broker/schema_registry.h"

#include <gtest/gtest.h>

#include "broker/schema_compatibility.h"
#include "storage/metadata_store.h"

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
  // Record names must match unless the reader has the writer's name as an alias.
  EXPECT_FALSE(reads(R"({"type":"record","name":"Other","fields":[]})",
                     R"({"type":"record","name":"R","fields":[]})"));
  EXPECT_TRUE(reads(R"({"type":"record","name":"Other","aliases":["R"],"fields":[]})",
                    R"({"type":"record","name":"R","fields":[]})"));
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
  EXPECT_TRUE(validateSchemaData(SchemaData{SchemaType::JSON, R"({"type":"object"})", {}}).isOk());
  EXPECT_TRUE(validateSchemaData(SchemaData{SchemaType::STRING, "null", {}}).isOk());
  EXPECT_EQ(validateSchemaData(SchemaData{SchemaType::STRING, "abc", {}}).message(),
            "Invalid schema definition data for string schema : 'abc'");
  EXPECT_FALSE(validateSchemaData(SchemaData{SchemaType::INT32, "x", {}}).isOk());
  EXPECT_TRUE(validateSchemaData(SchemaData{SchemaType::INT32, "", {}}).isOk());
}

TEST(SchemaRegistry, VersionsDeletesAndPersistence) {
  storage::MemoryMetadataStore store;
  SchemaRegistry reg;
  ASSERT_TRUE(reg.attachStore(&store).isOk());
  EXPECT_FALSE(reg.getSchema("t/ns/x").has_value());
  SchemaData v1 = avro(kV1);
  v1.properties["k"] = "v,=%\n";
  EXPECT_EQ(*reg.putSchemaIfAbsent("t/ns/x", v1, S::FULL), 0);
  // The same definition with other whitespace is the same version.
  EXPECT_EQ(*reg.putSchemaIfAbsent("t/ns/x", avro(R"({"type": "record", "name": "R",
      "fields": [{"name": "a", "type": "int"}]})"),
                                   S::FULL),
            0);
  auto refused = reg.putSchemaIfAbsent("t/ns/x", avro(kV2NoDefault), S::FULL);
  EXPECT_EQ(refused.status().code(), StatusCode::kNotAllowed);
  EXPECT_EQ(*reg.putSchemaIfAbsent("t/ns/x", avro(kV2Default), S::FULL), 1);
  EXPECT_EQ(reg.findSchemaVersion("t/ns/x", avro(kV1)), 0);
  EXPECT_EQ(reg.findSchemaVersion("t/ns/x", avro(kV2NoDefault)), -1);
  EXPECT_EQ(reg.getSchema("t/ns/x")->version, 1);
  EXPECT_EQ(reg.getSchema("t/ns/x", 0)->schema.properties.at("k"), "v,=%\n");

  // A restart sees the same versions.
  SchemaRegistry again;
  ASSERT_TRUE(again.attachStore(&store).isOk());
  ASSERT_EQ(again.getAllSchemas("t/ns/x").size(), 2u);
  EXPECT_EQ(again.getSchema("t/ns/x", 0)->schema.properties.at("k"), "v,=%\n");
  EXPECT_EQ(again.getSchema("t/ns/x", 1)->schema.data, kV2Default);

  // Delete: a tombstone version; older versions are gone; the next one continues the count.
  EXPECT_EQ(*reg.deleteSchema("t/ns/x", false), 2);
  EXPECT_FALSE(reg.getSchema("t/ns/x").has_value());
  EXPECT_FALSE(reg.getSchema("t/ns/x", 0).has_value());
  EXPECT_TRUE(reg.getAllSchemas("t/ns/x").empty());
  SchemaData str{SchemaType::STRING, "", {}};
  EXPECT_EQ(*reg.putSchemaIfAbsent("t/ns/x", str, S::FULL), 3);
  EXPECT_EQ(reg.checkConsumerCompatibility("t/ns/y", str, S::FULL).code(), StatusCode::kNotFound);
  EXPECT_TRUE(reg.checkConsumerCompatibility("t/ns/x", str, S::FULL).isOk());
  // Force delete forgets the record.
  EXPECT_TRUE(reg.deleteSchema("t/ns/x", true).isOk());
  EXPECT_FALSE(store.get("/admin/magnetar/schemas/t%2Fns%2Fx").isOk());
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
