// What the broker-to-broker connection (broker_peer.h) presents: Pulsar's brokerClient* keys as
// PulsarService.getClient reads them (the authentication plugin and its parameters, TLS with
// brokerClientTrustCertsFilePath or tlsTrustCertsFilePath, tlsAllowInsecureConnection,
// tlsHostnameVerificationEnabled, brokerClientCertificateFilePath / KeyFilePath).
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_SERVICE)
#error "broker/service is not below this broker part (src/broker/README.md)"
#endif

#include <memory>
#include <string>

#include "base/status.h"
#include "broker/common/broker_options.h"

struct ssl_ctx_st;

namespace magnetar::broker {

// CONNECT's credentials: auth_method_name ("" none, "token", "tls", "basic") and auth_data.
struct PeerCredentials {
  std::string method;
  std::string data;
};

class BrokerClientSettings {
 public:
  // Checks and loads the options (TLS files read once, as Pulsar's client at creation).
  // Plugins (org.apache.pulsar.client.impl.auth.*, as AuthenticationFactory.create):
  // AuthenticationDisabled (or ""), AuthenticationToken ("token:T", "file:PATH" read at each
  // connect and trimmed, {"token":"T"}, else the whole text), AuthenticationTls
  // ("tlsCertFile:P,tlsKeyFile:P" or JSON; the certificate is the TLS client's, auth data
  // empty), AuthenticationBasic ({"userId":U,"password":P}; auth data "U:P").
  // Errors: kInvalidArgument naming the key (unknown plugin, malformed parameters,
  // brokerClientTlsEnabledWithKeyStore set, unreadable TLS files). Thread: any.
  static Result<std::shared_ptr<const BrokerClientSettings>> create(const BrokerClientOptions& o);

  bool tlsEnabled() const { return tlsCtx_ != nullptr; }
  // The client SSL_CTX (null without brokerClientTlsEnabled).
  const std::shared_ptr<ssl_ctx_st>& tlsContext() const { return tlsCtx_; }
  bool verifyHostname() const { return verifyHostname_; }
  // CONNECT's credentials now (a token file is read again). Errors: kNotFound, kIoError
  // (token file). Thread: any.
  Result<PeerCredentials> credentials() const;

 private:
  BrokerClientSettings() = default;
  std::string method_;
  std::string data_;       // the fixed auth data (token, "user:password")
  std::string tokenFile_;  // AuthenticationToken "file:..." (read at each connect)
  std::shared_ptr<ssl_ctx_st> tlsCtx_;
  bool verifyHostname_ = false;
};

}  // namespace magnetar::broker
