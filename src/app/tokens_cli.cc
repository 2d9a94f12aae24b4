#include "app/tokens_cli.h"

#include <boost/json.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "broker/auth/auth_token.h"

namespace magnetar::app {
namespace {

using broker::base64Encode;

struct TokensOptions {
  std::string algorithm;  // of the subcommand run (copied from the ones below)
  std::string secretAlg = "HS256", pairAlg = "RS256", createAlg = "RS256", validateAlg = "RS256";
  std::string output;
  bool base64 = false;
  std::string privateKeyFile, publicKeyFile;
  std::string subject, expiryTime, secretKey, privateKey, publicKey;
  std::vector<std::string> headers;
  std::string token, tokenFile;
  bool stdinToken = false;
};

bool writeFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out);
}

// Pulsar's RelativeTimeUtil: a number with s, m, h, d, w or y (365 days); no unit: seconds.
std::optional<int64_t> relativeSeconds(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char unit = text.back();
  std::string digits =
      std::isdigit(static_cast<unsigned char>(unit)) ? text : text.substr(0, text.size() - 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  int64_t n = std::stoll(digits);
  switch (std::isdigit(static_cast<unsigned char>(unit)) ? 's' : unit) {
    case 's':
      return n;
    case 'm':
      return n * 60;
    case 'h':
      return n * 3600;
    case 'd':
      return n * 86400;
    case 'w':
      return n * 7 * 86400;
    case 'y':
      return n * 365 * 86400;
    default:
      return std::nullopt;
  }
}

int fail(const std::string& msg) {
  std::cerr << msg << "\n";
  return 1;
}

// Pulsar's TokensCliUtils errors: no token given; not exactly one signing key (--secret-key and
// `otherKey`, --private-key or --public-key; `none`: neither was given, else both were).
constexpr const char* kNoToken =
    "Token needs to be either passed as an argument or through `--stdin`, `--token-file` or by "
    "the `TOKEN` environment variable";
std::string notOneKey(bool none, const std::string& otherKey) {
  return none ? "Either --secret-key or " + otherKey + " needs to be passed for signing a token"
              : "Only one of --secret-key and " + otherKey +
                    " needs to be passed for signing a token";
}

// The token from the argument, --stdin, --token-file or $TOKEN, as Pulsar's tool reads it.
std::optional<std::string> tokenInput(const TokensOptions& o) {
  std::string t;
  if (!o.token.empty()) {
    t = o.token;
  } else if (o.stdinToken) {
    std::getline(std::cin, t);
  } else if (!o.tokenFile.empty()) {
    std::ifstream in(o.tokenFile, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    t = ss.str();
  } else if (const char* env = std::getenv("TOKEN")) {
    t = env;
  } else {
    return std::nullopt;
  }
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  return t;
}

int createSecretKey(const TokensOptions& o) {
  if (o.algorithm != "HS256") return fail("Unsupported secret key algorithm: " + o.algorithm);
  auto key = broker::createSecretKey();
  if (!key) return fail(key.status().message());
  std::string encoded = o.base64 ? base64Encode(*key) : *key;
  if (!o.output.empty()) {
    if (!writeFile(o.output, encoded)) return fail("Cannot write " + o.output);
  } else {
    std::cout << encoded << std::flush;
  }
  return 0;
}

int createKeyPair(const TokensOptions& o) {
  auto pair = broker::createKeyPair(o.algorithm);
  if (!pair) return fail(pair.status().message());
  if (!writeFile(o.publicKeyFile, pair->publicKeyDer))
    return fail("Cannot write " + o.publicKeyFile);
  if (!writeFile(o.privateKeyFile, pair->privateKeyDer)) {
    return fail("Cannot write " + o.privateKeyFile);
  }
  return 0;
}

int createToken(const TokensOptions& o) {
  if (o.secretKey.empty() == o.privateKey.empty()) {
    return fail(notOneKey(o.secretKey.empty(), "--private-key"));
  }
  auto key = broker::readKeyFromUrl(o.privateKey.empty() ? o.secretKey : o.privateKey);
  if (!key) return fail(key.status().message());
  boost::json::object claims;
  claims["sub"] = o.subject;
  if (!o.expiryTime.empty()) {
    auto secs = relativeSeconds(o.expiryTime);
    if (!secs) return fail("Invalid time '" + o.expiryTime + "'");
    claims["exp"] = (broker::nowMillis() / 1000) + *secs;
  }
  // A secret key signs HS256, whatever -a says (the key decides, as in jjwt).
  std::string alg = o.privateKey.empty() ? "HS256" : o.algorithm;
  auto token = broker::signToken(boost::json::serialize(claims), *key, alg);
  if (!token) return fail(token.status().message());
  std::cout << *token << "\n";
  return 0;
}

int showToken(const TokensOptions& o) {
  auto t = tokenInput(o);
  if (!t) return fail(kNoToken);
  auto d = broker::decodeToken(*t);
  if (!d) return fail(d.status().message());
  std::cout << d->headerJson << "\n---\n" << d->claimsJson << "\n";
  return 0;
}

int validateToken(const TokensOptions& o) {
  if (o.secretKey.empty() == o.publicKey.empty()) {
    return fail(notOneKey(o.secretKey.empty(), "--public-key"));
  }
  auto t = tokenInput(o);
  if (!t) return fail(kNoToken);
  auto key = broker::readKeyFromUrl(o.publicKey.empty() ? o.secretKey : o.publicKey);
  if (!key) return fail(key.status().message());
  auto d =
      broker::validateToken(*t, broker::TokenKey{*key, !o.publicKey.empty()}, broker::nowMillis());
  if (!d) return fail(d.status().message());
  std::cout << broker::claimsText(d->claimsJson) << "\n";
  return 0;
}

void addTokenSource(CLI::App* c, TokensOptions& o) {
  c->add_option("token", o.token, "The token string");
  c->add_option("-t,--token", o.token, "The token string (same as the argument)");
  c->add_flag("-i,--stdin", o.stdinToken, "Read token from standard input");
  c->add_option("-f,--token-file", o.tokenFile, "Read token from a file");
}

}  // namespace

std::function<int()> addTokensCommand(CLI::App& app) {
  auto o = std::make_shared<TokensOptions>();
  auto* tokens = app.add_subcommand("tokens", "Create and check JWT tokens (as `pulsar tokens`)");
  tokens->require_subcommand(1);

  auto* secret = tokens->add_subcommand("create-secret-key", "Create a new secret key");
  secret->add_option("-a,--signature-algorithm", o->secretAlg, "HS256");
  secret->add_option("-o,--output", o->output, "Write the secret key to a file instead of stdout");
  secret->add_flag("-b,--base64", o->base64, "Encode the key in base64");

  auto* pair =
      tokens->add_subcommand("create-key-pair", "Create a new pair of keys public/private");
  pair->add_option("-a,--signature-algorithm", o->pairAlg, "RS256 or ES256");
  pair->add_option("--output-private-key", o->privateKeyFile, "File where to write the private key")
      ->required();
  pair->add_option("--output-public-key", o->publicKeyFile, "File where to write the public key")
      ->required();

  auto* create = tokens->add_subcommand("create", "Create a new token");
  create->add_option("-a,--signature-algorithm", o->createAlg, "Algorithm of the private key");
  create->add_option("-s,--subject", o->subject, "The 'subject' or 'principal' of this token")
      ->required();
  create->add_option("-e,--expiry-time", o->expiryTime,
                     "Relative expiry time for the token (eg: 1h, 3d, 10y). Default: none");
  create->add_option("--sk,--secret-key", o->secretKey, "Secret key: data:, file:, etc.");
  create->add_option("--pk,--private-key", o->privateKey, "Private key: data:, file:, etc.");

  auto* show = tokens->add_subcommand("show", "Show the content of token");
  addTokenSource(show, *o);

  auto* validate = tokens->add_subcommand("validate", "Validate a token against a key");
  validate->add_option("-a,--signature-algorithm", o->validateAlg, "Algorithm of the public key");
  validate->add_option("--sk,--secret-key", o->secretKey, "Secret key: data:, file:, etc.");
  validate->add_option("--pk,--public-key", o->publicKey, "Public key: data:, file:, etc.");
  addTokenSource(validate, *o);

  return [=]() -> int {
    if (!tokens->parsed()) return -1;
    if (secret->parsed()) return o->algorithm = o->secretAlg, createSecretKey(*o);
    if (pair->parsed()) return o->algorithm = o->pairAlg, createKeyPair(*o);
    if (create->parsed()) return o->algorithm = o->createAlg, createToken(*o);
    if (show->parsed()) return showToken(*o);
    if (validate->parsed()) return validateToken(*o);
    return 1;
  };
}

}  // namespace magnetar::app
