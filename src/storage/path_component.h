// The escaping of a name (a topic, a ledger, a schema id) into one component of a metadata path,
// shared by storage's keys and the broker's metadata nodes (docs/storage-format.md).
#pragma once

#include <string>

namespace magnetar::storage {

// Escapes a name into one path component: '%', '/' and bytes < 0x20 become %XX. Pure.
std::string escapePathComponent(const std::string& name);
// The inverse; malformed escapes are kept as they are.
std::string unescapePathComponent(const std::string& s);

}  // namespace magnetar::storage
