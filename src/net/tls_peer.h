// The identity in a TLS peer's certificate, for code that holds an OpenSSL session of its own
// (the admin HTTPS server) rather than a net::TlsSession.
#pragma once

#include <optional>
#include <string>

struct ssl_st;

namespace magnetar::net {

// The subject CN (UTF-8) of the certificate the peer of `ssl` presented and the handshake
// accepted: "" when it has no CN (or an unreadable one), nullopt when the peer sent no
// certificate or ssl is null. Thread: the owner of ssl.
std::optional<std::string> peerCommonNameOf(const ssl_st* ssl);

}  // namespace magnetar::net
