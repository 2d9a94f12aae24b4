#include "net/tls.h"

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "base/logging.h"
#include "net/tls_peer.h"

namespace magnetar::net {

namespace {

// The oldest OpenSSL error on this thread's queue as text; clears the queue.
std::string takeSslError() {
  unsigned long e = ERR_get_error();
  std::string msg;
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    msg = buf;
  }
  ERR_clear_error();
  return msg.empty() ? "unknown error" : msg;
}

Status fileError(const char* setting, const std::string& path, const std::string& why) {
  return Status::invalidArgument(fmt::format("{} '{}': {}", setting, path, why));
}

// Readable as a file? (OpenSSL's messages for a missing file are cryptic.)
Status checkReadable(const char* setting, const std::string& path) {
  if (path.empty()) return Status::invalidArgument(fmt::format("{} is not set", setting));
  std::ifstream in(path, std::ios::binary);
  if (!in) return fileError(setting, path, "cannot read the file");
  return Status::ok();
}

int protocolVersion(const std::string& name) {
  if (name == "TLSv1.3") return TLS1_3_VERSION;
  if (name == "TLSv1.2") return TLS1_2_VERSION;
  if (name == "TLSv1.1") return TLS1_1_VERSION;
  if (name == "TLSv1") return TLS1_VERSION;
  return 0;
}

Status applyProtocols(SSL_CTX* ctx, const std::vector<std::string>& protocols) {
  if (protocols.empty()) return Status::ok();
  int lo = 0;
  int hi = 0;
  for (const auto& p : protocols) {
    int v = protocolVersion(p);
    if (v == 0) {
      return Status::invalidArgument(
          fmt::format("tlsProtocols: unknown protocol '{}' (TLSv1.3, TLSv1.2, TLSv1.1, TLSv1)", p));
    }
    lo = lo == 0 ? v : std::min(lo, v);
    hi = std::max(hi, v);
  }
  SSL_CTX_set_min_proto_version(ctx, lo);
  SSL_CTX_set_max_proto_version(ctx, hi);
  return Status::ok();
}

// tlsCiphers holds IANA names (Java's, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); OpenSSL's
// own names are accepted too. TLS 1.3 suites and older ciphers are configured separately.
Status applyCiphers(SSL_CTX* ctx, const std::vector<std::string>& ciphers) {
  if (ciphers.empty()) return Status::ok();
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> all(SSL_CTX_new(TLS_method()), SSL_CTX_free);
  SSL_CTX_set_cipher_list(all.get(), "ALL:COMPLEMENTOFALL");
  SSL_CTX_set_ciphersuites(all.get(),
                           "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                           "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_CCM_SHA256:"
                           "TLS_AES_128_CCM_8_SHA256");
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(all.get()), SSL_free);
  STACK_OF(SSL_CIPHER)* known = SSL_get_ciphers(ssl.get());
  std::string tls12;
  std::string tls13;
  for (const auto& name : ciphers) {
    const SSL_CIPHER* found = nullptr;
    for (int i = 0; known && i < sk_SSL_CIPHER_num(known); ++i) {
      const SSL_CIPHER* c = sk_SSL_CIPHER_value(known, i);
      const char* std = SSL_CIPHER_standard_name(c);
      if ((std && name == std) || name == SSL_CIPHER_get_name(c)) {
        found = c;
        break;
      }
    }
    if (!found)
      return Status::invalidArgument(fmt::format("tlsCiphers: unknown cipher '{}'", name));
    // OpenSSL names TLS 1.3 suites TLS_*, older ciphers with dashes (ECDHE-RSA-...).
    std::string_view osslName = SSL_CIPHER_get_name(found);
    std::string& list = osslName.rfind("TLS_", 0) == 0 ? tls13 : tls12;
    if (!list.empty()) list += ':';
    list += SSL_CIPHER_get_name(found);
  }
  ERR_clear_error();
  if (!tls12.empty() && SSL_CTX_set_cipher_list(ctx, tls12.c_str()) != 1) {
    return Status::invalidArgument("tlsCiphers: " + takeSslError());
  }
  if (SSL_CTX_set_ciphersuites(ctx, tls13.c_str()) != 1) {
    return Status::invalidArgument("tlsCiphers: " + takeSslError());
  }
  // Only TLS 1.3 suites listed: older protocols have nothing to negotiate with.
  if (tls12.empty()) SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  if (tls13.empty() && SSL_CTX_get_min_proto_version(ctx) != TLS1_3_VERSION) {
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
  }
  return Status::ok();
}

