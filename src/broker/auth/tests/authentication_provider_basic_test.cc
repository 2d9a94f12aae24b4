#include "broker/auth/internal/authentication_provider_basic.h"

#include <gtest/gtest.h>

#include "broker/auth/auth_token.h"

namespace magnetar::broker {
namespace {

// Vectors from `openssl passwd -apr1 -salt SALT PASSWORD` (an independent implementation).
TEST(AuthenticationProviderBasic, Apr1KnownVectors) {
  struct V {
    const char* password;
    const char* salt;
    const char* hash;
  };
  const V vectors[] = {
      {"aprpass", "saltsalt", "$apr1$saltsalt$bc5FE0MgRXNeJx79BzzAm."},
      {"x", "abc", "$apr1$abc$51YrpNiEtKAQp4coykJmu."},
      {"averyveryverylongpassword-over-16", "12345678", "$apr1$12345678$8DKUXkk4pQvkz7.BPuwte0"},
      // The salt is cut at 8 characters.
      {"secret", "xxxxxxxxyyy", "$apr1$xxxxxxxx$/mULyOsdWlXlIt5U99q7h1"},
  };
  for (const V& v : vectors) {
    auto h = apr1Crypt(v.password, v.salt);
    ASSERT_TRUE(h.isOk()) << h.status().message();
    EXPECT_EQ(*h, v.hash) << v.password;
    EXPECT_TRUE(verifyBasicPassword(v.password, v.hash));
    EXPECT_FALSE(verifyBasicPassword(std::string(v.password) + "!", v.hash));
  }
  EXPECT_FALSE(apr1Crypt("p", "$bad").isOk());
}

// DES crypt: commons-codec's UnixCrypt test vector and glibc/libxcrypt's output.
TEST(AuthenticationProviderBasic, DesCryptKnownVectors) {
  EXPECT_TRUE(verifyBasicPassword("secret", "xxWAum7tHdIUw"));
  EXPECT_FALSE(verifyBasicPassword("Secret", "xxWAum7tHdIUw"));
  EXPECT_TRUE(verifyBasicPassword("despass", "ab2RmhfeGz9J6"));
  // Only the first 8 characters count (as UnixCrypt).
  EXPECT_TRUE(verifyBasicPassword("despassX", "abIr308D/PFqA"));
  EXPECT_TRUE(verifyBasicPassword("despassXXX", "abIr308D/PFqA"));
}

// A NUL byte is key byte 0 and the bytes after it count, as UnixCrypt keys "ab\0cd" (accepted
// by Apache Pulsar, tests/differential/test_auth_basic.py); crypt(3) alone would key "ab".
TEST(AuthenticationProviderBasic, DesCryptKeepsBytesAfterNul) {
  const std::string withNul("ab\0cd", 5);
  EXPECT_TRUE(verifyBasicPassword(withNul, "xxGJcYGy81PmQ"));
  EXPECT_TRUE(verifyBasicPassword(withNul + std::string("\0\0\0tail", 7), "xxGJcYGy81PmQ"));
  EXPECT_FALSE(verifyBasicPassword("ab", "xxGJcYGy81PmQ"));
  EXPECT_TRUE(verifyBasicPassword("ab", "xxtgEQpXoxEO."));
  EXPECT_FALSE(verifyBasicPassword(withNul, "xxtgEQpXoxEO."));
}

TEST(AuthenticationProviderBasic, FormatsPulsarDoesNotCheckNeverMatch) {
  // Pulsar passes "$1", "$2", "$5", "$6" as a DES salt, which commons-codec rejects.
  EXPECT_FALSE(verifyBasicPassword("secret", "$1$saltsalt$qjXMvbEw8oaL.CzflDugX/"));
  EXPECT_FALSE(verifyBasicPassword("secret",
                                   "$2y$05$LflWDnwGDq6bAbX7MGdGzeVYRO.1SZmQ3xDGc8SbAJx9e5d0W3RR."));
  EXPECT_FALSE(verifyBasicPassword("secret", "$apr1$saltsalt$extra$bc5FE0MgRXNeJx79BzzAm."));
  EXPECT_FALSE(verifyBasicPassword("secret", "x"));
  EXPECT_FALSE(verifyBasicPassword("", ""));
}

TEST(AuthenticationProviderBasic, ConfLinesAsPulsarSplitsThem) {
  auto users = parseBasicAuthConf("alice:xxWAum7tHdIUw\r\nbob:$apr1$abc$51YrpNiEtKAQp4coykJmu.\n");
  ASSERT_TRUE(users.isOk());
  EXPECT_EQ(users->size(), 2u);
  EXPECT_EQ(users->at("bob"), "$apr1$abc$51YrpNiEtKAQp4coykJmu.");
  // A trailing ':' is dropped by Java's split; a blank line or three fields are invalid.
  EXPECT_TRUE(parseBasicAuthConf("alice:hash:").isOk());
  for (const char* bad : {"alice:hash\n\nbob:hash", "alice:a:b", "alice", "alice:"}) {
    auto r = parseBasicAuthConf(bad);
    ASSERT_FALSE(r.isOk()) << bad;
    EXPECT_EQ(r.status().message(), "The format of the password auth conf file is invalid");
  }
}

TEST(AuthenticationProviderBasic, ConfFromDataUrlOrBase64AndClearErrors) {
  const std::string text = "alice:xxWAum7tHdIUw\n";
  auto fromB64 = readBasicAuthConf(base64Encode(text));
  ASSERT_TRUE(fromB64.isOk());
  EXPECT_EQ(*fromB64, text);
  auto fromData = readBasicAuthConf("data:;base64," + base64Encode(text));
  ASSERT_TRUE(fromData.isOk());
  EXPECT_EQ(*fromData, text);
  EXPECT_EQ(readBasicAuthConf("").status().message(), "No basic authentication config provided");
  EXPECT_EQ(readBasicAuthConf("not a file: nor base64").status().message(), "Not supported config");
}

TEST(AuthenticationProviderBasic, AuthenticatesCommandAndHttpData) {
  AuthenticationOptions o;
  o.authenticationEnabled = true;
  o.authenticationProviders = {std::string(kAuthenticationProviderBasicClass)};
  o.basicAuthConf = base64Encode("alice:xxWAum7tHdIUw\nbob:$apr1$abc$51YrpNiEtKAQp4coykJmu.\n");
  auto s = AuthenticationService::create(o);
  ASSERT_TRUE(s.isOk()) << s.status().message();
  const AuthenticationProvider* p = (*s)->provider("basic");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->providerName(), "AuthenticationProviderBasic");

