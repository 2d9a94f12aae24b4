#include "broker/schema/schema_registry.h"

#include <fmt/format.h>

#include <cstring>

#include "base/logging.h"
#include "broker/common/wall_clock.h"
#include "storage/path_component.h"

namespace magnetar::broker {

namespace {

constexpr const char* kSchemasPrefix = "/admin/magnetar/schemas/";

// Field escaping of the record: '%', ',', '=', and every byte outside printable ASCII as %XX, so
// binary definitions (PROTOBUF_NATIVE descriptors) stay one text field.
std::string escapeField(const std::string& v) {
  std::string out;
  for (char c : v) {
    auto u = static_cast<unsigned char>(c);
    if (c == '%' || c == ',' || c == '=' || u < 0x20 || u >= 0x7f) {
      out += fmt::format("%{:02X}", u);
    } else {
      out += c;
    }
  }
  return out;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string unescapeField(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    int hi = v[i] == '%' && i + 2 < v.size() ? hexDigit(v[i + 1]) : -1;
    int lo = hi >= 0 ? hexDigit(v[i + 2]) : -1;
    if (lo >= 0) {
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += v[i];
    }
  }
  return out;
}

std::vector<std::string> splitFields(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    size_t len = comma == text.npos ? text.npos : comma - start;
    out.push_back(unescapeField(text.substr(start, len)));
    if (comma == text.npos) break;
    start = comma + 1;
  }
  return out;
}

std::optional<int64_t> toInt(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t start = s[0] == '-' ? 1 : 0;
  if (start == s.size() || s.size() > 19 || s.find_first_not_of("0123456789", start) != s.npos) {
    return std::nullopt;
  }
  return std::stoll(s);
}

}  // namespace

std::string encodeSchemaVersion(std::optional<int64_t> version) {
  if (!version) return {};
  std::string out(8, '\0');
  auto v = static_cast<uint64_t>(*version);
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<char>(v & 0xff);
  return out;
}

std::optional<int64_t> decodeSchemaVersion(const std::string& bytes) {
  if (bytes.size() != 8) return std::nullopt;
  uint64_t v = 0;
  for (char c : bytes) v = (v << 8) | static_cast<unsigned char>(c);
  return static_cast<int64_t>(v);
}

std::string schemaIdOf(const TopicName& name) {
  std::string base = name.partitionedTopicName();
  size_t sep = base.find("://");
  return sep == std::string::npos ? base : base.substr(sep + 3);
}

std::string encodeSchemaRecord(const std::vector<StoredSchema>& versions) {
  std::string out;
  for (const auto& v : versions) {
    if (v.deleted) {
      out += fmt::format("deleted={},{}\n", v.version, v.timestampMs);
      continue;
    }
    out += fmt::format("schema={},{},{},{}\n", v.version, schemaTypeName(v.schema.type),
                       v.timestampMs, escapeField(v.schema.data));
    for (const auto& [k, val] : v.schema.properties) {
      out += fmt::format("property={},{},{}\n", v.version, escapeField(k), escapeField(val));
    }
  }
  return out;
}

std::vector<StoredSchema> decodeSchemaRecord(const std::string& text) {
  std::vector<StoredSchema> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line(text.data() + pos, (nl == text.npos ? text.size() : nl) - pos);
    pos = nl == text.npos ? text.size() : nl + 1;
    size_t eq = line.find('=');
    if (eq == line.npos) continue;
    std::string_view key = line.substr(0, eq);
    auto f = splitFields(line.substr(eq + 1));
    auto version = toInt(f[0]);
    if (!version) continue;
    if (key == "schema" && f.size() == 4) {
      auto type = schemaTypeFromName(f[1]);
      auto ts = toInt(f[2]);
      if (!type || !ts) continue;
      StoredSchema s;
      s.version = *version;
      s.schema.type = *type;
      s.timestampMs = *ts;
      s.schema.data = f[3];
      out.push_back(std::move(s));
    } else if (key == "deleted" && f.size() == 2) {
      StoredSchema s;
      s.version = *version;
      s.deleted = true;
      s.timestampMs = toInt(f[1]).value_or(0);
      out.push_back(std::move(s));
    } else if (key == "property" && f.size() == 3 && !out.empty() &&
               out.back().version == *version) {
      out.back().schema.properties[f[1]] = f[2];
    }
  }
  return out;
}