std::string asn1Time(const ASN1_TIME* t) {
  std::unique_ptr<BIO, decltype(&BIO_free)> b(BIO_new(BIO_s_mem()), BIO_free);
  ASN1_TIME_print(b.get(), t);
  char* p = nullptr;
  long n = BIO_get_mem_data(b.get(), &p);
  return std::string(p, static_cast<size_t>(n));
}

// allowInsecureConnection: any client certificate is accepted (Pulsar's insecure trust manager).
int acceptAnyCertificate(int /*preverify*/, X509_STORE_CTX* /*ctx*/) { return 1; }

std::string statStamp(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return "-;";
  return fmt::format("{}.{}:{};", st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_size);
}

}  // namespace

const char* TlsErrorStats::label(TlsError e) {
  // Indexed by TlsError, as `counts`.
  static constexpr std::array<const char*, static_cast<size_t>(TlsError::kCount)> kLabels = {
      "handshake_failed", "untrusted_cert", "handshake_timeout", "cert_refresh_failed"};
  static_assert(kLabels.back() != nullptr, "a TlsError without a label");
  auto i = static_cast<size_t>(e);
  return i < kLabels.size() ? kLabels[i] : "other";
}

Result<std::shared_ptr<ssl_ctx_st>> newServerSslCtx(const TlsOptions& o) {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()), SSL_CTX_free);
  if (!ctx) return Status::internal("SSL_CTX_new: " + takeSslError());
  SSL_CTX* c = ctx.get();
  SSL_CTX_set_options(
      c, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (Status s = applyProtocols(c, o.protocols); !s) return s;
  if (Status s = applyCiphers(c, o.ciphers); !s) return s;

  if (Status s = checkReadable("tlsCertificateFilePath", o.certificateFilePath); !s) return s;
  if (SSL_CTX_use_certificate_chain_file(c, o.certificateFilePath.c_str()) != 1) {
    return fileError("tlsCertificateFilePath", o.certificateFilePath,
                     "not a PEM certificate: " + takeSslError());
  }
  X509* cert = SSL_CTX_get0_certificate(c);
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    return fileError("tlsCertificateFilePath", o.certificateFilePath,
                     "the certificate expired on " + asn1Time(X509_get0_notAfter(cert)));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    return fileError("tlsCertificateFilePath", o.certificateFilePath,
                     "the certificate is not valid before " + asn1Time(X509_get0_notBefore(cert)));
  }
  if (Status s = checkReadable("tlsKeyFilePath", o.keyFilePath); !s) return s;
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(nullptr, EVP_PKEY_free);
  if (FILE* fp = std::fopen(o.keyFilePath.c_str(), "r")) {
    key.reset(PEM_read_PrivateKey(fp, nullptr, nullptr, nullptr));
    std::fclose(fp);
  }
  if (!key) {
    return fileError("tlsKeyFilePath", o.keyFilePath, "not a PEM private key: " + takeSslError());
  }
  if (X509_check_private_key(cert, key.get()) != 1) {
    ERR_clear_error();
    return fileError("tlsKeyFilePath", o.keyFilePath,
                     "the key does not match tlsCertificateFilePath " + o.certificateFilePath);
  }
  if (SSL_CTX_use_PrivateKey(c, key.get()) != 1) {
    return fileError("tlsKeyFilePath", o.keyFilePath, takeSslError());
  }
  if (!o.trustCertsFilePath.empty()) {
    if (Status s = checkReadable("tlsTrustCertsFilePath", o.trustCertsFilePath); !s) return s;
    if (SSL_CTX_load_verify_locations(c, o.trustCertsFilePath.c_str(), nullptr) != 1) {
      return fileError("tlsTrustCertsFilePath", o.trustCertsFilePath,
                       "not PEM certificates: " + takeSslError());
    }
    if (STACK_OF(X509_NAME)* cas = SSL_load_client_CA_file(o.trustCertsFilePath.c_str())) {
      SSL_CTX_set_client_CA_list(c, cas);
    }
  } else {
    SSL_CTX_set_default_verify_paths(c);
  }
  // Client certificates are asked for always (Netty's ClientAuth.OPTIONAL) and required with
  // tlsRequireTrustedClientCertOnConnect (REQUIRE); a presented one must verify unless insecure.
  int mode = SSL_VERIFY_PEER;
  if (o.requireTrustedClientCertOnConnect) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  SSL_CTX_set_verify(c, mode, o.allowInsecureConnection ? acceptAnyCertificate : nullptr);
  static const unsigned char kSessionContext[] = "magnetar";
  SSL_CTX_set_session_id_context(c, kSessionContext, sizeof(kSessionContext) - 1);
  ERR_clear_error();
  return ctx;
}

