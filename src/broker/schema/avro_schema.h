// Avro schemas as the compatibility checks need them: a parse of the JSON definition into a graph
// of types (named types defined once, so recursive records work), Avro's schema resolution rules,
// and Avro's pretty form for messages. Written on boost::json rather than Avro C (libavro): see
// src/broker/README.md. Pure functions; any thread.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SCHEMA)
#error "broker/schema is not below this broker part (src/broker/README.md)"
#endif

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace magnetar::broker {

// A parsed Avro schema (opaque, immutable).
class AvroSchema;

// kInvalidArgument with the reason when `text` is not an Avro schema (bad JSON, unknown type
// name, record without fields, redefined name, ...).
Result<std::shared_ptr<const AvroSchema>> parseAvroSchema(std::string_view text);
// Avro schema resolution as Avro 1.12's Resolver does it (what Pulsar's SchemaValidator checks):
// whether data written with `writer` can be read with `reader`. Records match whatever their
// names (a rename alone is compatible); enums and fixeds need the same simple name or a reader
// alias of the writer's full name; fields with defaults and aliases, enum symbols and defaults,
// fixed sizes, unions (the reader's branch chosen as ReaderUnion.firstMatchingBranch does), the
// int->long->float->double and string<->bytes promotions. Logical types and docs are ignored.
bool canRead(const AvroSchema& reader, const AvroSchema& writer);
// The schema in Avro's pretty form (Schema.toString(true): Jackson's default pretty printer) of
// the definition as given.
std::string avroPrettyString(const AvroSchema& s);
// Same definition once parsed (whitespace and key order do not matter).
bool avroEquals(const AvroSchema& a, const AvroSchema& b);

}  // namespace magnetar::broker
