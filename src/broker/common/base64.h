// Standard base64 (RFC 4648 with padding, OpenSSL's EVP block coding). Stateless; any thread.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_COMMON)
#error "broker/common is not below this broker part (src/broker/README.md)"
#endif

#include <optional>
#include <string>

namespace magnetar::broker {

// Base64 of bytes, and back. decode: nullopt on bad input (line breaks and spaces are skipped).
std::string base64Encode(const std::string& bytes);
std::optional<std::string> base64Decode(const std::string& text);

}  // namespace magnetar::broker
