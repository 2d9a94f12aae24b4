// The schema steps of the binary protocol (Pulsar's ServerCnx.tryAddSchema,
// AbstractTopic.addSchema / addSchemaIfIdleOrCheckCompatible, handleGetSchema and
// handleGetOrCreateSchema), kept out of ServerCnx: PRODUCER and SUBSCRIBE call one function each
// on the topic's executor, GET_SCHEMA and GET_OR_CREATE_SCHEMA build their answer here.
#pragma once

#ifndef MAGNETAR_BROKER_IN_SERVICE
#error "broker/service/internal/ is private to magnetar_broker_service (src/broker/README.md)"
#endif

#include <functional>
#include <string>

#include "base/buffer.h"
#include "broker/schema/schema_registry.h"
#include "protocol/pulsar_api.pb.h"

namespace magnetar::broker {

class BrokerService;
class PersistentTopic;

// A schema step's result: ok with the schema version for PRODUCER_SUCCESS / the response (8
// bytes big-endian, "" for a topic without schema), or Pulsar's error code and message.
struct SchemaAnswer {
  bool ok = true;
  std::string version;
  proto::ServerError error = proto::UnknownError;
  std::string message;
};

// The client's protocol Schema as SchemaData (type from the protocol number, properties).
SchemaData schemaDataFromProto(const proto::Schema& s);

// PRODUCER: without a schema, refused (IncompatibleSchema) only when the topic has one and
// schema validation is enforced; with one, registered under the topic's strategy (or, with
// auto update off, only an existing version is accepted). done runs on the topic's executor
// (posted, after the store answered a new version). Topic executor.
using SchemaDone = std::function<void(const SchemaAnswer&)>;
void addProducerSchema(BrokerService& service, const PersistentTopic& topic,
                       const proto::Schema* schema, SchemaDone done);

// SUBSCRIBE with a schema (not AUTO_CONSUME): registered when the topic is idle (no schema, no
// producer, no consumer other than AUTO_CONSUME ones, nothing published since it was loaded),
// else checked with Pulsar's checkConsumerCompatibility. done runs on the topic's executor
// (posted). Topic executor.
void checkConsumerSchema(BrokerService& service, const PersistentTopic& topic,
                         const proto::Schema& schema, SchemaDone done);

// The GET_SCHEMA_RESPONSE frame: the latest or the asked version, else TopicNotFound "Topic not
// found or no-schema <topic>" (Pulsar's answer). Any thread (reads memory only).
Buffer getSchemaResponse(BrokerService& service, const proto::CommandGetSchema& c);

// GET_OR_CREATE_SCHEMA: registers or checks the schema as a producer's on the existing topic;
// TopicNotFound "Topic not found <topic>" when it does not exist. `send` gets the response frame
// on any thread.
void getOrCreateSchema(BrokerService& service, const proto::CommandGetOrCreateSchema& c,
                       const std::function<void(Buffer)>& send);

}  // namespace magnetar::broker
