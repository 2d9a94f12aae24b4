#include "broker/auth/auth_token.h"

#include <fmt/format.h>
#include <jwt.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace magnetar::broker {
namespace {

namespace json = boost::json;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CtxFree {
  void operator()(EVP_PKEY_CTX* c) const { EVP_PKEY_CTX_free(c); }
};
struct JwtFree {
  void operator()(jwt_t* j) const { jwt_free(j); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using JwtPtr = std::unique_ptr<jwt_t, JwtFree>;

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::notFound("Cannot read key file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string bioText(BIO* b) {
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  return std::string(data, static_cast<size_t>(n));
}

// A key in PEM, or DER (public: SubjectPublicKeyInfo; private: PKCS#8 or traditional).
PkeyPtr loadKey(const std::string& bytes, bool isPublic) {
  BioPtr bio(BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
  if (bytes.rfind("-----BEGIN", 0) == 0) {
    return PkeyPtr(isPublic ? PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr)
                            : PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  }
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  long len = static_cast<long>(bytes.size());
  return PkeyPtr(isPublic ? d2i_PUBKEY(nullptr, &p, len) : d2i_AutoPrivateKey(nullptr, &p, len));
}

std::string toPem(EVP_PKEY* key, bool isPublic) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (isPublic) {
    PEM_write_bio_PUBKEY(bio.get(), key);
  } else {
    PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  }
  return bioText(bio.get());
}

std::optional<std::string> base64UrlDecode(std::string s) {
  for (char& c : s) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  while (s.size() % 4 != 0) s += '=';
  return base64Decode(s);
}

std::string isoTime(int64_t ms) {
  std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<int64_t> numericClaim(const json::object& o, const char* name) {
  const auto* v = o.if_contains(name);
  if (!v || !v->is_number()) return std::nullopt;
  return v->to_number<int64_t>();
}

const char* kSignatureMismatch =
    "JWT signature does not match locally computed signature. JWT validity cannot be asserted "
    "and should not be trusted.";

void appendValue(std::string& out, const json::value& v);

void appendObject(std::string& out, const json::object& o) {
  out += '{';
  bool first = true;
  for (const auto& kv : o) {
    if (!first) out += ", ";
    first = false;
    out += std::string(kv.key());
    out += '=';
    appendValue(out, kv.value());
  }
  out += '}';
}

void appendValue(std::string& out, const json::value& v) {
  if (v.is_string()) {
    out += std::string(v.as_string());
  } else if (v.is_object()) {
    appendObject(out, v.as_object());
  } else if (v.is_array()) {
    out += '[';
    bool first = true;
    for (const auto& e : v.as_array()) {
      if (!first) out += ", ";
      first = false;
      appendValue(out, e);
    }
    out += ']';
  } else {
    out += json::serialize(v);
  }
}

}  // namespace

int64_t nowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<std::string> readKeyFromUrl(const std::string& url) {
  if (url.rfind("data:", 0) == 0) {
    std::string rest = url.substr(5);
    size_t comma = rest.find(',');
    if (comma == std::string::npos) return rest;
    std::string meta = rest.substr(0, comma);
    std::string data = rest.substr(comma + 1);
    if (meta.size() >= 7 && meta.compare(meta.size() - 7, 7, ";base64") == 0) {
      auto d = base64Decode(data);
      if (!d) return Status::invalidArgument("Invalid base64 in the data: key");
      return *d;
    }
    return data;
  }
  if (url.rfind("file:", 0) == 0) {
    std::string path = url.substr(5);
    if (path.rfind("//", 0) == 0) path = path.substr(2);
    return readFile(path);
  }
  if (url.rfind("env:", 0) == 0) {
    const char* v = std::getenv(url.substr(4).c_str());
    if (!v) return Status::notFound("No environment variable " + url.substr(4));
    auto d = base64Decode(v);
    if (!d) return Status::invalidArgument("Invalid base64 in " + url);
    return *d;
  }
  std::error_code ec;
  if (std::filesystem::is_regular_file(url, ec)) return readFile(url);
  auto d = base64Decode(url);
  if (!d) return Status::invalidArgument("The key is neither a file nor base64 text");
  return *d;
}

Result<std::string> createSecretKey() {
  std::string key(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(key.data()), 32) != 1) {
    return Status::internal("RAND_bytes failed");
  }
  return key;
}

Result<KeyPair> createKeyPair(const std::string& alg) {
  EVP_PKEY* raw = nullptr;
  if (alg == "RS256" || alg == "RS384" || alg == "RS512") {
    std::unique_ptr<EVP_PKEY_CTX, CtxFree> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, nullptr));
    if (!ctx || EVP_PKEY_keygen_init(ctx.get()) <= 0 ||
        EVP_PKEY_CTX_set_rsa_keygen_bits(ctx.get(), 2048) <= 0 ||
        EVP_PKEY_keygen(ctx.get(), &raw) <= 0) {
      return Status::internal("RSA key generation failed");
    }
  } else if (alg == "ES256") {
    std::unique_ptr<EVP_PKEY_CTX, CtxFree> ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nullptr));
    if (!ctx || EVP_PKEY_keygen_init(ctx.get()) <= 0 ||
        EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx.get(), NID_X9_62_prime256v1) <= 0 ||
        EVP_PKEY_keygen(ctx.get(), &raw) <= 0) {
      return Status::internal("EC key generation failed");
    }
  } else {
    return Status::invalidArgument("Unsupported key pair algorithm: " + alg);
  }
  PkeyPtr key(raw);
  KeyPair out;
  BioPtr priv(BIO_new(BIO_s_mem()));
  i2d_PKCS8PrivateKey_bio(priv.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  out.privateKeyDer = bioText(priv.get());
  BioPtr pub(BIO_new(BIO_s_mem()));
  i2d_PUBKEY_bio(pub.get(), key.get());
  out.publicKeyDer = bioText(pub.get());
  return out;
}