Result<std::shared_ptr<ssl_ctx_st>> newClientSslCtx(const TlsOptions& o) {
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (!ctx) return Status::internal("SSL_CTX_new: " + takeSslError());
  SSL_CTX* c = ctx.get();
  if (Status s = applyProtocols(c, o.protocols); !s) return s;
  if (Status s = applyCiphers(c, o.ciphers); !s) return s;
  if (!o.trustCertsFilePath.empty()) {
    if (SSL_CTX_load_verify_locations(c, o.trustCertsFilePath.c_str(), nullptr) != 1) {
      return fileError("tlsTrustCertsFilePath", o.trustCertsFilePath, takeSslError());
    }
  } else {
    SSL_CTX_set_default_verify_paths(c);
  }
  SSL_CTX_set_verify(c, o.allowInsecureConnection ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, nullptr);
  if (!o.certificateFilePath.empty()) {
    if (SSL_CTX_use_certificate_chain_file(c, o.certificateFilePath.c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(c, o.keyFilePath.c_str(), SSL_FILETYPE_PEM) != 1) {
      return fileError("tlsCertificateFilePath", o.certificateFilePath, takeSslError());
    }
  }
  ERR_clear_error();
  return ctx;
}

Result<std::shared_ptr<TlsContext>> TlsContext::create(const TlsOptions& options) {
  std::shared_ptr<TlsContext> t(new TlsContext(options));
  auto ctx = newServerSslCtx(options);
  if (!ctx.isOk()) return ctx.status();
  MutexLock lock(t->mu_);
  t->ctx_ = std::move(*ctx);
  t->stamp_ = t->fileStamp();
  t->lastCheck_ = std::chrono::steady_clock::now();
  return t;
}

std::string TlsContext::fileStamp() const {
  return statStamp(options_.certificateFilePath) + statStamp(options_.keyFilePath) +
         statStamp(options_.trustCertsFilePath);
}

std::shared_ptr<ssl_ctx_st> TlsContext::current() {
  MutexLock lock(mu_);
  auto now = std::chrono::steady_clock::now();
  if (now - lastCheck_ >= std::chrono::seconds(options_.certRefreshCheckDurationSec)) {
    lastCheck_ = now;
    std::string stamp = fileStamp();
    if (stamp != stamp_) {
      stamp_ = stamp;  // a failed load is retried when the files change again
      auto fresh = newServerSslCtx(options_);
      if (fresh.isOk()) {
        ctx_ = std::move(*fresh);
        reloads_.fetch_add(1);
        MLOG_INFO("TLS certificates reloaded from {}", options_.certificateFilePath);
      } else {
        TlsErrorStats::record(TlsError::kCertRefreshFailed);
        MLOG_WARN("TLS certificates changed but cannot be loaded, keeping the old ones: {}",
                  fresh.status().message());
      }
    }
  }
  return ctx_;
}

TlsSession::TlsSession(const std::shared_ptr<ssl_ctx_st>& ctx, bool client,
                       const std::string& verifyHost)
    : client_(client) {
  ssl_ = SSL_new(ctx.get());
  rbio_ = BIO_new(BIO_s_mem());
  wbio_ = BIO_new(BIO_s_mem());
  BIO_set_mem_eof_return(rbio_, -1);  // an empty input is "want more", not EOF
  SSL_set_bio(ssl_, rbio_, wbio_);
  if (client) {
    SSL_set_connect_state(ssl_);
    if (!verifyHost.empty()) {
      SSL_set_tlsext_host_name(ssl_, verifyHost.c_str());
      SSL_set1_host(ssl_, verifyHost.c_str());  // checked with the chain (not when insecure)
    }
  } else {
    SSL_set_accept_state(ssl_);
  }
}

TlsSession::~TlsSession() { SSL_free(ssl_); }

Status TlsSession::fail(TlsError e, const std::string& what) {
  error_ = e;
  return Status::invalidArgument(what);
}

void TlsSession::drainOut(std::string& out) {
  size_t n = BIO_ctrl_pending(wbio_);
  if (n == 0) return;
  size_t old = out.size();
  out.resize(old + n);
  int r = BIO_read(wbio_, out.data() + old, static_cast<int>(n));
  out.resize(old + static_cast<size_t>(std::max(r, 0)));
}

Status TlsSession::startHandshake(std::string& out) {
  int r = SSL_do_handshake(ssl_);
  if (r == 1) handshakeDone_ = true;
  int err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, r);
  drainOut(out);
  if (err != SSL_ERROR_NONE && err != SSL_ERROR_WANT_READ) {
    return fail(TlsError::kHandshakeFailed, takeSslError());
  }
  return Status::ok();
}

