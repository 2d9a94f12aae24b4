#include "broker/auth/authentication_provider_tls.h"

#include <gtest/gtest.h>

namespace magnetar::broker {
namespace {

TEST(AuthenticationProviderTls, RoleIsTheCommonName) {
  auto r = tlsRoleOf(true, std::string("tls-client"));
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(*r, "tls-client");
}

TEST(AuthenticationProviderTls, PulsarsMessagesAndReasonsWithoutACertificateOrCn) {
  std::string reason;
  auto plain = tlsRoleOf(false, std::nullopt, &reason);
  ASSERT_FALSE(plain.isOk());
  EXPECT_EQ(plain.status().code(), StatusCode::kNotAllowed);
  EXPECT_EQ(plain.status().message(), "Client unable to authenticate with TLS certificate");
  EXPECT_EQ(reason, "INVALID_CN");
  EXPECT_EQ(tlsRoleOf(true, std::nullopt, &reason).status().message(),
            "Failed to get TLS certificates from client");
  EXPECT_EQ(reason, "INVALID_CERTS");
  EXPECT_EQ(tlsRoleOf(true, std::string(), &reason).status().message(),
            "Client unable to authenticate with TLS certificate");
  EXPECT_EQ(reason, "INVALID_CN");
}

TEST(AuthenticationProviderTls, LoadedByClassNameAndUsedForHttpsWithACertificate) {
  AuthenticationOptions o;
  o.authenticationEnabled = true;
  o.authenticationProviders = {std::string(kAuthenticationProviderTlsClass)};
  auto s = AuthenticationService::create(o);
  ASSERT_TRUE(s.isOk()) << s.status().message();
  const AuthenticationProvider* p = (*s)->provider("tls");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->providerName(), "AuthenticationProviderTls");

  const auto* tls = dynamic_cast<const AuthenticationProviderTls*>(p);
  ASSERT_NE(tls, nullptr);
  std::string reason;
  auto r = tls->authenticateConnection(true, std::string("app-1"), &reason);
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(r->role, "app-1");
  EXPECT_FALSE(r->expiresAtMs.has_value());
  EXPECT_FALSE(tls->authenticateConnection(true, std::nullopt, &reason).isOk());
  EXPECT_EQ(reason, "INVALID_CERTS");

  AuthenticationData d;
  d.peerCommonName = "app-2";
  auto viaData = p->authenticate(d, &reason);
  ASSERT_TRUE(viaData.isOk());
  EXPECT_EQ(viaData->role, "app-2");
  d.peerCommonName.clear();
  EXPECT_FALSE(p->authenticate(d, &reason).isOk());
  EXPECT_EQ(reason, "INVALID_CN");

  auto https = (*s)->authenticateHttp(std::nullopt, "admin-cn");
  ASSERT_TRUE(https.isOk());
  EXPECT_EQ(https->role, "admin-cn");
  // No certificate and no header: refused (no anonymous role).
  EXPECT_FALSE((*s)->authenticateHttp(std::nullopt, "").isOk());
}

TEST(AuthenticationProviderTls, UnknownProviderClassIsRefused) {
  AuthenticationOptions o;
  o.authenticationEnabled = true;
  o.authenticationProviders = {"org.example.AuthenticationProviderTlsX"};
  EXPECT_FALSE(AuthenticationService::create(o).isOk());
}

}  // namespace
}  // namespace magnetar::broker
