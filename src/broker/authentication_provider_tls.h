// AuthenticationProviderTls (Pulsar's org.apache.pulsar.broker.authentication
// .AuthenticationProviderTls): the role of a client on brokerServicePortTls is its certificate's
// subject CN. The certificate was verified by the TLS handshake (net::TlsContext).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "net/connection.h"

namespace magnetar::broker {

// authenticationProviders value and CONNECT auth_method_name of this provider.
inline constexpr std::string_view kAuthenticationProviderTlsClass =
    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls";
inline constexpr std::string_view kAuthMethodTls = "tls";

// The role from a TLS peer's CN (Connection::peerCommonName()). Errors, with Pulsar's messages:
// kNotAllowed "Failed to get TLS certificates from client" when the connection is not TLS or the
// client sent no certificate; "Client unable to authenticate with TLS certificate" when the
// certificate has no (or an empty) CN. Pure.
Result<std::string> tlsRoleOf(bool isTls, const std::optional<std::string>& peerCommonName);

// tlsRoleOf(cnx.isTls(), cnx.peerCommonName()). Thread: cnx's loop.
inline Result<std::string> authenticateTls(const net::Connection& cnx) {
  return tlsRoleOf(cnx.isTls(), cnx.peerCommonName());
}

}  // namespace magnetar::broker
