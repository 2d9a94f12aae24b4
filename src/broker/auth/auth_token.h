// JWT tokens as Pulsar's AuthenticationProviderToken and `pulsar tokens` use them: key files,
// signing and validation. Signatures are libjwt's (OpenSSL underneath); this file parses and
// checks the header and claims around them. Stateless functions; any thread.
#pragma once

#if defined(MAGNETAR_BROKER_PART) && !defined(MAGNETAR_BROKER_SEES_AUTH)
#error "broker/auth is not below this broker part (src/broker/README.md)"
#endif

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "broker/common/base64.h"

namespace magnetar::broker {

// Reads a key given as Pulsar's AuthTokenUtils.readKeyFromUrl accepts it: "data:;base64,<b64>",
// "data:<raw>", "file:///path" or "file:path", "env:NAME" (base64 in the variable), a path to an
// existing file, or else the base64 text itself. Returns the raw key bytes.
// Errors: kNotFound (missing file or variable), kInvalidArgument (bad base64).
Result<std::string> readKeyFromUrl(const std::string& url);

// A new HS256 secret key: 32 random bytes (Pulsar's `tokens create-secret-key`).
Result<std::string> createSecretKey();
// A new key pair for "RS256" (RSA 2048) or "ES256" (P-256), DER encoded as Pulsar writes them:
// private key PKCS#8, public key X.509 SubjectPublicKeyInfo. Errors: kInvalidArgument (alg).
struct KeyPair {
  std::string privateKeyDer;
  std::string publicKeyDer;
};
Result<KeyPair> createKeyPair(const std::string& alg);

// What a token is checked against: an HMAC secret (HS256/384/512), or a public key in DER or
// PEM (RS*, PS* with an RSA key; ES* with an EC key).
struct TokenKey {
  std::string bytes;
  bool isPublicKey = false;
};

// Signs a token whose claims are `claimsJson` (a JSON object text, e.g. {"sub":"admin"}).
// `key`: the secret (HS256) or a private key in DER (PKCS#8) or PEM (alg RS256/ES256...).
// Errors: kInvalidArgument (bad key, unknown alg).
Result<std::string> signToken(const std::string& claimsJson, const std::string& key,
                              const std::string& alg);

// A token's parts, decoded without checking the signature.
struct DecodedToken {
  std::string headerJson;
  std::string claimsJson;
  std::string alg;                // header "alg"; "none" when absent
  std::optional<int64_t> expSec;  // "exp", seconds since the epoch
  std::optional<int64_t> nbfSec;  // "nbf"
};
// Errors: kInvalidArgument with jjwt's message for a malformed token ("JWT strings must contain
// exactly 2 period characters. Found: N", ...).
Result<DecodedToken> decodeToken(const std::string& token);

// Validates a signed token as Pulsar's parser (jjwt parseClaimsJws, no clock skew) does and
// returns it decoded. Errors (kInvalidArgument) carry jjwt's messages: "Unsigned Claims JWTs are
// not supported." (alg none), "JWT signature does not match locally computed signature. ..."
// (forged, wrong key), "JWT expired at ...", "JWT must not be accepted before ...".
// nowMs: milliseconds since the epoch.
Result<DecodedToken> validateToken(const std::string& token, const TokenKey& key, int64_t nowMs);

// The claims as jjwt's Map.toString() prints them ("{sub=admin, exp=1700000000}"), the output of
// `pulsar tokens show` and `validate`.
std::string claimsText(const std::string& claimsJson);

// Milliseconds since the epoch, system clock.
int64_t nowMillis();

}  // namespace magnetar::broker
