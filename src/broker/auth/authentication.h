// Authentication as Pulsar's AuthenticationService: providers by auth method name ("token",
// "tls", ...), the binary protocol's CONNECT / AUTH_RESPONSE data and the HTTP Authorization
// header, anonymousUserRole, and Pulsar's authentication metrics.
// Thread: built at start-up, then read-only; authenticate() from any thread.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_AUTH)
#error "broker/auth is not below this broker part (src/broker/README.md)"
#endif

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "broker/auth/auth_token.h"

namespace magnetar::broker {

// What a client presented.
struct AuthenticationData {
  // CONNECT / AUTH_RESPONSE auth_data (binary protocol); unset for HTTP.
  std::optional<std::string> commandData;
  // The HTTP Authorization header ("Bearer <token>"); unset for the binary protocol.
  std::optional<std::string> httpAuthorization;
  // The verified client certificate's subject CN on a TLS connection, else empty.
  std::string peerCommonName;
};

// An authenticated identity.
struct AuthenticationResult {
  std::string role;
  std::optional<int64_t> expiresAtMs;  // credentials stop being valid then (token "exp")
};

// One authentication method (Pulsar's AuthenticationProvider). authenticate() on any thread.
class AuthenticationProvider {
 public:
  virtual ~AuthenticationProvider() = default;
  // The auth method name clients send ("token", "tls").
  virtual std::string authMethodName() const = 0;
  // Pulsar's class simple name, the provider_name label ("AuthenticationProviderToken").
  virtual std::string providerName() const = 0;
  // Errors: kNotAllowed with the message Pulsar's provider gives; *reason gets the failure
  // metric's reason label (Pulsar's ErrorCode name, e.g. "INVALID_TOKEN").
  virtual Result<AuthenticationResult> authenticate(const AuthenticationData& data,
                                                    std::string* reason) const = 0;
};

// Settings of AuthenticationProviderToken (Pulsar's names).
struct TokenProviderOptions {
  std::string tokenSecretKey;  // key URL (readKeyFromUrl); wins over tokenPublicKey
  std::string tokenPublicKey;  // key URL, DER or PEM
  std::string tokenAuthClaim;  // empty: "sub"
  std::string tokenAudienceClaim;
  std::string tokenAudience;
};

// Pulsar's AuthenticationProviderToken.
class AuthenticationProviderToken final : public AuthenticationProvider {
 public:
  // Errors: kInvalidArgument (no key, unreadable key, audience claim without audience).
  static Result<std::unique_ptr<AuthenticationProviderToken>> create(const TokenProviderOptions& o);
  std::string authMethodName() const override { return "token"; }
  std::string providerName() const override { return "AuthenticationProviderToken"; }
  Result<AuthenticationResult> authenticate(const AuthenticationData& data,
                                            std::string* reason) const override;

 private:
  AuthenticationProviderToken() = default;
  TokenKey key_;
  std::string roleClaim_ = "sub";
  std::string audienceClaim_;
  std::string audience_;
};

// Process-wide counters behind pulsar_authentication_success_total{provider_name,auth_method},
// pulsar_authentication_failures_total{provider_name,auth_method,reason} and
// pulsar_expired_token_total. Any thread.
class AuthenticationMetrics {
 public:
  struct Key {
    std::string provider, method, reason;
    bool operator<(const Key& o) const {
      return std::tie(provider, method, reason) < std::tie(o.provider, o.method, o.reason);
    }
  };
  static void success(const std::string& provider, const std::string& method);
  static void failure(const std::string& provider, const std::string& method,
                      const std::string& reason);
  static void expiredToken() { expired_.fetch_add(1, std::memory_order_relaxed); }
  static std::map<Key, uint64_t> successes();
  static std::map<Key, uint64_t> failures();
  static uint64_t expired() { return expired_.load(std::memory_order_relaxed); }

 private:
  static inline Mutex mu_;
  static inline std::map<Key, uint64_t> successes_ GUARDED_BY(mu_);
  static inline std::map<Key, uint64_t> failures_ GUARDED_BY(mu_);
  static inline std::atomic<uint64_t> expired_{0};
};

// Settings of the service (Pulsar's names).
struct AuthenticationOptions {
  bool authenticationEnabled = false;
  std::vector<std::string> authenticationProviders;  // Pulsar's class names
  std::string anonymousUserRole;                     // empty: none
  TokenProviderOptions token;
  std::string basicAuthConf;  // AuthenticationProviderBasic's htpasswd file, URL or base64
};

class AuthenticationService {
 public:
  // Loads the providers by Pulsar's class names. Errors: kInvalidArgument (unknown provider
  // class, or the provider's own error).
  static Result<std::unique_ptr<AuthenticationService>> create(const AuthenticationOptions& o);
  bool enabled() const { return enabled_; }
  // The provider of a method name, nullptr when none.
  const AuthenticationProvider* provider(const std::string& authMethod) const;
  const std::string& anonymousUserRole() const { return anonymousUserRole_; }

  // An HTTP request's role (Pulsar's authenticateHttpRequest): the Authorization header checked
  // by each provider in turn (token and basic need the header, tls a client certificate); without
  // the header, the anonymous role if any. Errors: kNotAllowed (the caller answers 401
  // "Authentication required").
  Result<AuthenticationResult> authenticateHttp(const std::optional<std::string>& authorization,
                                                const std::string& peerCommonName) const;

 private:
  bool enabled_ = false;
  std::string anonymousUserRole_;
  std::vector<std::unique_ptr<AuthenticationProvider>> providers_;
};

}  // namespace magnetar::broker