Status TlsSession::feed(const uint8_t* data, size_t len, std::string& plain, std::string& out) {
  if (len > 0) BIO_write(rbio_, data, static_cast<int>(len));
  if (!handshakeDone_) {
    int r = SSL_do_handshake(ssl_);
    if (r != 1) {
      int err = SSL_get_error(ssl_, r);
      drainOut(out);  // the next flight, or the alert that explains the failure
      if (err == SSL_ERROR_WANT_READ) return Status::ok();
      unsigned long e = ERR_peek_error();
      bool untrusted = SSL_get_verify_result(ssl_) != X509_V_OK ||
                       ERR_GET_REASON(e) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE ||
                       ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED;
      return fail(untrusted ? TlsError::kUntrustedCert : TlsError::kHandshakeFailed,
                  takeSslError());
    }
    handshakeDone_ = true;
  }
  constexpr size_t kChunk = 16 * 1024;
  for (;;) {
    size_t old = plain.size();
    plain.resize(old + kChunk);
    int n = SSL_read(ssl_, plain.data() + old, static_cast<int>(kChunk));
    plain.resize(old + static_cast<size_t>(std::max(n, 0)));
    if (n > 0) continue;
    int err = SSL_get_error(ssl_, n);
    drainOut(out);
    if (err == SSL_ERROR_WANT_READ) return Status::ok();
    if (err == SSL_ERROR_ZERO_RETURN) {
      ERR_clear_error();
      return Status::closed("the peer closed the TLS session");
    }
    return fail(TlsError::kHandshakeFailed, takeSslError());
  }
}

Status TlsSession::encrypt(const std::pair<const uint8_t*, size_t>* bufs, size_t n,
                           std::string& out) {
  // Small buffers (frame headers, small messages) are gathered so records stay full; a large
  // one is written on its own rather than copied.
  constexpr size_t kRecord = 16 * 1024;
  auto write = [this](const void* p, size_t len) -> bool {
    return len == 0 || SSL_write(ssl_, p, static_cast<int>(len)) > 0;
  };
  gather_.clear();
  for (size_t i = 0; i < n; ++i) {
    const auto& [p, len] = bufs[i];
    if (len >= kRecord) {
      if (!write(gather_.data(), gather_.size()) || !write(p, len)) {
        return fail(TlsError::kHandshakeFailed, takeSslError());
      }
      gather_.clear();
    } else {
      gather_.append(reinterpret_cast<const char*>(p), len);
    }
  }
  if (!write(gather_.data(), gather_.size())) {
    return fail(TlsError::kHandshakeFailed, takeSslError());
  }
  drainOut(out);
  return Status::ok();
}

std::optional<std::string> peerCommonNameOf(const ssl_st* ssl) {
  if (!ssl) return std::nullopt;
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (!cert) return std::nullopt;
  X509_NAME* subject = X509_get_subject_name(cert);
  int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (i < 0) return std::string();
  ASN1_STRING* s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
  unsigned char* utf8 = nullptr;
  int len = ASN1_STRING_to_UTF8(&utf8, s);
  if (len < 0) return std::string();
  std::string cn(reinterpret_cast<char*>(utf8), static_cast<size_t>(len));
  OPENSSL_free(utf8);
  return cn;
}

std::optional<std::string> TlsSession::peerCommonName() const {
  if (!handshakeDone_) return std::nullopt;
  return peerCommonNameOf(ssl_);
}

std::string TlsSession::protocol() const { return SSL_get_version(ssl_); }

}  // namespace magnetar::net