Result<std::string> signToken(const std::string& claimsJson, const std::string& key,
                              const std::string& alg) {
  jwt_alg_t a = jwt_str_alg(alg.c_str());
  if (a == JWT_ALG_INVAL || a == JWT_ALG_NONE) {
    return Status::invalidArgument("Unsupported signature algorithm: " + alg);
  }
  std::string keyBytes = key;
  if (a != JWT_ALG_HS256 && a != JWT_ALG_HS384 && a != JWT_ALG_HS512) {
    PkeyPtr k = loadKey(key, false);
    if (!k) return Status::invalidArgument("Cannot read the private key");
    keyBytes = toPem(k.get(), false);
  }
  jwt_t* raw = nullptr;
  if (jwt_new(&raw) != 0) return Status::internal("jwt_new failed");
  JwtPtr j(raw);
  if (jwt_add_grants_json(j.get(), claimsJson.c_str()) != 0) {
    return Status::invalidArgument("Claims are not a JSON object");
  }
  if (jwt_set_alg(j.get(), a, reinterpret_cast<const unsigned char*>(keyBytes.data()),
                  static_cast<int>(keyBytes.size())) != 0) {
    return Status::invalidArgument("Cannot use the key with " + alg);
  }
  char* s = jwt_encode_str(j.get());
  if (!s) return Status::invalidArgument("Signing failed (key does not fit " + alg + ")");
  std::string token(s);
  free(s);  // NOLINT(cppcoreguidelines-no-malloc): libjwt's allocation
  return token;
}

