#include "broker/service/internal/topic_schema.h"

#include "broker/service/broker_service.h"
#include "broker/topic/topic.h"
#include "protocol/commands.h"

namespace magnetar::broker {

using protocol::Commands;

namespace {

// How Pulsar's ServerCnx words a failed schema future for a producer: the exception's message
// plus " caused by " and its cause, both the IncompatibleSchemaException.
std::string producerMessage(const std::string& m) {
  const std::string e =
      "org.apache.pulsar.broker.service.schema.exceptions.IncompatibleSchemaException: ";
  return e + m + " caused by " + e + m;
}

SchemaAnswer refused(std::string message, proto::ServerError e = proto::IncompatibleSchema) {
  SchemaAnswer a;
  a.ok = false;
  a.error = e;
  a.message = std::move(message);
  return a;
}

SchemaAnswer accepted(std::optional<int64_t> version) {
  SchemaAnswer a;
  a.version = encodeSchemaVersion(version);
  return a;
}

}  // namespace

SchemaCompatibilityStrategy BrokerService::schemaCompatibilityStrategyOf(
    const TopicName& name) const {
  auto p = policies_.namespacePolicies(name.namespaceName());
  if (p.schemaCompatibilityStrategy) {
    auto s = strategyFromName(*p.schemaCompatibilityStrategy);
    if (s && *s != SchemaCompatibilityStrategy::UNDEFINED) return *s;
  }
  auto s = strategyFromName(options_.schemaCompatibilityStrategy);
  return s && *s != SchemaCompatibilityStrategy::UNDEFINED ? *s : SchemaCompatibilityStrategy::FULL;
}

bool BrokerService::allowAutoUpdateSchema(const TopicName& name) const {
  auto p = policies_.namespacePolicies(name.namespaceName());
  return p.isAllowAutoUpdateSchema.value_or(options_.dynamic.isAllowAutoUpdateSchemaEnabled.load());
}

bool BrokerService::schemaValidationEnforced(const TopicName& name) const {
  auto p = policies_.namespacePolicies(name.namespaceName());
  return options_.isSchemaValidationEnforced || p.schemaValidationEnforced.value_or(false);
}

SchemaData schemaDataFromProto(const proto::Schema& s) {
  SchemaData d;
  d.type = schemaTypeFromProto(s.type());
  d.data = s.schema_data();
  for (const auto& kv : s.properties()) d.properties[kv.key()] = kv.value();
  return d;
}

namespace {

using AddedCallback = std::function<void(Result<std::optional<int64_t>>)>;

// Pulsar's tryAddSchema + AbstractTopic.addSchema with the bare exception messages: the version
// (nullopt without a schema), kNotAllowed when refused, kInvalidArgument for a definition that
// does not validate, the store's errors. done runs on the topic's executor (posted).
void addSchema(BrokerService& service, const PersistentTopic& topic, const proto::Schema* schema,
               AddedCallback done) {
  const TopicName& name = topic.name();
  std::string id = schemaIdOf(name);
  SchemaRegistry& registry = service.schemas();
  net::Executor& ex = topic.executor();
  auto answer = [&ex, &done](Result<std::optional<int64_t>> r) {
    ex.execute([done = std::move(done), r = std::move(r)] { done(r); });
  };
  if (!schema) {
    if (registry.hasSchema(id) && service.schemaValidationEnforced(name)) {
      return answer(Status::notAllowed(
          "Producers cannot connect or send message without a schema to topics with a schema"));
    }
    return answer(std::optional<int64_t>());
  }
  SchemaData data = schemaDataFromProto(*schema);
  if (Status v = validateSchemaData(data); !v) return answer(v);  // kInvalidArgument
  if (!service.allowAutoUpdateSchema(name)) {
    int64_t version = registry.findSchemaVersion(id, data);
    if (version < 0) {
      return answer(Status::notAllowed("Schema not found and schema auto updating is disabled."));
    }
    return answer(std::optional<int64_t>(version));
  }
  registry.putSchemaIfAbsent(id, data, service.schemaCompatibilityStrategyOf(name), &ex,
                             [done = std::move(done)](const Result<int64_t>& version) {
                               if (!version.isOk()) return done(version.status());
                               done(std::optional<int64_t>(*version));
                             });
}

SchemaAnswer answerOf(const Result<std::optional<int64_t>>& r, bool wrapMessage) {
  if (r.isOk()) return accepted(*r);
  // Pulsar's InvalidSchemaDataException reaches the client unwrapped.
  if (r.status().code() == StatusCode::kInvalidArgument) return refused(r.status().message());
  if (r.status().code() != StatusCode::kNotAllowed) {
    return refused(r.status().message(), proto::MetadataError);
  }
  return refused(wrapMessage ? producerMessage(r.status().message()) : r.status().message());
}

}  // namespace

void addProducerSchema(BrokerService& service, const PersistentTopic& topic,
                       const proto::Schema* schema, SchemaDone done) {
  addSchema(service, topic, schema,
            [done = std::move(done)](const Result<std::optional<int64_t>>& r) {
              done(answerOf(r, true));
            });
}

void checkConsumerSchema(BrokerService& service, const PersistentTopic& topic,
                         const proto::Schema& schema, SchemaDone done) {
  SchemaData data = schemaDataFromProto(schema);
  net::Executor& ex = topic.executor();
  auto answer = [&ex, &done](SchemaAnswer a) {
    ex.execute([done = std::move(done), a = std::move(a)] { done(a); });
  };
  if (data.type == SchemaType::AUTO_CONSUME) return answer(accepted(std::nullopt));
  const TopicName& name = topic.name();
  std::string id = schemaIdOf(name);
  SchemaRegistry& registry = service.schemas();
  size_t consumers = 0;
  for (const auto& [subName, sub] : topic.subscriptions()) {
    if (!sub->hasDispatcher()) continue;
    for (const auto& c : sub->dispatcher()->consumers()) {
      if (!c->autoConsumeSchema) ++consumers;
    }
  }
  bool idle = !registry.hasSchema(id) && topic.producers().empty() && consumers == 0 &&
              topic.stats().entriesAddedCounter == 0;
  if (idle) {
    return addSchema(service, topic, &schema,
                     [done = std::move(done)](const Result<std::optional<int64_t>>& r) {
                       done(answerOf(r, false));
                     });
  }
  Status s =
      registry.checkConsumerCompatibility(id, data, service.schemaCompatibilityStrategyOf(name));
  if (s.code() == StatusCode::kNotFound) {
    return answer(
        refused(std::string("Failed to add schema to an active topic with empty(BYTES) schema: "
                            "new schema type ") +
                schemaTypeName(data.type)));
  }
  if (!s) return answer(refused(s.message()));
  answer(accepted(std::nullopt));
}

Buffer getSchemaResponse(BrokerService& service, const proto::CommandGetSchema& c) {
  auto notFound = [&] {
    return Commands::newGetSchemaErrorResponse(c.request_id(), proto::TopicNotFound,
                                               "Topic not found or no-schema " + c.topic());
  };
  auto name = TopicName::parse(c.topic());
  if (!name.isOk()) return notFound();
  std::optional<int64_t> version;
  if (c.has_schema_version()) {
    version = decodeSchemaVersion(c.schema_version());
    if (!version) return notFound();
  }
  std::string id = schemaIdOf(*name);
  auto stored = service.schemas().getSchema(id, version);
  if (!stored) return notFound();
  proto::Schema s;
  s.set_name(id);
  s.set_schema_data(stored->schema.data);
  s.set_type(static_cast<proto::Schema::Type>(schemaTypeToProto(stored->schema.type)));
  for (const auto& [k, v] : stored->schema.properties) {
    auto* kv = s.add_properties();
    kv->set_key(k);
    kv->set_value(v);
  }
  return Commands::newGetSchemaResponse(c.request_id(), s, encodeSchemaVersion(stored->version));
}

void getOrCreateSchema(BrokerService& service, const proto::CommandGetOrCreateSchema& c,
                       const std::function<void(Buffer)>& send) {
  uint64_t requestId = c.request_id();
  const std::string& topicText = c.topic();
  auto name = TopicName::parse(topicText);
  if (!name.isOk()) {
    send(Commands::newGetOrCreateSchemaErrorResponse(requestId, proto::TopicNotFound,
                                                     "Topic not found " + topicText));
    return;
  }
  proto::Schema schema = c.schema();
  service.getOrCreateTopic(
      *name, false,
      [&service, requestId, topicText, schema, send](Result<std::shared_ptr<PersistentTopic>> r) {
        if (!r.isOk()) {
          send(Commands::newGetOrCreateSchemaErrorResponse(requestId, proto::TopicNotFound,
                                                           "Topic not found " + topicText));
          return;
        }
        addProducerSchema(service, **r, &schema, [requestId, send](const SchemaAnswer& a) {
          send(a.ok ? Commands::newGetOrCreateSchemaResponse(requestId, a.version)
                    : Commands::newGetOrCreateSchemaErrorResponse(requestId, a.error, a.message));
        });
      });
}

}  // namespace magnetar::broker
