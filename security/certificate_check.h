// A daemon's own TLS material checked before it serves, so that a bad file is a clear error at
// start-up rather than a handshake that fails later for every peer (or a server that does not
// start and says only "cannot listen"). Uses OpenSSL, which gRPC itself uses on Debian.
#ifndef PODPROF_SECURITY_CERTIFICATE_CHECK_H_
#define PODPROF_SECURITY_CERTIFICATE_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "security/tls.h"

struct x509_st;  // OpenSSL's X509

namespace podprof::security {

// What the daemon's certificate says of it.
struct CertificateSummary {
  std::string common_name;
  // The names peers know it by: CN, then the DNS and IP subject alternative names.
  std::vector<std::string> names;
  // The roles it carries (CertificateRoles): "agent", "aggregator", "operator".
  std::vector<std::string> roles;
  // The subject of the CA that signed it.
  std::string issuer;
  int64_t not_after_ns = 0;
  // It expires within kExpiryWarningNs of the check.
  bool expires_soon = false;

  // "identity agent-0 (agent-0, localhost, 127.0.0.1), role agent, CA CN=ca, valid until
  // 2026-12-03T..." ("no role" for a certificate that carries none).
  std::string Describe() const;
};

inline constexpr int64_t kExpiryWarningNs = int64_t{7} * 24 * 3600 * 1'000'000'000;

// Checks `material` as of `now_ns` (ns since the Unix epoch): the certificate and the CA bundle
// parse, the key is not encrypted and belongs to the certificate, the certificate is valid now,
// chains to the bundle, and may serve and dial (serverAuth and clientAuth where it limits its
// extended key usage). Errors (InvalidArgument) name the config key and the file and say
// what is wrong, as OpenSSL explains it where it does.
//
// A client (the CLI, an operator's certificate) only dials: its certificate needs clientAuth
// only, and its chain is left to the server (its CA bundle is for the servers it dials).
enum class TlsRole { kDaemon, kClient };
absl::StatusOr<CertificateSummary> CheckTlsMaterial(const TlsMaterial& material, int64_t now_ns,
                                                    TlsRole role = TlsRole::kDaemon);

// The names a certificate is known by (an OpenSSL X509, as a TLS server sees its peer's): its
// CN, then its DNS and IPv4 subject alternative names, each once.
std::vector<std::string> CertificateNames(const x509_st* cert);

// The podprof roles a certificate carries: for each URI subject alternative name
// `urn:podprof:role:<role>` (tls.h's kRoleUriPrefix), "<role>", each once. Other URIs are not
// roles. Empty for a null certificate.
std::vector<std::string> CertificateRoles(const x509_st* cert);
// The same for the first certificate of a PEM text (as gRPC hands over a peer's); empty when it
// holds none.
std::vector<std::string> PemCertificateRoles(const std::string& pem);

}  // namespace podprof::security

#endif  // PODPROF_SECURITY_CERTIFICATE_CHECK_H_
