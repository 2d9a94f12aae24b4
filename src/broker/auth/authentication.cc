#include "broker/auth/authentication.h"

#include <boost/json.hpp>

#include "broker/auth/authentication_provider_tls.h"
#include "broker/auth/internal/authentication_provider_basic.h"

namespace magnetar::broker {
namespace {

namespace json = boost::json;

constexpr const char* kTokenProviderClass =
    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken";
constexpr const char* kBearer = "Bearer ";

Status notAllowed(std::string* reason, const char* code, const std::string& msg) {
  *reason = code;
  return Status::notAllowed(msg);
}

}  // namespace

Result<std::unique_ptr<AuthenticationProviderToken>> AuthenticationProviderToken::create(
    const TokenProviderOptions& o) {
  std::unique_ptr<AuthenticationProviderToken> p(new AuthenticationProviderToken());
  const std::string& url = !o.tokenSecretKey.empty() ? o.tokenSecretKey : o.tokenPublicKey;
  if (url.empty()) {
    return Status::invalidArgument("No secret key was provided for token authentication");
  }
  auto bytes = readKeyFromUrl(url);
  if (!bytes)
    return Status::invalidArgument("Cannot read the token key: " + bytes.status().message());
  p->key_ = TokenKey{*bytes, o.tokenSecretKey.empty()};
  if (!o.tokenAuthClaim.empty()) p->roleClaim_ = o.tokenAuthClaim;
  p->audienceClaim_ = o.tokenAudienceClaim;
  p->audience_ = o.tokenAudience;
  if (!p->audienceClaim_.empty() && p->audience_.empty()) {
    return Status::invalidArgument("Token Audience Claim [" + p->audienceClaim_ +
                                   "] configured, but Audience stands for this broker not.");
  }
  return p;
}

Result<AuthenticationResult> AuthenticationProviderToken::authenticate(
    const AuthenticationData& data, std::string* reason) const {
  std::string token;
  if (data.commandData) {
    token = *data.commandData;
  } else if (data.httpAuthorization) {
    const std::string& h = *data.httpAuthorization;
    if (h.rfind(kBearer, 0) != 0) {
      return notAllowed(reason, "INVALID_AUTH_DATA", "Invalid HTTP Authorization header");
    }
    token = h.substr(std::char_traits<char>::length(kBearer));
  } else {
    return notAllowed(reason, "INVALID_AUTH_DATA", "No token credentials passed");
  }
  if (token.find_first_not_of(" \t\r\n") == std::string::npos) {
    return notAllowed(reason, "INVALID_AUTH_DATA", "Blank token found");
  }
  auto t = validateToken(token, key_, nowMillis());
  if (!t) {
    if (t.status().message().rfind("JWT expired", 0) == 0) AuthenticationMetrics::expiredToken();
    return notAllowed(reason, "INVALID_TOKEN",
                      "Failed to authentication token: " + t.status().message());
  }
  json::value claims = json::parse(t->claimsJson);
  const json::object& c = claims.as_object();
  if (!audienceClaim_.empty()) {
    const json::value* aud = c.if_contains(audienceClaim_);
    if (!aud || aud->is_null()) {
      return notAllowed(reason, "INVALID_TOKEN",
                        "Failed to authentication token: Found null Audience in token, for "
                        "claimed field: " +
                            audienceClaim_);
    }
    if (aud->is_array()) {
      std::string list;
      bool found = false;
      for (const auto& a : aud->as_array()) {
        std::string s = a.is_string() ? std::string(a.as_string()) : json::serialize(a);
        list += (list.empty() ? "" : ", ") + s;
        found = found || s == audience_;
      }
      if (!found) {
        return notAllowed(
            reason, "INVALID_AUDIENCES",
            "Audiences in token: [" + list + "] not contains this broker: " + audience_);
      }
    } else if (aud->is_string()) {
      if (aud->as_string() != audience_) {
        return notAllowed(reason, "INVALID_AUDIENCES",
                          "Audiences in token: [" + std::string(aud->as_string()) +
                              "] not contains this broker: " + audience_);
      }
    } else {
      return notAllowed(reason, "INVALID_AUDIENCES",
                        "Audiences in token is not in expected format: " + json::serialize(*aud));
    }
  }
  AuthenticationResult r;
  if (const json::value* role = c.if_contains(roleClaim_)) {
    if (role->is_string()) {
      r.role = std::string(role->as_string());
    } else if (role->is_array() && !role->as_array().empty() && role->as_array()[0].is_string()) {
      r.role = std::string(role->as_array()[0].as_string());
    }
  }
  if (t->expSec) r.expiresAtMs = *t->expSec * 1000;
  return r;
}

void AuthenticationMetrics::success(const std::string& provider, const std::string& method) {
  MutexLock lock(mu_);
  ++successes_[Key{provider, method, ""}];
}

void AuthenticationMetrics::failure(const std::string& provider, const std::string& method,
                                    const std::string& reason) {
  MutexLock lock(mu_);
  ++failures_[Key{provider, method, reason}];
}

std::map<AuthenticationMetrics::Key, uint64_t> AuthenticationMetrics::successes() {
  MutexLock lock(mu_);
  return successes_;
}

std::map<AuthenticationMetrics::Key, uint64_t> AuthenticationMetrics::failures() {
  MutexLock lock(mu_);
  return failures_;
}

Result<std::unique_ptr<AuthenticationService>> AuthenticationService::create(
    const AuthenticationOptions& o) {
  auto s = std::make_unique<AuthenticationService>();
  s->enabled_ = o.authenticationEnabled;
  s->anonymousUserRole_ = o.anonymousUserRole;
  if (!o.authenticationEnabled) return s;
  for (const auto& cls : o.authenticationProviders) {
    if (cls == kTokenProviderClass) {
      auto p = AuthenticationProviderToken::create(o.token);
      if (!p) return p.status();
      s->providers_.push_back(std::move(*p));
    } else if (cls == kAuthenticationProviderBasicClass) {
      auto p = AuthenticationProviderBasic::create(o.basicAuthConf);
      if (!p) return p.status();
      s->providers_.push_back(std::move(*p));
    } else if (cls == kAuthenticationProviderTlsClass) {
      s->providers_.push_back(std::make_unique<AuthenticationProviderTls>());
    } else {
      return Status::invalidArgument("Unsupported authentication provider: " + cls);
    }
  }
  return s;
}

const AuthenticationProvider* AuthenticationService::provider(const std::string& method) const {
  for (const auto& p : providers_) {
    if (p->authMethodName() == method) return p.get();
  }
  return nullptr;
}

Result<AuthenticationResult> AuthenticationService::authenticateHttp(
    const std::optional<std::string>& authorization, const std::string& peerCommonName) const {
  AuthenticationData data;
  data.httpAuthorization = authorization;
  data.peerCommonName = peerCommonName;
  std::string lastError = "Authentication required";
  for (const auto& p : providers_) {
    // Token and basic providers need the header; without one they are not tried (nor counted).
    if (p->authMethodName() != "tls" && !authorization) continue;
    if (p->authMethodName() == "tls" && peerCommonName.empty()) continue;
    std::string reason;
    auto r = p->authenticate(data, &reason);
    if (r) {
      AuthenticationMetrics::success(p->providerName(), p->authMethodName());
      return r;
    }
    AuthenticationMetrics::failure(p->providerName(), p->authMethodName(), reason);
    lastError = r.status().message();
  }
  if (!anonymousUserRole_.empty()) return AuthenticationResult{anonymousUserRole_, std::nullopt};
  return Status::notAllowed(lastError);
}

}  // namespace magnetar::broker