  std::string reason;
  AuthenticationData cmd;
  cmd.commandData = "alice:secret";
  auto r = p->authenticate(cmd, &reason);
  ASSERT_TRUE(r.isOk()) << r.status().message();
  EXPECT_EQ(r->role, "alice");
  cmd.commandData = "bob:x";
  EXPECT_EQ(p->authenticate(cmd, &reason)->role, "bob");
  cmd.commandData = "bob:y";
  EXPECT_EQ(p->authenticate(cmd, &reason).status().message(), "Unknown user or invalid password");
  cmd.commandData = "carol:secret";
  EXPECT_EQ(p->authenticate(cmd, &reason).status().message(), "Unknown user or invalid password");
  cmd.commandData = "alice:sec:ret";
  EXPECT_EQ(p->authenticate(cmd, &reason).status().message(), "Base64 decoded params are invalid");

  auto http = (*s)->authenticateHttp("Basic " + base64Encode("alice:secret"), "");
  ASSERT_TRUE(http.isOk()) << http.status().message();
  EXPECT_EQ(http->role, "alice");
  EXPECT_TRUE((*s)->authenticateHttp("basic " + base64Encode("bob:x"), "").isOk());
  EXPECT_EQ((*s)->authenticateHttp("Bearer abc", "").status().message(),
            "Authentication token has to be started with \"Basic \"");
  EXPECT_EQ((*s)->authenticateHttp("Basic  " + base64Encode("bob:x"), "").status().message(),
            "Base64 encoded token is not found");
  EXPECT_FALSE((*s)->authenticateHttp(std::nullopt, "").isOk());
}

TEST(AuthenticationProviderBasic, BadConfStopsTheService) {
  AuthenticationOptions o;
  o.authenticationEnabled = true;
  o.authenticationProviders = {std::string(kAuthenticationProviderBasicClass)};
  EXPECT_EQ(AuthenticationService::create(o).status().message(),
            "No basic authentication config provided");
  o.basicAuthConf = base64Encode("alice\n");
  EXPECT_EQ(AuthenticationService::create(o).status().message(),
            "The format of the password auth conf file is invalid");
}

}  // namespace
}  // namespace magnetar::broker
