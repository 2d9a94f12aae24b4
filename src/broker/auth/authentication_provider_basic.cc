#include "broker/auth/internal/authentication_provider_basic.h"

#include <crypt.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "broker/auth/auth_token.h"

namespace magnetar::broker {
namespace {

constexpr const char* kUnknownUser = "Unknown user or invalid password";
constexpr const char* kApr1Magic = "$apr1$";
constexpr const char* kItoa64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// Java's String.split with a one-character literal: trailing empty fields are dropped, and a
// string without the separator is one field.
std::vector<std::string> javaSplit(const std::string& s, char sep) {
  std::vector<std::string> parts;
  if (s.find(sep) == std::string::npos) return {s};
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  while (!parts.empty() && parts.back().empty()) parts.pop_back();
  return parts;
}

bool isSaltChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '/';
}

// commons-codec Base64.isBase64: only alphabet, padding and whitespace characters.
bool looksBase64(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=' ||
           c == '-' || c == '_' || std::isspace(static_cast<unsigned char>(c));
  });
}

Status notAllowed(std::string* reason, const std::string& msg) {
  *reason = msg;
  return Status::notAllowed(msg);
}

class Md5 {
 public:
  Md5() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_md5(), nullptr); }
  ~Md5() { EVP_MD_CTX_free(ctx_); }
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  void update(const void* p, size_t n) { EVP_DigestUpdate(ctx_, p, n); }
  void update(const std::string& s) { update(s.data(), s.size()); }
  void final(unsigned char out[16]) { EVP_DigestFinal_ex(ctx_, out, nullptr); }

 private:
  EVP_MD_CTX* ctx_;
};

void to64(std::string& out, uint32_t v, int n) {
  while (n-- > 0) {
    out += kItoa64[v & 0x3f];
    v >>= 6;
  }
}

}  // namespace

