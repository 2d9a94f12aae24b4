#include "admin/schema_routes.h"

#include "broker/schema/schema_data_validator.h"
#include "broker/schema/schema_registry.h"

namespace magnetar::admin {
namespace {

namespace json = boost::json;
using broker::SchemaCompatibilityStrategy;
using broker::SchemaData;
using broker::StoredSchema;

const std::string kSchemaPath = "/admin/v2/schemas/{tenant}/{namespace}/{topic}";

// Pulsar's GetSchemaResponse.
json::object schemaJson(const StoredSchema& s) {
  json::object props;
  for (const auto& [k, v] : s.schema.properties) props[k] = v;
  return {
      {"version", s.version},
      {"type", broker::schemaTypeName(s.schema.type)},
      {"timestamp", s.timestampMs},
      {"data", s.schema.type == broker::SchemaType::KEY_VALUE ? broker::keyValueDataToJson(s.schema)
                                                              : s.schema.data},
      {"properties", std::move(props)}};
}

// A PostSchemaPayload body ({"type","schema","properties"}); nullopt with 400 in *error.
std::optional<SchemaData> parsePayload(const HttpRequest& req, HttpResponse* error) {
  auto v = parseJsonBody(req, error);
  if (!v) return std::nullopt;
  const json::object* o = v->if_object();
  const json::value* type = o ? o->if_contains("type") : nullptr;
  auto t = type && type->is_string() ? broker::schemaTypeFromName(type->as_string()) : std::nullopt;
  if (!t) {
    *error = HttpResponse::error(400, "Invalid schema type");
    return std::nullopt;
  }
  SchemaData d;
  d.type = *t;
  if (const json::value* s = o->if_contains("schema"); s && s->is_string()) {
    d.data = std::string(s->as_string());
  }
  if (const json::value* p = o->if_contains("properties"); p && p->is_object()) {
    for (const auto& [k, val] : p->as_object()) {
      if (auto text = javaString(val)) d.properties[std::string(k)] = std::move(*text);
    }
  }
  if (d.type == broker::SchemaType::KEY_VALUE) {
    // The REST form {"key": ..., "value": ...} becomes the stored KEY_VALUE encoding (Pulsar
    // answers 500 when it cannot convert it).
    auto kv = broker::keyValueDataFromJson(d.data);
    if (!kv.isOk()) {
      *error = HttpResponse::error(500, kv.status().message());
      return std::nullopt;
    }
    d.data = std::move(kv.value());
  }
  return d;
}

using SchemaHandler = std::function<HttpResponse(const HttpRequest&, const PathParams&,
                                                 const broker::TopicName&, const std::string& id)>;

void addSchemaRoute(Router& r, const char* method, const std::string& suffix, SchemaHandler h) {
  r.addSync(method, kSchemaPath + suffix,
            [h = std::move(h)](const HttpRequest& req, const PathParams& p) {
              HttpResponse err;
              auto name = topicFromParams(p, &err);
              if (!name) return err;
              return h(req, p, *name, broker::schemaIdOf(*name));
            });
}

// As addSchemaRoute, for a handler that answers later (a write to the metadata store).
using AsyncSchemaHandler = std::function<void(const HttpRequest&, const broker::TopicName&,
                                              const std::string& id, const Respond&)>;

void addAsyncSchemaRoute(Router& r, const char* method, const std::string& suffix,
                         AsyncSchemaHandler h) {
  r.add(method, kSchemaPath + suffix,
        [h = std::move(h)](const HttpRequest& req, const PathParams& p, const Respond& respond) {
          HttpResponse err;
          auto name = topicFromParams(p, &err);
          if (!name) return respond(err);
          h(req, *name, broker::schemaIdOf(*name), respond);
        });
}

void addTopicSchemaReadDeleteRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.schemas();
  addSchemaRoute(r, "GET", "/schema",
                 [&reg](const HttpRequest&, const PathParams&, const broker::TopicName&,
                        const std::string& id) {
                   auto s = reg.getSchema(id);
                   return s ? jsonResponse(schemaJson(*s))
                            : HttpResponse::error(404, "Schema not found");
                 });
  addSchemaRoute(r, "GET", "/schema/{version}",
                 [&reg](const HttpRequest&, const PathParams& p, const broker::TopicName&,
                        const std::string& id) {
                   auto version = parseDecimal(p.at("version"));
                   if (!version) return HttpResponse::error(412, "Invalid schema version");
                   auto s = reg.getSchema(id, *version);
                   return s ? jsonResponse(schemaJson(*s))
                            : HttpResponse::error(404, "Schema not found");
                 });
  addSchemaRoute(r, "GET", "/schemas",
                 [&reg](const HttpRequest&, const PathParams&, const broker::TopicName&,
                        const std::string& id) {
                   json::array all;
                   for (const auto& s : reg.getAllSchemas(id)) all.push_back(schemaJson(s));
                   return jsonResponse(json::object{{"getSchemaResponses", std::move(all)}});
                 });
  addAsyncSchemaRoute(r, "DELETE", "/schema",
                      [ctx, &reg](const HttpRequest& req, const broker::TopicName&,
                                  const std::string& id, const Respond& respond) {
                        reg.deleteSchema(id, queryFlag(req, "force"),
                                         &ctx->service.metadataExecutor(),
                                         [respond](const Result<int64_t>& v) {
                                           if (!v.isOk()) return respond(errorResponse(v.status()));
                                           respond(jsonResponse(json::object{{"version", *v}}));
                                         });
                      });
}

void addTopicSchemaWriteRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.schemas();
  addAsyncSchemaRoute(
      r, "POST", "/schema",
      [&reg, ctx](const HttpRequest& req, const broker::TopicName& name, const std::string& id,
                  const Respond& respond) {
        if (!ctx->service.namespaceExists(name.namespaceName())) {
          return respond(HttpResponse::error(404, "Namespace does not exist"));
        }
        HttpResponse err;
        auto schema = parsePayload(req, &err);
        if (!schema) return respond(err);
        if (Status s = broker::validateSchemaData(*schema); !s) {
          // Pulsar's InvalidSchemaDataException is 422; anything else 500.
          int code = s.code() == StatusCode::kInvalidArgument ? 422 : 500;
          return respond(HttpResponse::error(code, s.message()));
        }
        reg.putSchemaIfAbsent(
            id, *schema, ctx->service.schemaCompatibilityStrategyOf(name),
            &ctx->service.metadataExecutor(), [respond](const Result<int64_t>& v) {
              if (!v.isOk()) {
                if (v.status().code() == StatusCode::kNotAllowed) {
                  return respond(HttpResponse::error(409, v.status().message()));
                }
                return respond(errorResponse(v.status()));
              }
              respond(jsonResponse(json::object{{"version", json::object{{"version", *v}}}}));
            });
      });
  addSchemaRoute(r, "POST", "/compatibility",
                 [&reg, ctx](const HttpRequest& req, const PathParams&,
                             const broker::TopicName& name, const std::string& id) {
                   if (!ctx->service.namespaceExists(name.namespaceName())) {
                     return HttpResponse::error(404, "Namespace does not exist");
                   }
                   HttpResponse err;
                   auto schema = parsePayload(req, &err);
                   if (!schema) return err;
                   auto strategy = ctx->service.schemaCompatibilityStrategyOf(name);
                   if (Status s = reg.checkCompatible(id, *schema, strategy); !s) {
                     return HttpResponse::error(500, s.message());
                   }
                   return jsonResponse(
                       json::object{{"schemaCompatibilityStrategy", broker::strategyName(strategy)},
                                    {"compatibility", true}},
                       202);
                 });
  addSchemaRoute(r, "POST", "/version",
                 [&reg](const HttpRequest& req, const PathParams&, const broker::TopicName&,
                        const std::string& id) {
                   HttpResponse err;
                   auto schema = parsePayload(req, &err);
                   if (!schema) return err;
                   int64_t version = reg.findSchemaVersion(id, *schema);
                   return jsonResponse(json::object{{"version", version}});
                 });
}

