#include "broker/service/broker_client_settings.h"

#include <boost/json.hpp>
#include <map>
#include <utility>

#include "broker/auth/auth_token.h"
#include "net/tls.h"

namespace magnetar::broker {

namespace {

constexpr std::string_view kAuthPackage = "org.apache.pulsar.client.impl.auth.";

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// The parameters as a map: a JSON object of strings, or Pulsar 1's "k1:v1,k2:v2"
// (AuthenticationUtil.configureFromPulsar1AuthParamString: each pair split at its first ':').
std::map<std::string, std::string> paramMap(const std::string& params) {
  std::map<std::string, std::string> out;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(params, ec);
  if (!ec && v.is_object()) {
    for (const auto& [k, val] : v.as_object()) {
      if (val.is_string()) out[std::string(k)] = std::string(val.as_string());
    }
    return out;
  }
  size_t start = 0;
  while (start < params.size()) {
    size_t comma = params.find(',', start);
    if (comma == std::string::npos) comma = params.size();
    std::string pair = params.substr(start, comma - start);
    if (auto colon = pair.find(':'); colon != std::string::npos) {
      out[trimmed(pair.substr(0, colon))] = trimmed(pair.substr(colon + 1));
    }
    start = comma + 1;
  }
  return out;
}

Status badParams(const std::string& plugin, const std::string& why) {
  return Status::invalidArgument("brokerClientAuthenticationParameters for " + plugin + ": " + why);
}

}  // namespace

Result<std::shared_ptr<const BrokerClientSettings>> BrokerClientSettings::create(
    const BrokerClientOptions& o) {
  std::shared_ptr<BrokerClientSettings> s(new BrokerClientSettings());
  std::string plugin = o.authenticationPlugin;
  if (plugin.rfind(kAuthPackage, 0) == 0) plugin = plugin.substr(kAuthPackage.size());
  const std::string& params = o.authenticationParameters;
  net::TlsOptions tls;
  tls.trustCertsFilePath =
      o.trustCertsFilePath.empty() ? o.tlsTrustCertsFilePath : o.trustCertsFilePath;
  tls.allowInsecureConnection = o.allowInsecureConnection;
  tls.certificateFilePath = o.certificateFilePath;
  tls.keyFilePath = o.keyFilePath;
  if (plugin.empty() || plugin == "AuthenticationDisabled") {
    // no credentials
  } else if (plugin == "AuthenticationToken") {  // Pulsar's AuthenticationToken.configure
    s->method_ = "token";
    if (params.rfind("token:", 0) == 0) {
      s->data_ = params.substr(6);
    } else if (params.rfind("file:", 0) == 0) {
      s->tokenFile_ = params;
    } else if (auto m = paramMap(params); params.rfind('{', 0) == 0 && m.count("token")) {
      s->data_ = m["token"];
    } else {
      s->data_ = params;
    }
    if (s->data_.empty() && s->tokenFile_.empty()) return badParams(plugin, "no token");
  } else if (plugin == "AuthenticationTls") {
    auto m = paramMap(params);
    if (m["tlsCertFile"].empty() || m["tlsKeyFile"].empty()) {
      return badParams(plugin, "tlsCertFile and tlsKeyFile are required");
    }
    if (!o.tlsEnabled) {
      return Status::invalidArgument("AuthenticationTls needs brokerClientTlsEnabled=true");
    }
    s->method_ = "tls";
    tls.certificateFilePath = m["tlsCertFile"];
    tls.keyFilePath = m["tlsKeyFile"];
  } else if (plugin == "AuthenticationBasic") {
    auto m = paramMap(params);
    if (params.rfind('{', 0) != 0 || !m.count("userId") || !m.count("password")) {
      return badParams(plugin, "a JSON object with userId and password is required");
    }
    s->method_ = "basic";
    s->data_ = m["userId"] + ":" + m["password"];
  } else {
    return Status::invalidArgument("brokerClientAuthenticationPlugin " + o.authenticationPlugin +
                                   " is not supported (AuthenticationDisabled, "
                                   "AuthenticationToken, AuthenticationTls, AuthenticationBasic)");
  }
  if (o.tlsEnabledWithKeyStore) {
    return Status::invalidArgument(
        "brokerClientTlsEnabledWithKeyStore is not supported: give PEM files "
        "(brokerClientTrustCertsFilePath, brokerClientCertificateFilePath, "
        "brokerClientKeyFilePath)");
  }
  if (o.tlsEnabled) {
    auto ctx = net::newClientSslCtx(tls);
    if (!ctx.isOk()) return Status::invalidArgument("broker client TLS: " + ctx.status().message());
    s->tlsCtx_ = std::move(*ctx);
    s->verifyHostname_ = o.hostnameVerificationEnabled;
  }
  return std::shared_ptr<const BrokerClientSettings>(std::move(s));
}

Result<PeerCredentials> BrokerClientSettings::credentials() const {
  if (tokenFile_.empty()) return PeerCredentials{method_, data_};
  auto token = readKeyFromUrl(tokenFile_);
  if (!token.isOk()) return token.status();
  return PeerCredentials{method_, trimmed(*token)};
}

}  // namespace magnetar::broker
