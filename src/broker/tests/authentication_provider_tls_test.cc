#include "broker/authentication_provider_tls.h"

#include <gtest/gtest.h>

namespace magnetar::broker {
namespace {

TEST(AuthenticationProviderTls, RoleIsTheCommonName) {
  auto r = tlsRoleOf(true, std::string("tls-client"));
  ASSERT_TRUE(r.isOk());
  EXPECT_EQ(*r, "tls-client");
}

TEST(AuthenticationProviderTls, PulsarsMessagesWithoutACertificateOrCn) {
  auto plain = tlsRoleOf(false, std::nullopt);
  ASSERT_FALSE(plain.isOk());
  EXPECT_EQ(plain.status().code(), StatusCode::kNotAllowed);
  EXPECT_EQ(plain.status().message(), "Failed to get TLS certificates from client");
  EXPECT_EQ(tlsRoleOf(true, std::nullopt).status().message(),
            "Failed to get TLS certificates from client");
  EXPECT_EQ(tlsRoleOf(true, std::string()).status().message(),
            "Client unable to authenticate with TLS certificate");
}

}  // namespace
}  // namespace magnetar::broker