Result<std::string> readBasicAuthConf(const std::string& conf) {
  if (conf.empty()) return Status::invalidArgument("No basic authentication config provided");
  if (conf.rfind("data:", 0) == 0 || conf.rfind("file:", 0) == 0) return readKeyFromUrl(conf);
  std::error_code ec;
  if (std::filesystem::exists(conf, ec)) {
    std::ifstream in(conf, std::ios::binary);
    if (!in) return Status::notFound("Cannot read " + conf);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  if (looksBase64(conf)) {
    auto d = base64Decode(conf);
    if (d) return *d;
  }
  return Status::invalidArgument("Not supported config");
}

Result<std::map<std::string, std::string>> parseBasicAuthConf(const std::string& text) {
  std::map<std::string, std::string> users;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find_first_of("\r\n", pos);
    std::string line = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (end == std::string::npos) {
      pos = text.size();
    } else {
      pos = end + (text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n' ? 2 : 1);
    }
    auto fields = javaSplit(line, ':');
    if (fields.size() != 2) {
      return Status::invalidArgument("The format of the password auth conf file is invalid");
    }
    users[fields[0]] = fields[1];
  }
  return users;
}

Result<std::string> apr1Crypt(const std::string& pw, const std::string& saltIn) {
  std::string salt;
  for (char c : saltIn) {
    if (!isSaltChar(c) || salt.size() == 8) break;
    salt += c;
  }
  if (salt.empty()) return Status::invalidArgument("Invalid salt value: " + saltIn);
  const size_t magicLen = std::strlen(kApr1Magic);
  unsigned char fin[16];
  {
    Md5 alt;
    alt.update(pw);
    alt.update(salt);
    alt.update(pw);
    alt.final(fin);
  }
  Md5 ctx;
  ctx.update(pw);
  ctx.update(kApr1Magic, magicLen);
  ctx.update(salt);
  for (size_t left = pw.size(); left > 0; left -= std::min<size_t>(left, 16)) {
    ctx.update(fin, std::min<size_t>(left, 16));
  }
  const unsigned char zero = 0;
  for (size_t i = pw.size(); i != 0; i >>= 1) {
    if (i & 1) {
      ctx.update(&zero, 1);
    } else {
      ctx.update(pw.data(), 1);
    }
  }
  ctx.final(fin);
  for (int i = 0; i < 1000; ++i) {
    Md5 round;
    if (i & 1) {
      round.update(pw);
    } else {
      round.update(fin, 16);
    }
    if (i % 3) round.update(salt);
    if (i % 7) round.update(pw);
    if (i & 1) {
      round.update(fin, 16);
    } else {
      round.update(pw);
    }
    round.final(fin);
  }
  std::string out = kApr1Magic + salt + "$";
  static constexpr int kGroups[5][3] = {{0, 6, 12}, {1, 7, 13}, {2, 8, 14}, {3, 9, 15}, {4, 10, 5}};
  for (const auto& g : kGroups) {
    to64(out, (uint32_t{fin[g[0]]} << 16) | (uint32_t{fin[g[1]]} << 8) | fin[g[2]], 4);
  }
  to64(out, fin[11], 2);
  return out;
}

bool verifyBasicPassword(const std::string& password, const std::string& hash) {
  if (hash.rfind("$apr1", 0) == 0) {
    auto fields = javaSplit(hash, '$');
    if (fields.size() != 4) return false;
    auto computed = apr1Crypt(password, fields[2]);
    return computed.isOk() && *computed == hash;
  }
  if (hash.size() < 2) return false;
  // Pulsar hands the first two characters to commons-codec's UnixCrypt (DES); libxcrypt treats
  // a two-character setting of salt characters the same way and fails on any other.
  if (!isSaltChar(hash[0]) || !isSaltChar(hash[1])) return false;
  std::string setting = hash.substr(0, 2);
  // UnixCrypt's key is the password's first 8 bytes, a NUL byte among them taken as key byte 0
  // (bytes after it count); crypt(3) stops at a NUL. Each byte is shifted left by one, so 0x80
  // is the same key byte as NUL: NULs are passed as 0x80.
  std::string key = password.substr(0, 8);
  std::replace(key.begin(), key.end(), '\0', '\x80');
  crypt_data data{};
  const char* out = crypt_rn(key.c_str(), setting.c_str(), &data, sizeof(data));
  return out != nullptr && out[0] != '*' && hash == out;
}

Result<std::unique_ptr<AuthenticationProviderBasic>> AuthenticationProviderBasic::create(
    const std::string& conf) {
  auto bytes = readBasicAuthConf(conf);
  if (!bytes) return bytes.status();
  auto users = parseBasicAuthConf(*bytes);
  if (!users) return users.status();
  std::unique_ptr<AuthenticationProviderBasic> p(new AuthenticationProviderBasic());
  p->users_ = std::move(*users);
  return p;
}

Result<AuthenticationResult> AuthenticationProviderBasic::authenticate(
    const AuthenticationData& data, std::string* reason) const {
  std::string params;
  if (data.commandData) {
    params = *data.commandData;
  } else if (data.httpAuthorization) {
    const std::string& raw = *data.httpAuthorization;
    std::string upper = raw.substr(0, 6);
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return std::toupper(c); });
    if (upper != "BASIC ") {
      return notAllowed(reason, "Authentication token has to be started with \"Basic \"");
    }
    auto split = javaSplit(raw, ' ');
    if (split.size() != 2) return notAllowed(reason, "Base64 encoded token is not found");
    std::string b64 = split[1];
    while (b64.size() % 4 != 0 && b64.size() % 4 != 1) b64 += '=';  // Java: padding optional
    auto decoded = looksBase64(split[1]) ? base64Decode(b64) : std::nullopt;
    if (!decoded) {
      return notAllowed(reason, "Base64 decoding is failure: Illegal base64 character");
    }
    params = *decoded;
  } else {
    return notAllowed(reason, "Authentication data source does not have data");
  }
  auto fields = javaSplit(params, ':');
  if (fields.size() != 2) return notAllowed(reason, "Base64 decoded params are invalid");
  auto it = users_.find(fields[0]);
  if (it == users_.end() || !verifyBasicPassword(fields[1], it->second)) {
    return notAllowed(reason, kUnknownUser);
  }
  return AuthenticationResult{fields[0], std::nullopt};
}

}  // namespace magnetar::broker
