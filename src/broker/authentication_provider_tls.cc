#include "broker/authentication_provider_tls.h"

namespace magnetar::broker {

Result<std::string> tlsRoleOf(bool isTls, const std::optional<std::string>& peerCommonName) {
  if (!isTls || !peerCommonName) {
    return Status::notAllowed("Failed to get TLS certificates from client");
  }
  if (peerCommonName->empty()) {
    return Status::notAllowed("Client unable to authenticate with TLS certificate");
  }
  return *peerCommonName;
}

}  // namespace magnetar::broker
