// TLS for our own event loops: TlsContext (the server's certificates and rules, reloaded when
// the files change) and TlsSession (one connection's OpenSSL state over memory BIOs, so the
// socket stays with net::Connection: ciphertext in from read(), ciphertext out with writev).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_annotations.h"
#include "setting_defaults.h"

struct ssl_ctx_st;
struct ssl_st;
struct bio_st;

namespace magnetar::net {

// TLS failures, each a label value of magnetar_tls_errors_total{error}.
enum class TlsError {
  kHandshakeFailed,    // not TLS (plaintext, garbage) or no common protocol/cipher; closed
  kUntrustedCert,      // client certificate missing (when required) or not signed by a trusted CA
  kHandshakeTimeout,   // handshake not finished within kTlsHandshakeTimeout; closed
  kCertRefreshFailed,  // changed certificate files that could not be loaded (old ones kept)
  kCount
};

// Process-wide TLS error counters; bumped on any thread, read at scrape time.
struct TlsErrorStats {
  static inline std::array<std::atomic<uint64_t>, static_cast<size_t>(TlsError::kCount)> counts{};
  static void record(TlsError e) {
    counts[static_cast<size_t>(e)].fetch_add(1, std::memory_order_relaxed);
  }
  static uint64_t get(TlsError e) { return counts[static_cast<size_t>(e)].load(); }
  // The metric label value ("handshake_failed", "untrusted_cert", ...).
  static const char* label(TlsError e);
};

// A server handshake that has not finished after this long closes the connection (Netty's
// SslHandler default handshakeTimeoutMillis, 10 s, which Pulsar's TLS ports use).
inline constexpr auto kTlsHandshakeTimeout = std::chrono::seconds(10);

// The broker's TLS settings (Pulsar's tls* keys); each default is its key's in settings.def
// (setting_defaults.h).
struct TlsOptions {
  // tlsCertificateFilePath (PEM, leaf first, then chain), tlsKeyFilePath (PEM, unencrypted),
  // tlsTrustCertsFilePath (PEM CAs; "" = the system's CAs).
  std::string certificateFilePath{setting_defaults::tlsCertificateFilePath};
  std::string keyFilePath{setting_defaults::tlsKeyFilePath};
  std::string trustCertsFilePath{setting_defaults::tlsTrustCertsFilePath};
  // tlsAllowInsecureConnection: accept unverifiable client certificates.
  bool allowInsecureConnection = setting_defaults::tlsAllowInsecureConnection;
  // tlsRequireTrustedClientCertOnConnect: no (trusted) client certificate is refused.
  bool requireTrustedClientCertOnConnect = setting_defaults::tlsRequireTrustedClientCertOnConnect;
  // tlsProtocols (TLSv1.3, TLSv1.2, ...) and tlsCiphers (IANA names, as Java's); settings.def's
  // default, empty: OpenSSL's.
  std::vector<std::string> protocols;
  std::vector<std::string> ciphers;
  // tlsCertRefreshCheckDurationSec; 0 = every accept.
  int certRefreshCheckDurationSec = setting_defaults::tlsCertRefreshCheckDurationSec;
};

// Owns the current SSL_CTX. current() re-reads the files when one changed (mtime or size),
// checked at most every certRefreshCheckDurationSec, so new connections use new certificates
// without a restart (Pulsar's SslContextAutoRefreshBuilder). Thread: any (internally locked).
class TlsContext {
 public:
  // Loads the files. Errors: kInvalidArgument naming the setting and file for an unreadable or
  // unparsable file, an expired or not-yet-valid certificate, a key that does not match, an
  // unknown protocol or cipher name.
  static Result<std::shared_ptr<TlsContext>> create(const TlsOptions& options);

  // The context for a new connection (after a refresh check, see above).
  std::shared_ptr<ssl_ctx_st> current();
  const TlsOptions& options() const { return options_; }
  // Times a changed set of files was loaded successfully.
  uint64_t reloads() const { return reloads_.load(); }

 private:
  explicit TlsContext(TlsOptions options) : options_(std::move(options)) {}
  std::string fileStamp() const;  // mtimes and sizes of the three files

  TlsOptions options_;
  Mutex mu_;
  std::shared_ptr<ssl_ctx_st> ctx_ GUARDED_BY(mu_);
  std::string stamp_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point lastCheck_ GUARDED_BY(mu_);
  std::atomic<uint64_t> reloads_{0};
};

// Builds an SSL_CTX from options (server side). Errors as TlsContext::create.
Result<std::shared_ptr<ssl_ctx_st>> newServerSslCtx(const TlsOptions& options);

// A client SSL_CTX: the broker's certificate must verify against trustCertsFilePath ("" = the
// system's CAs) unless allowInsecureConnection; certificateFilePath/keyFilePath, when set, are
// the client's own (mTLS). Host names are not checked. Errors: kInvalidArgument naming the file.
Result<std::shared_ptr<ssl_ctx_st>> newClientSslCtx(const TlsOptions& options);

// One TLS connection over memory BIOs. Thread: the owner's (a connection's loop), not shared.
class TlsSession {
 public:
  // client=false: the server side (the broker). Takes a reference on ctx. A client's
  // `verifyHost` (non-empty): sent as SNI, and the handshake fails unless the server's
  // certificate names that host (SAN DNS/IP or CN, OpenSSL's X509_check_host rules); not
  // checked when the context verifies nothing (allowInsecureConnection).
  explicit TlsSession(const std::shared_ptr<ssl_ctx_st>& ctx, bool client = false,
                      const std::string& verifyHost = {});
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Takes `len` bytes of ciphertext from the peer; appends decrypted bytes to `plain` and bytes
  // to send to the peer (handshake, alerts) to `out`. Drives the handshake until it is done.
  // Errors: kInvalidArgument with OpenSSL's reason; `error()` tells which TlsError it was.
  Status feed(const uint8_t* data, size_t len, std::string& plain, std::string& out);
  // Starts the handshake (a client's ClientHello into `out`). The server side waits for feed().
  Status startHandshake(std::string& out);
  // Encrypts `n` buffers in one pass (one SSL_write of all of them gathered, records of up to
  // 16 KiB) and appends the ciphertext to `out`. REQUIRES: handshakeDone().
  Status encrypt(const std::pair<const uint8_t*, size_t>* bufs, size_t n, std::string& out);

  bool handshakeDone() const { return handshakeDone_; }
  bool isClient() const { return client_; }
  TlsError error() const { return error_; }
  // The peer certificate's subject CN once the handshake is done and the peer sent a
  // certificate the context accepted (trusted, or any with allowInsecureConnection).
  std::optional<std::string> peerCommonName() const;
  // Negotiated protocol ("TLSv1.3") after the handshake.
  std::string protocol() const;

 private:
  Status fail(TlsError e, const std::string& what);
  void drainOut(std::string& out);

  ssl_st* ssl_ = nullptr;
  bio_st* rbio_ = nullptr;  // owned by ssl_
  bio_st* wbio_ = nullptr;  // owned by ssl_
  bool handshakeDone_ = false;
  bool client_ = false;
  TlsError error_ = TlsError::kHandshakeFailed;
  std::string gather_;  // encrypt()'s staging buffer, reused
};

}  // namespace magnetar::net
