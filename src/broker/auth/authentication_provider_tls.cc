#include "broker/auth/authentication_provider_tls.h"

namespace magnetar::broker {

Result<std::string> tlsRoleOf(bool isTls, const std::optional<std::string>& peerCommonName,
                              std::string* reason) {
  std::string ignored;
  std::string& why = reason ? *reason : ignored;
  if (isTls && !peerCommonName) {
    why = "INVALID_CERTS";
    return Status::notAllowed("Failed to get TLS certificates from client");
  }
  if (!isTls || peerCommonName->empty()) {
    why = "INVALID_CN";
    return Status::notAllowed("Client unable to authenticate with TLS certificate");
  }
  return *peerCommonName;
}

Result<AuthenticationResult> AuthenticationProviderTls::authenticate(const AuthenticationData& data,
                                                                     std::string* reason) const {
  return authenticateConnection(!data.peerCommonName.empty(), data.peerCommonName, reason);
}

Result<AuthenticationResult> AuthenticationProviderTls::authenticateConnection(
    bool isTls, const std::optional<std::string>& peerCommonName, std::string* reason) const {
  auto role = tlsRoleOf(isTls, peerCommonName, reason);
  if (!role) return role.status();
  return AuthenticationResult{std::move(*role), std::nullopt};
}

}  // namespace magnetar::broker
