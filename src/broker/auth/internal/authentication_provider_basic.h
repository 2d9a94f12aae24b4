// AuthenticationProviderBasic (Pulsar's org.apache.pulsar.broker.authentication
// .AuthenticationProviderBasic): user names and password hashes from `basicAuthConf`, one
// htpasswd-style `user:hash` line each. As Pulsar (commons-codec Crypt/Md5Crypt), a hash is either
// Apache's "$apr1$salt$..." MD5 or traditional DES crypt (13 characters, 2-character salt);
// bcrypt, "$1$", "$5$" and "$6$" entries never match. Auth method "basic": CONNECT auth_data
// "user:password", HTTP `Authorization: Basic base64(user:password)`.
#pragma once

#ifndef MAGNETAR_BROKER_IN_AUTH
#error "broker/auth/internal/ is private to magnetar_broker_auth (src/broker/README.md)"
#endif

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "broker/auth/authentication.h"

namespace magnetar::broker {

// authenticationProviders value and auth method name of this provider.
inline constexpr std::string_view kAuthenticationProviderBasicClass =
    "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic";
inline constexpr std::string_view kAuthMethodBasic = "basic";

// The conf's bytes as Pulsar's AuthenticationProviderBasic.readData finds them: "data:" and
// "file:" URLs, else an existing file's path, else base64 text. Errors: kInvalidArgument
// ("No basic authentication config provided" when empty, "Not supported config"),
// kNotFound (unreadable file).
Result<std::string> readBasicAuthConf(const std::string& conf);

// user -> hash from the conf text, lines split at \n, \r or \r\n. Each line must split at ':'
// into exactly two fields, Java's String.split (trailing empty fields dropped); a later line of
// the same user wins. Errors: kInvalidArgument "The format of the password auth conf file is
// invalid".
Result<std::map<std::string, std::string>> parseBasicAuthConf(const std::string& text);

// Apache's apr1 MD5 crypt of `password` with `salt` (the leading run of up to 8 characters of
// [./0-9A-Za-z]): "$apr1$<salt>$<22 characters>". Errors: kInvalidArgument (no usable salt).
Result<std::string> apr1Crypt(const std::string& password, const std::string& salt);

// Whether `password` matches `hash` as Pulsar checks it: "$apr1..." hashes must have exactly
// four '$'-separated fields and equal apr1Crypt(password, field 3); any other hash must equal
// DES crypt(3) of the password with the hash's first two characters as salt (libxcrypt), keyed
// as commons-codec's UnixCrypt: the first 8 bytes, NUL bytes included (crypt(3) stops at one).
bool verifyBasicPassword(const std::string& password, const std::string& hash);

// Pulsar's AuthenticationProviderBasic. Thread: built at start-up, then read-only.
class AuthenticationProviderBasic final : public AuthenticationProvider {
 public:
  // `basicAuthConf` as readBasicAuthConf takes it. Errors: those of readBasicAuthConf and
  // parseBasicAuthConf.
  static Result<std::unique_ptr<AuthenticationProviderBasic>> create(const std::string& conf);
  std::string authMethodName() const override { return std::string(kAuthMethodBasic); }
  std::string providerName() const override { return "AuthenticationProviderBasic"; }
  // The role is the user name. Errors (kNotAllowed), Pulsar's messages: "Authentication token
  // has to be started with \"Basic \"", "Base64 encoded token is not found", "Base64 decoding is
  // failure: ...", "Base64 decoded params are invalid" (not exactly one ':'), "Unknown user or
  // invalid password"; *reason is the message.
  Result<AuthenticationResult> authenticate(const AuthenticationData& data,
                                            std::string* reason) const override;

 private:
  AuthenticationProviderBasic() = default;
  std::map<std::string, std::string> users_;
};

}  // namespace magnetar::broker
