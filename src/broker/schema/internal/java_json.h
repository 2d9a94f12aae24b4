// JSON text written as Pulsar's Java libraries write a parsed tree, for the KEY_VALUE schema
// forms whose bytes Pulsar produces by re-serializing (schema_data_validator.h): the admin GET
// (Jackson, SchemaUtils.convertKeyValueSchemaInfoDataToString) and the admin upload (Gson,
// SchemaUtils.convertKeyValueDataStringToSchemaInfoSchema). Pure functions; any thread.
#pragma once

#ifndef MAGNETAR_BROKER_IN_SCHEMA
#error "broker/schema/internal/ is private to magnetar_broker_schema (src/broker/README.md)"
#endif

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace magnetar::broker {

enum class JavaJsonStyle {
  // Jackson's ObjectMapper.readTree + writeValueAsString: integers exact ("-0" is 0), other
  // numbers as Java's Double.toString (javaDoubleToString; out of range: "Infinity" quoted);
  // strings escape '"', '\', \b \t \n \f \r and other controls as \u00XX (upper-case hex).
  kJackson,
  // Gson's JsonParser.parseString + JsonElement.toString: numbers as written; strings escape '"',
  // '\', \b \t \n \f \r, other controls as \u00xx (lower-case hex), U+2028 and U+2029.
  kGson,
};

// One strict JSON value (RFC 8259; text after it is ignored, as Jackson's readTree does) without
// whitespace, written in `style`. A repeated object member keeps its first place and its last
// value (Java's LinkedHashMap/LinkedTreeMap); a lone UTF-16 surrogate escape becomes '?' (Java's
// UTF-8 encoder). kInvalidArgument when `text` does not start with a JSON value.
Result<std::string> rewriteJsonAsJava(std::string_view text, JavaJsonStyle style);

// The members of a JSON object as rewriteJsonAsJava writes their values, in first-appearance
// order (a repeated name keeps its last value). kInvalidArgument when `text` is not an object.
Result<std::vector<std::pair<std::string, std::string>>> rewriteJsonObjectMembersAsJava(
    std::string_view text, JavaJsonStyle style);

// Java 17's Double.toString(v) (FloatingDecimal): the shortest digits that read back as `v` (an
// integer-valued double below 2^63: its exact value, the digits below 53 bits rounded off), in
// "123.45" form for 1e-3 <= |v| < 1e7, else "1.2345E-7"; "0.0", "-0.0", "Infinity", "NaN".
// Known gaps: JDK 17 prints some integer-valued doubles of 2^63 and above with more digits
// (7.0000000000000004E22 where this gives 7.0E22), and subnormals its own way (4.9E-324 for
// Double.MIN_VALUE, 5.0E-324 here).
std::string javaDoubleToString(double v);

}  // namespace magnetar::broker