namespace {

metadata::Serde<std::vector<StoredSchema>> recordSerde() {
  return {[](const std::vector<StoredSchema>& v) { return encodeSchemaRecord(v); },
          [](const std::string& text) -> Result<std::vector<StoredSchema>> {
            return decodeSchemaRecord(text);
          }};
}

std::string recordPath(const std::string& id) {
  return kSchemasPrefix + storage::escapePathComponent(id);
}

int64_t nextVersion(const std::vector<StoredSchema>& versions) {
  return versions.empty() ? 0 : versions.back().version + 1;
}

}  // namespace

SchemaRegistry::SchemaRegistry() = default;

SchemaRegistry::~SchemaRegistry() { detach(); }

void SchemaRegistry::attach(metadata::Store* store, net::Executor* loop,
                            std::function<void(Status)> ready) {
  loop_ = loop;
  cache_ = metadata::MetadataCache<Versions>::create(store, recordSerde(), loop);
  mirror_ = metadata::ChildrenMirror<Versions>::create(
      cache_, store, loop, kSchemasRoot,
      [this](const std::string& name, const std::optional<Versions>& versions) {
        apply(storage::unescapePathComponent(name), versions.value_or(Versions{}));
      });
  mirror_->start(std::move(ready));
}

void SchemaRegistry::detach() {
  if (mirror_) mirror_->stop();
  if (cache_) cache_->close();
}

void SchemaRegistry::apply(const std::string& id, Versions versions) {
  MutexLock lock(mu_);
  if (versions.empty()) {
    schemas_.erase(id);
  } else {
    schemas_[id] = std::move(versions);
  }
}

std::vector<const StoredSchema*> SchemaRegistry::liveLocked(const std::string& id) const {
  std::vector<const StoredSchema*> out;
  auto it = schemas_.find(id);
  if (it == schemas_.end()) return out;
  for (const auto& v : it->second) {
    if (v.deleted) {
      out.clear();
    } else {
      out.push_back(&v);
    }
  }
  return out;
}

std::optional<StoredSchema> SchemaRegistry::getSchema(const std::string& id,
                                                      std::optional<int64_t> version) const {
  MutexLock lock(mu_);
  if (!version) {
    auto it = schemas_.find(id);
    if (it == schemas_.end() || it->second.empty() || it->second.back().deleted) {
      return std::nullopt;
    }
    return it->second.back();
  }
  for (const StoredSchema* s : liveLocked(id)) {
    if (s->version == *version) return *s;
  }
  return std::nullopt;
}

std::vector<StoredSchema> SchemaRegistry::getAllSchemas(const std::string& id) const {
  MutexLock lock(mu_);
  std::vector<StoredSchema> out;
  for (const StoredSchema* s : liveLocked(id)) out.push_back(*s);
  return out;
}

int64_t SchemaRegistry::findSchemaVersion(const std::string& id, const SchemaData& schema) const {
  MutexLock lock(mu_);
  for (const StoredSchema* s : liveLocked(id)) {
    if (sameSchema(s->schema, schema)) return s->version;
  }
  return -1;
}

namespace {
std::vector<const SchemaData*> latestFirst(const std::vector<const StoredSchema*>& live) {
  std::vector<const SchemaData*> out;
  for (auto it = live.rbegin(); it != live.rend(); ++it) out.push_back(&(*it)->schema);
  return out;
}
}  // namespace

Status SchemaRegistry::checkCompatible(const std::string& id, const SchemaData& schema,
                                       SchemaCompatibilityStrategy strategy) const {
  // Pulsar validates the definition first, with or without a schema to compare with.
  if (Status v = validateSchemaData(schema); !v) return v;
  MutexLock lock(mu_);
  return checkCompatibility(latestFirst(liveLocked(id)), schema, strategy);
}

Status SchemaRegistry::checkConsumerCompatibility(const std::string& id, const SchemaData& schema,
                                                  SchemaCompatibilityStrategy strategy) const {
  if (strategy == SchemaCompatibilityStrategy::ALWAYS_COMPATIBLE) return Status::ok();
  MutexLock lock(mu_);
  auto live = liveLocked(id);
  if (live.empty()) return Status::notFound("Topic does not have schema to check");
  using S = SchemaCompatibilityStrategy;
  if (strategy == S::BACKWARD || strategy == S::FORWARD || strategy == S::FORWARD_TRANSITIVE ||
      strategy == S::FULL) {
    strategy = S::BACKWARD;
  }
  return checkCompatibility(latestFirst(live), schema, strategy);
}

