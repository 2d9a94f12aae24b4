// AuthenticationProviderTls (Pulsar's org.apache.pulsar.broker.authentication
// .AuthenticationProviderTls): the role of a client on a TLS port is its certificate's subject
// CN. The certificate was verified by the TLS handshake (net::TlsContext), so this provider only
// reads it.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_AUTH)
#error "broker/auth is not below this broker part (src/broker/README.md)"
#endif

#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "broker/auth/authentication.h"

namespace magnetar::broker {

// authenticationProviders value and CONNECT auth_method_name of this provider.
inline constexpr std::string_view kAuthenticationProviderTlsClass =
    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls";
inline constexpr std::string_view kAuthMethodTls = "tls";

// The role from a TLS peer's CN (net::Connection::peerCommonName(): nullopt without a
// certificate, "" for one without a CN). Errors (kNotAllowed), Pulsar's messages, with the
// failure metric's reason (Pulsar's AuthenticationProviderTls.ErrorCode) in *reason when given:
// a TLS connection without a client certificate: "Failed to get TLS certificates from client"
// (INVALID_CERTS); not TLS, or no CN: "Client unable to authenticate with TLS certificate"
// (INVALID_CN). Pure.
Result<std::string> tlsRoleOf(bool isTls, const std::optional<std::string>& peerCommonName,
                              std::string* reason = nullptr);

// Pulsar's AuthenticationProviderTls. Thread: any (stateless).
class AuthenticationProviderTls final : public AuthenticationProvider {
 public:
  std::string authMethodName() const override { return std::string(kAuthMethodTls); }
  std::string providerName() const override { return "AuthenticationProviderTls"; }
  // From AuthenticationData::peerCommonName alone (HTTPS): a non-empty CN is the role; without
  // one, INVALID_CN as Pulsar answers a request without a usable certificate.
  Result<AuthenticationResult> authenticate(const AuthenticationData& data,
                                            std::string* reason) const override;
  // A binary-protocol connection (CONNECT): tlsRoleOf(isTls, peerCommonName).
  Result<AuthenticationResult> authenticateConnection(
      bool isTls, const std::optional<std::string>& peerCommonName, std::string* reason) const;
};

}  // namespace magnetar::broker
