#include "broker/auth/auth_token.h"

#include <gtest/gtest.h>

#include "broker/auth/authentication.h"

namespace magnetar::broker {
namespace {

TEST(AuthToken, SecretKeyRoundTripAndWrongKey) {
  auto key = createSecretKey();
  ASSERT_TRUE(key.isOk());
  EXPECT_EQ(key->size(), 32u);
  auto token = signToken(R"({"sub":"admin"})", *key, "HS256");
  ASSERT_TRUE(token.isOk());
  auto ok = validateToken(*token, TokenKey{*key, false}, nowMillis());
  ASSERT_TRUE(ok.isOk()) << ok.status().message();
  EXPECT_EQ(claimsText(ok->claimsJson), "{sub=admin}");
  auto other = createSecretKey();
  auto bad = validateToken(*token, TokenKey{*other, false}, nowMillis());
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("JWT signature does not match"), std::string::npos);
}

TEST(AuthToken, ExpiredAndUnsigned) {
  auto key = createSecretKey();
  auto token = signToken(R"({"sub":"a","exp":1000})", *key, "HS256");
  auto r = validateToken(*token, TokenKey{*key, false}, 2000 * 1000);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().message().rfind("JWT expired at 1970-01-01T00:16:40Z.", 0), 0u)
      << r.status().message();
  // {"alg":"none"}.{"sub":"a"}.
  auto none = validateToken("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.", TokenKey{*key, false}, 0);
  ASSERT_FALSE(none.isOk());
  EXPECT_EQ(none.status().message(), "Unsigned Claims JWTs are not supported.");
  auto malformed = validateToken("abc", TokenKey{*key, false}, 0);
  EXPECT_EQ(malformed.status().message(),
            "JWT strings must contain exactly 2 period characters. Found: 0");
}

TEST(AuthToken, KeyPairsAndAlgorithmConfusion) {
  for (const char* alg : {"RS256", "ES256"}) {
    auto pair = createKeyPair(alg);
    ASSERT_TRUE(pair.isOk());
    auto token = signToken(R"({"sub":"bob"})", pair->privateKeyDer, alg);
    ASSERT_TRUE(token.isOk()) << token.status().message();
    EXPECT_TRUE(validateToken(*token, TokenKey{pair->publicKeyDer, true}, nowMillis()).isOk())
        << alg;
    // An HS256 token signed with the public key's bytes must not pass as valid.
    auto confused = signToken(R"({"sub":"bob"})", pair->publicKeyDer, "HS256");
    ASSERT_TRUE(confused.isOk());
    EXPECT_FALSE(validateToken(*confused, TokenKey{pair->publicKeyDer, true}, nowMillis()).isOk());
  }
}

TEST(AuthToken, ReadKeyFromUrlForms) {
  EXPECT_EQ(*readKeyFromUrl("data:;base64,aGVsbG8="), "hello");
  EXPECT_EQ(*readKeyFromUrl("data:raw"), "raw");
  EXPECT_FALSE(readKeyFromUrl("file:///nonexistent/key").isOk());
}

TEST(AuthenticationProviderToken, RoleClaimAndAudience) {
  auto key = createSecretKey();
  TokenProviderOptions o;
  o.tokenSecretKey = "data:;base64," + base64Encode(*key);
  o.tokenAuthClaim = "role";
  o.tokenAudienceClaim = "aud";
  o.tokenAudience = "broker-1";
  auto p = AuthenticationProviderToken::create(o);
  ASSERT_TRUE(p.isOk()) << p.status().message();
  std::string reason;
  AuthenticationData d;
  d.commandData = *signToken(R"({"role":"alice","aud":["x","broker-1"]})", *key, "HS256");
  auto r = (*p)->authenticate(d, &reason);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->role, "alice");
  d.commandData = *signToken(R"({"role":"alice","aud":"other"})", *key, "HS256");
  r = (*p)->authenticate(d, &reason);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(reason, "INVALID_AUDIENCES");
  EXPECT_EQ(r.status().message(), "Audiences in token: [other] not contains this broker: broker-1");
  AuthenticationData http;
  http.httpAuthorization = "Basic abc";
  r = (*p)->authenticate(http, &reason);
  EXPECT_EQ(r.status().message(), "Invalid HTTP Authorization header");
}

}  // namespace
}  // namespace magnetar::broker