using NamespaceFn = std::function<HttpResponse(const HttpRequest&, const std::string& ns)>;

void addNamespaceRoute(Router& r, const AdminContext* ctx, const char* method,
                       const std::string& suffix, NamespaceFn fn) {
  r.addSync(method, "/admin/v2/namespaces/{tenant}/{namespace}/" + suffix,
            [ctx, fn = std::move(fn)](const HttpRequest& req, const PathParams& p) {
              HttpResponse err;
              auto ns = namespaceFromParams(*ctx, p, &err);
              if (!ns) return err;
              return fn(req, *ns);
            });
}

// A JSON boolean body; nullopt with 400 in *error.
std::optional<bool> boolBody(const HttpRequest& req, HttpResponse* error) {
  auto v = parseJsonBody(req, error);
  if (!v) return std::nullopt;
  auto b = javaBoolean(*v);  // "true", 1: Jackson's coercions
  if (!b) *error = jacksonError("boolean", *v);
  return b;
}

void addNamespaceSchemaRoutes(Router& r, const AdminContext* ctx) {
  auto& reg = ctx->service.policies();
  addNamespaceRoute(r, ctx, "GET", "schemaCompatibilityStrategy",
                    [&reg](const HttpRequest&, const std::string& ns) {
                      auto p = reg.namespacePolicies(ns);
                      return jsonResponse(json::value(p.schemaCompatibilityStrategy.value_or(
                          broker::strategyName(SchemaCompatibilityStrategy::UNDEFINED))));
                    });
  for (const char* method : {"PUT", "POST"}) {
    addNamespaceRoute(r, ctx, method, "schemaCompatibilityStrategy",
                      [&reg](const HttpRequest& req, const std::string& ns) {
                        HttpResponse err;
                        auto v = parseJsonBody(req, &err);
                        if (!v) return err;
                        auto s = v->is_string() ? broker::strategyFromName(v->as_string())
                                                : std::nullopt;
                        if (!s)
                          return HttpResponse::error(400,
                                                     "Invalid schema compatibility "
                                                     "strategy");
                        if (Status stored = reg.updateNamespacePolicies(
                                ns,
                                [&](broker::NamespacePolicies& p) {
                                  if (*s == SchemaCompatibilityStrategy::UNDEFINED) {
                                    p.schemaCompatibilityStrategy.reset();
                                  } else {
                                    p.schemaCompatibilityStrategy = broker::strategyName(*s);
                                  }
                                });
                            !stored)
                          return errorResponse(stored);
                        return noContent();
                      });
  }
  struct BoolPolicy {
    const char* suffix;
    std::optional<bool> broker::NamespacePolicies::*field;
  };
  for (BoolPolicy b :
       {BoolPolicy{"isAllowAutoUpdateSchema", &broker::NamespacePolicies::isAllowAutoUpdateSchema},
        BoolPolicy{"schemaValidationEnforced",
                   &broker::NamespacePolicies::schemaValidationEnforced}}) {
    bool isAutoUpdate = std::string(b.suffix) == "isAllowAutoUpdateSchema";
    addNamespaceRoute(r, ctx, "GET", b.suffix,
                      [&reg, ctx, b, isAutoUpdate](const HttpRequest&, const std::string& ns) {
                        auto v = reg.namespacePolicies(ns).*b.field;
                        bool dflt =
                            isAutoUpdate &&
                            ctx->service.options().dynamic.isAllowAutoUpdateSchemaEnabled.load();
                        return jsonResponse(json::value(v.value_or(dflt)));
                      });
    addNamespaceRoute(r, ctx, "POST", b.suffix,
                      [&reg, b](const HttpRequest& req, const std::string& ns) {
                        HttpResponse err;
                        auto on = boolBody(req, &err);
                        if (!on) return err;
                        if (Status stored = reg.updateNamespacePolicies(
                                ns, [&](broker::NamespacePolicies& p) { p.*b.field = *on; });
                            !stored)
                          return errorResponse(stored);
                        return noContent();
                      });
  }
}

}  // namespace

void addSchemaRoutes(Router& router, const AdminContext& ctx) {
  addTopicSchemaReadDeleteRoutes(router, &ctx);
  addTopicSchemaWriteRoutes(router, &ctx);
  addNamespaceSchemaRoutes(router, &ctx);
}

}  // namespace magnetar::admin