void SchemaRegistry::update(const std::string& id,
                            const std::function<Result<std::optional<Versions>>(Versions)>& change,
                            const std::shared_ptr<int64_t>& chosen, net::Executor* ex,
                            VersionCallback cb) {
  if (!cache_) {  // in memory only
    Versions current;
    {
      MutexLock lock(mu_);
      auto it = schemas_.find(id);
      if (it != schemas_.end()) current = it->second;
    }
    Result<std::optional<Versions>> next = change(std::move(current));
    if (next.isOk() && next->has_value()) apply(id, std::move(**next));
    Result<int64_t> out = next.isOk() ? Result<int64_t>(*chosen) : next.status();
    ex->execute([cb = std::move(cb), out] { cb(out); });
    return;
  }
  // The store's record is the truth (another broker may have written since memory was updated):
  // the change is computed on it, at the cache's loop, and memory follows the written record.
  cache_->readModifyUpdate(
      recordPath(id),
      [change](const std::optional<Versions>& current) -> Result<std::optional<Versions>> {
        return change(current.value_or(Versions{}));
      },
      loop_,
      [this, id, chosen, ex, cb = std::move(cb)](Result<std::optional<Versions>> r) {
        if (r.isOk() && r->has_value()) apply(id, std::move(**r));
        if (!r.isOk()) MLOG_WARN("cannot store the schemas of {}: {}", id, r.status().toString());
        Result<int64_t> out = r.isOk() ? Result<int64_t>(*chosen) : r.status();
        ex->execute([cb, out] { cb(out); });
      });
}

void SchemaRegistry::putSchemaIfAbsent(const std::string& id, const SchemaData& schema,
                                       SchemaCompatibilityStrategy strategy, net::Executor* ex,
                                       VersionCallback cb) {
  auto chosen = std::make_shared<int64_t>(-1);
  auto change = [schema, strategy, chosen](Versions versions) -> Result<std::optional<Versions>> {
    std::vector<const StoredSchema*> live;
    for (const auto& v : versions) {
      if (v.deleted) {
        live.clear();
      } else {
        live.push_back(&v);
      }
    }
    for (const StoredSchema* s : live) {
      if (sameSchema(s->schema, schema)) {
        *chosen = s->version;
        return std::optional<Versions>();
      }
    }
    std::vector<const SchemaData*> latest;
    for (auto it = live.rbegin(); it != live.rend(); ++it) latest.push_back(&(*it)->schema);
    if (Status s = checkCompatibility(latest, schema, strategy); !s.isOk()) return s;
    StoredSchema stored;
    stored.version = nextVersion(versions);
    stored.schema = schema;
    stored.timestampMs = wallClockMs();
    *chosen = stored.version;
    versions.push_back(std::move(stored));
    return std::optional<Versions>(std::move(versions));
  };
  update(id, change, chosen, ex, std::move(cb));
}

void SchemaRegistry::deleteSchema(const std::string& id, bool force, net::Executor* ex,
                                  VersionCallback cb) {
  auto chosen = std::make_shared<int64_t>(0);
  if (!force) {
    update(
        id,
        [chosen](Versions versions) -> Result<std::optional<Versions>> {
          StoredSchema tombstone;
          tombstone.version = nextVersion(versions);
          tombstone.deleted = true;
          tombstone.timestampMs = wallClockMs();
          *chosen = tombstone.version;
          versions.push_back(std::move(tombstone));
          return std::optional<Versions>(std::move(versions));
        },
        chosen, ex, std::move(cb));
    return;
  }
  if (!cache_) {
    int64_t next = 0;
    {
      MutexLock lock(mu_);
      auto it = schemas_.find(id);
      if (it != schemas_.end()) next = nextVersion(it->second);
      schemas_.erase(id);
    }
    ex->execute([cb = std::move(cb), next] { cb(next); });
    return;
  }
  // Forget every version: the record goes (Pulsar's deleteSchemaStorage).
  cache_->get(recordPath(id), loop_,
              [this, id, ex, cb = std::move(cb)](Result<std::optional<Versions>> r) mutable {
                if (!r.isOk()) {
                  Status s = r.status();
                  return ex->execute([cb = std::move(cb), s] { cb(s); });
                }
                int64_t next = r->has_value() ? nextVersion(**r) : 0;
                if (!r->has_value()) return ex->execute([cb = std::move(cb), next] { cb(next); });
                cache_->remove(recordPath(id), loop_,
                               [this, id, ex, cb = std::move(cb), next](const Status& s) {
                                 bool gone = s.isOk() || s.code() == StatusCode::kNotFound;
                                 if (gone) apply(id, {});
                                 Result<int64_t> out = gone ? Result<int64_t>(next) : s;
                                 ex->execute([cb, out] { cb(out); });
                               });
              });
}

}  // namespace magnetar::broker