Result<DecodedToken> decodeToken(const std::string& token) {
  size_t dots = std::count(token.begin(), token.end(), '.');
  if (dots != 2) {
    return Status::invalidArgument(
        fmt::format("JWT strings must contain exactly 2 period characters. Found: {}", dots));
  }
  size_t d1 = token.find('.');
  size_t d2 = token.find('.', d1 + 1);
  auto header = base64UrlDecode(token.substr(0, d1));
  auto claims = base64UrlDecode(token.substr(d1 + 1, d2 - d1 - 1));
  if (!header || !claims) return Status::invalidArgument("Unable to read JSON value: bad base64");
  boost::system::error_code ec;
  json::value h = json::parse(*header, ec);
  if (ec || !h.is_object()) return Status::invalidArgument("Unable to read JSON value: " + *header);
  json::value c = json::parse(*claims, ec);
  if (ec || !c.is_object()) return Status::invalidArgument("Unable to read JSON value: " + *claims);
  DecodedToken out;
  out.headerJson = *header;
  out.claimsJson = *claims;
  const auto* alg = h.as_object().if_contains("alg");
  out.alg = alg && alg->is_string() ? std::string(alg->as_string()) : "none";
  out.expSec = numericClaim(c.as_object(), "exp");
  out.nbfSec = numericClaim(c.as_object(), "nbf");
  return out;
}

Result<DecodedToken> validateToken(const std::string& token, const TokenKey& key, int64_t nowMs) {
  auto decoded = decodeToken(token);
  if (!decoded) return decoded.status();
  const std::string& alg = decoded->alg;
  bool hasSignature = token.back() != '.';
  if (alg == "none") {
    if (hasSignature) {
      return Status::invalidArgument(
          "JWT string has a digest/signature, but the header does not reference a valid "
          "signature algorithm.");
    }
    return Status::invalidArgument("Unsigned Claims JWTs are not supported.");
  }
  jwt_alg_t a = jwt_str_alg(alg.c_str());
  if (a == JWT_ALG_INVAL) {
    return Status::invalidArgument("Unsupported signature algorithm '" + alg + "'");
  }
  bool hmac = a == JWT_ALG_HS256 || a == JWT_ALG_HS384 || a == JWT_ALG_HS512;
  std::string keyBytes = key.bytes;
  // The key decides the family: an HMAC token is never checked against a public key's bytes.
  if (hmac == key.isPublicKey) return Status::invalidArgument(kSignatureMismatch);
  if (key.isPublicKey) {
    PkeyPtr k = loadKey(key.bytes, true);
    if (!k) return Status::invalidArgument("Cannot read the public key");
    bool ec = EVP_PKEY_base_id(k.get()) == EVP_PKEY_EC;
    bool ecAlg = a == JWT_ALG_ES256 || a == JWT_ALG_ES384 || a == JWT_ALG_ES512;
    if (ec != ecAlg) return Status::invalidArgument(kSignatureMismatch);
    keyBytes = toPem(k.get(), true);
  }
  jwt_t* raw = nullptr;
  int rc = jwt_decode(&raw, token.c_str(), reinterpret_cast<const unsigned char*>(keyBytes.data()),
                      static_cast<int>(keyBytes.size()));
  JwtPtr j(raw);
  if (rc != 0 || !j) return Status::invalidArgument(kSignatureMismatch);
  if (decoded->expSec && *decoded->expSec * 1000 <= nowMs) {
    int64_t expMs = *decoded->expSec * 1000;
    return Status::invalidArgument(fmt::format(
        "JWT expired at {}. Current time: {}, a difference of {} milliseconds.  Allowed clock "
        "skew: 0 milliseconds.",
        isoTime(expMs), isoTime(nowMs), nowMs - expMs));
  }
  if (decoded->nbfSec && *decoded->nbfSec * 1000 > nowMs) {
    int64_t nbfMs = *decoded->nbfSec * 1000;
    return Status::invalidArgument(fmt::format(
        "JWT must not be accepted before {}. Current time: {}, a difference of {} milliseconds.  "
        "Allowed clock skew: 0 milliseconds.",
        isoTime(nbfMs), isoTime(nowMs), nbfMs - nowMs));
  }
  return decoded;
}

std::string claimsText(const std::string& claimsJson) {
  boost::system::error_code ec;
  json::value v = json::parse(claimsJson, ec);
  if (ec || !v.is_object()) return claimsJson;
  std::string out;
  appendObject(out, v.as_object());
  return out;
}

}  // namespace magnetar::broker
