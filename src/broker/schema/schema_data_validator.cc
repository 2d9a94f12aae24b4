#include "broker/schema/schema_data_validator.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>

#include <boost/json.hpp>
#include <map>
#include <set>

#include "broker/common/base64.h"
#include "broker/schema/internal/java_json.h"
#include "broker/schema/schema_compatibility.h"
#include "protocol/byte_order.h"

namespace magnetar::broker {

namespace json = boost::json;

namespace {

constexpr char kKeyTypeProperty[] = "key.schema.type";
constexpr char kValueTypeProperty[] = "value.schema.type";

bool nameStart(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c >= 0x80;
}
bool namePart(unsigned char c) { return nameStart(c) || (c >= '0' && c <= '9'); }

bool validName(std::string_view n) {
  if (n.empty() || !nameStart(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n.substr(1)) {
    if (!namePart(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A dotted name (namespace or full name): every component valid; "" is no namespace.
bool validDotted(std::string_view n) {
  if (n.empty()) return true;
  size_t start = 0;
  while (true) {
    size_t dot = n.find('.', start);
    if (!validName(n.substr(start, dot == std::string_view::npos ? n.npos : dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

const json::string* stringMember(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v ? v->if_string() : nullptr;
}

// The first bad name in a schema node, or nullopt.
std::optional<std::string> badName(const json::value& node) {
  if (const json::array* union_ = node.if_array()) {
    for (const auto& branch : *union_) {
      if (auto bad = badName(branch)) return bad;
    }
    return std::nullopt;
  }
  const json::object* o = node.if_object();
  if (!o) return std::nullopt;  // a type name
  const json::string* type = stringMember(*o, "type");
  // Avro reads a schema object's "type" as text only.
  if (!type) return o->contains("type") ? std::optional<std::string>("type") : std::nullopt;
  const bool named = *type == "record" || *type == "error" || *type == "enum" || *type == "fixed";
  if (named) {
    const json::string* name = stringMember(*o, "name");
    if (name) {
      std::string_view n(*name);
      auto dot = n.rfind('.');
      if (!validName(dot == n.npos ? n : n.substr(dot + 1)) ||
          (dot != n.npos && !validDotted(n.substr(0, dot)))) {
        return std::string(n);
      }
    }
    if (const json::string* ns = stringMember(*o, "namespace"); ns && !validDotted(*ns)) {
      return std::string(*ns);
    }
  }
  if (*type == "enum") {
    if (const json::value* symbols = o->if_contains("symbols"); symbols && symbols->is_array()) {
      for (const auto& s : symbols->as_array()) {
        if (s.is_string() && !validName(s.as_string())) return std::string(s.as_string());
      }
    }
  }
  if (*type == "record" || *type == "error") {
    if (const json::value* fields = o->if_contains("fields"); fields && fields->is_array()) {
      for (const auto& f : fields->as_array()) {
        const json::object* fo = f.if_object();
        if (!fo) continue;
        if (const json::string* fname = stringMember(*fo, "name"); fname && !validName(*fname)) {
          return std::string(*fname);
        }
        if (const json::value* ft = fo->if_contains("type")) {
          if (auto bad = badName(*ft)) return bad;
        }
      }
    }
  }
  for (const char* child : {"items", "values"}) {
    if (const json::value* c = o->if_contains(child)) {
      if (auto bad = badName(*c)) return bad;
    }
  }
  return std::nullopt;
}

std::optional<SchemaType> partType(const SchemaData& s, const char* property) {
  auto it = s.properties.find(property);
  if (it == s.properties.end()) return SchemaType::BYTES;
  return schemaTypeFromName(it->second);
}

bool isPrimitive(SchemaType t) {
  switch (t) {
    case SchemaType::AVRO:
    case SchemaType::JSON:
    case SchemaType::PROTOBUF:
    case SchemaType::PROTOBUF_NATIVE:
    case SchemaType::KEY_VALUE:
    case SchemaType::AUTO_CONSUME:
      return false;
    default:
      return true;
  }
}

class SilentErrors : public google::protobuf::DescriptorPool::ErrorCollector {
 public:
  void AddError(const std::string&, const std::string&, const google::protobuf::Message*,
                ErrorLocation, const std::string&) override {}
};

// Builds `name` after its dependencies (Pulsar's deserializeFileDescriptor); false on any error.
bool buildFile(const std::string& name,
               const std::map<std::string, const google::protobuf::FileDescriptorProto*>& files,
               std::set<std::string>* building, google::protobuf::DescriptorPool* pool) {
  if (pool->FindFileByName(name)) return true;
  auto it = files.find(name);
  if (it == files.end() || !building->insert(name).second) return false;
  for (const auto& dep : it->second->dependency()) {
    if (!buildFile(dep, files, building, pool)) return false;
  }
  SilentErrors errors;
  return pool->BuildFileCollectingErrors(*it->second, &errors) != nullptr;
}

}  // namespace

Status validateAvroNames(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) return Status::invalidArgument("not JSON: " + ec.message());
  if (auto bad = badName(v)) return Status::invalidArgument("Illegal name: " + *bad);
  return Status::ok();
}

std::string encodeKeyValueSchemaData(std::string_view key, std::string_view value) {
  std::string out;
  out.reserve(8 + key.size() + value.size());
  for (std::string_view part : {key, value}) {
    uint8_t size[4];
    protocol::wire::writeBE32(size, static_cast<uint32_t>(part.size()));
    out.append(reinterpret_cast<const char*>(size), 4);
    out.append(part);
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> decodeKeyValueSchemaData(std::string_view data) {
  std::string parts[2];
  for (auto& part : parts) {
    if (data.size() < 4) return std::nullopt;
    uint32_t n = protocol::wire::readBE32(reinterpret_cast<const uint8_t*>(data.data()));
    data.remove_prefix(4);
    if (n > data.size()) return std::nullopt;
    part = std::string(data.substr(0, n));
    data.remove_prefix(n);
  }
  return std::make_pair(std::move(parts[0]), std::move(parts[1]));
}

std::pair<std::string, std::string> keyValuePartTypeNames(const SchemaData& s) {
  auto name = [&](const char* property) {
    auto it = s.properties.find(property);
    return it == s.properties.end() ? std::string("BYTES") : it->second;
  };
  return {name(kKeyTypeProperty), name(kValueTypeProperty)};
}

Status validateKeyValueSchemaData(const SchemaData& s) {
  auto parts = decodeKeyValueSchemaData(s.data);
  if (!parts) return Status::invalidArgument("Invalid schema definition data for KEY_VALUE schema");
  // Types of Pulsar's SchemaType that Magnetar's has not: AUTO and AUTO_PUBLISH are client-side
  // (refused as AUTO_CONSUME is, 422), EXTERNAL is not looked into (Pulsar's SchemaDataValidator).
  auto [keyName, valueName] = keyValuePartTypeNames(s);
  for (const std::string* name : {&keyName, &valueName}) {
    if (*name == "AUTO" || *name == "AUTO_PUBLISH") {
      return Status::invalidArgument("Schema " + *name + " is a client-side schema type");
    }
  }
  if (keyName == "EXTERNAL" || valueName == "EXTERNAL") {
    auto other = schemaTypeFromName(keyName == "EXTERNAL" ? valueName : keyName);
    if (keyName == valueName) return Status::ok();
    if (!other)
      return Status::internal("Invalid key/value schema type in the KEY_VALUE properties");
    return validateSchemaData(
        SchemaData{*other, keyName == "EXTERNAL" ? parts->second : parts->first, {}});
  }
  auto keyType = partType(s, kKeyTypeProperty);
  auto valueType = partType(s, kValueTypeProperty);
  if (!keyType || !valueType) {
    // Pulsar fails with an unexpected error (no such SchemaType constant).
    return Status::internal("Invalid key/value schema type in the KEY_VALUE properties");
  }
  if (Status k = validateSchemaData(SchemaData{*keyType, parts->first, {}}); !k) return k;
  return validateSchemaData(SchemaData{*valueType, parts->second, {}});
}

Result<std::string> keyValueDataFromJson(std::string_view text) {
  auto members = rewriteJsonObjectMembersAsJava(text, JavaJsonStyle::kGson);
  const std::string* key = nullptr;
  const std::string* value = nullptr;
  if (members.isOk()) {
    for (const auto& [name, v] : *members) {
      if (name == "key") key = &v;
      if (name == "value") value = &v;
    }
  }
  if (!key || !value) {
    return Status::invalidArgument(
        "KEY_VALUE schema data must be a JSON object with \"key\" and \"value\"");
  }
  // Pulsar's getKeyOrValueSchemaBytes: a part written "" is stored empty (a primitive type).
  auto bytes = [](const std::string& part) { return part == "\"\"" ? std::string() : part; };
  return encodeKeyValueSchemaData(bytes(*key), bytes(*value));
}

std::string keyValueDataToJson(const SchemaData& s) {
  auto parts = decodeKeyValueSchemaData(s.data);
  auto keyType = partType(s, kKeyTypeProperty);
  auto valueType = partType(s, kValueTypeProperty);
  if (!parts || !keyType || !valueType) return s.data;
  auto render = [](SchemaType t, const std::string& data) -> std::string {
    if (isPrimitive(t)) return "\"\"";
    auto text = rewriteJsonAsJava(data, JavaJsonStyle::kJackson);
    return text.isOk() ? *text : json::serialize(json::string(data));
  };
  return "{\"key\":" + render(*keyType, parts->first) +
         ",\"value\":" + render(*valueType, parts->second) + "}";
}

Result<std::string> protobufNativeRootMessageName(std::string_view text) {
  auto failed = [] { return Status::invalidArgument("deserialize ProtobufNative Schema failed"); };
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  const json::object* o = ec ? nullptr : v.if_object();
  const json::string* set = o ? stringMember(*o, "fileDescriptorSet") : nullptr;
  const json::string* root = o ? stringMember(*o, "rootMessageTypeName") : nullptr;
  const json::string* rootFile = o ? stringMember(*o, "rootFileDescriptorName") : nullptr;
  if (!set || !root || !rootFile) return failed();
  auto bytes = base64Decode(std::string(*set));
  google::protobuf::FileDescriptorSet fds;
  if (!bytes || !fds.ParseFromString(*bytes)) return failed();
  std::map<std::string, const google::protobuf::FileDescriptorProto*> files;
  for (const auto& f : fds.file()) files[f.name()] = &f;
  google::protobuf::DescriptorPool pool;
  std::set<std::string> building;
  if (!buildFile(std::string(*rootFile), files, &building, &pool)) return failed();
  const google::protobuf::Descriptor* d = pool.FindMessageTypeByName(std::string(*root));
  if (!d || d->file()->name() != std::string_view(*rootFile)) {
    return Status::invalidArgument(
        "protobuf root message descriptor is null, please recheck rootMessageTypeName or "
        "rootFileDescriptorName conf. ");
  }
  return d->full_name();
}

Status validateProtobufNativeSchema(std::string_view text) {
  return protobufNativeRootMessageName(text).status();
}

}  // namespace magnetar::broker
