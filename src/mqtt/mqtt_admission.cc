// MqttConnection's admission at CONNECT: the mqttMaxConnections limit and the TLS client
// certificate as credentials (AuthenticationProviderTls). The rest of CONNECT is in
// mqtt_connection.cc.
#include "base/dcheck.h"
#include "base/logging.h"
#include "broker/auth/authentication_provider_tls.h"
#include "broker/service/broker_service.h"
#include "mqtt/mqtt_connection.h"
#include "mqtt/mqtt_service.h"
#include "mqtt/mqtt_stats.h"

namespace magnetar::mqtt {

bool MqttConnection::admit() {
  MAGNETAR_DCHECK_ON(loop());
  if (admitted_ || service_.admitSession()) {
    admitted_ = true;
    return true;
  }
  MqttStats::refuse(MqttRefusal::kMaxConnections);
  const std::string why = "mqttMaxConnections (" +
                          std::to_string(service_.options().maxConnections) +
                          ") MQTT connections are open";
  MLOG_WARN("[{}] MQTT connection refused: {}", peerAddress(), why);
  if (version_ == ProtocolVersion::kV5) {
    Connack a{false, reason::kQuotaExceeded, {}};
    a.properties.strings[PropertyId::kReasonString] = why;
    send(a);
  } else {
    send(Connack{false, reason::kV3ServerUnavailable, {}});
  }
  return false;
}

void MqttConnection::releaseAdmission() {
  if (!admitted_) return;
  admitted_ = false;
  service_.releaseSession();
}

// Pulsar's AuthenticationProviderTls on this connection: the certificate's CN is the role.
// Applies when the provider is configured and the client sent a certificate over mqtt+ssl (the
// handshake verified it against tlsTrustCertsFilePath unless tlsAllowInsecureConnection).
std::optional<Result<std::string>> MqttConnection::certificateRole() {
  MAGNETAR_DCHECK_ON(loop());
  const broker::AuthenticationProvider* p =
      service_.broker().authentication().provider(std::string(broker::kAuthMethodTls));
  const auto* tls = dynamic_cast<const broker::AuthenticationProviderTls*>(p);
  const std::optional<std::string> cn = peerCommonName();
  if (!tls || !isTls() || !cn) return std::nullopt;
  std::string reason;
  auto r = tls->authenticateConnection(true, cn, &reason);
  if (!r.isOk()) {
    broker::AuthenticationMetrics::failure(p->providerName(), p->authMethodName(), reason);
    return Result<std::string>(r.status());
  }
  broker::AuthenticationMetrics::success(p->providerName(), p->authMethodName());
  return Result<std::string>(r->role);
}

}  // namespace magnetar::mqtt
