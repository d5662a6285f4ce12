#include "security/tls.h"

#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "security/certificate_check.h"
#include "security/tls_rotation.h"

namespace podprof::security {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& configured, const char* credential,
                                    const char* key, std::string* path_read) {
  std::string path = configured.empty() ? CredentialPath(credential) : configured;
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " is not set and there is no systemd credential \"", credential,
                     "\": configure the TLS files, or insecure = true for plaintext"));
  }
  *path_read = path;
  absl::StatusOr<std::string> pem = ReadFile(path);
  if (!pem.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": ", pem.status().message()));
  }
  if (pem->find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": ", path, " holds no PEM data"));
  }
  return pem;
}

}  // namespace

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsConfig& config) {
  TlsMaterial m;
  absl::StatusOr<std::string> cert = ReadPem(config.cert, "tls.crt", "tls.cert", &m.cert_path);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadPem(config.key, "tls.key", "tls.key", &m.key_path);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::string> ca = ReadPem(config.ca, "ca.crt", "tls.ca", &m.ca_path);
  if (!ca.ok()) return ca.status();
  m.cert = *std::move(cert);
  m.key = *std::move(key);
  m.ca = *std::move(ca);
  return m;
}

namespace {

// The daemons' credentials read their material through the rotation's watcher, so that a
// reload reaches new handshakes without rebuilding servers or channels.
std::shared_ptr<grpc::ServerCredentials> ServerFrom(const TlsRotation& rotation) {
  grpc::experimental::TlsServerCredentialsOptions opts(rotation.provider());
  opts.watch_root_certs();
  opts.watch_identity_key_cert_pairs();
  opts.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(opts);
}

std::shared_ptr<grpc::ChannelCredentials> DaemonChannelFrom(const TlsRotation& rotation) {
  grpc::experimental::TlsChannelCredentialsOptions opts;
  opts.set_certificate_provider(rotation.provider());
  opts.watch_root_certs();
  opts.watch_identity_key_cert_pairs();
  opts.set_verify_server_certs(true);
  // The server's certificate must name the address dialled, as with SslCredentials.
  opts.set_certificate_verifier(
      std::make_shared<grpc::experimental::HostNameCertificateVerifier>());
  return grpc::experimental::TlsCredentials(opts);
}

// The CLI dials once per process: the files as they are now are all it needs.
std::shared_ptr<grpc::ChannelCredentials> ChannelFrom(const TlsMaterial& m) {
  grpc::SslCredentialsOptions opts;
  opts.pem_root_certs = m.ca;
  opts.pem_private_key = m.key;
  opts.pem_cert_chain = m.cert;
  return grpc::SslCredentials(opts);
}

}  // namespace

absl::StatusOr<Credentials> DaemonCredentials(const TlsConfig& config, int64_t now_ns) {
  if (config.insecure) {
    Credentials c;
    c.server = grpc::InsecureServerCredentials();
    c.channel = grpc::InsecureChannelCredentials();
    return c;
  }
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(config);
  if (!m.ok()) return m.status();
  // gRPC would take bad material and fail later, at each handshake, saying less.
  absl::StatusOr<CertificateSummary> checked = CheckTlsMaterial(*m, now_ns);
  if (!checked.ok()) return checked.status();
  absl::StatusOr<std::shared_ptr<TlsRotation>> rotation = TlsRotation::Start(*m);
  if (!rotation.ok()) return rotation.status();
  Credentials c;
  c.rotation = *std::move(rotation);
  c.server = ServerFrom(*c.rotation);
  c.channel = DaemonChannelFrom(*c.rotation);
  c.description = checked->Describe();
  c.expires_soon = checked->expires_soon;
  return c;
}

absl::StatusOr<std::string> RotateCredentials(const Credentials& credentials,
                                              const TlsConfig& config, int64_t now_ns) {
  if (config.insecure != (credentials.rotation == nullptr)) {
    return absl::FailedPreconditionError(
        "tls.insecure changed: switching between TLS and plaintext needs a restart");
  }
  if (config.insecure) return std::string();
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(config);
  if (!m.ok()) return m.status();
  absl::StatusOr<CertificateSummary> checked = CheckTlsMaterial(*m, now_ns);
  if (!checked.ok()) return checked.status();
  absl::StatusOr<bool> published = credentials.rotation->Publish(*m);
  if (!published.ok()) return published.status();
  return *published ? checked->Describe() : std::string();
}

namespace {

// What admits a caller to `acl`'s role while its list is empty.
std::string DefaultRule(const RoleAcl& acl) {
  if (acl.role.empty()) return "any certificate of the CA";
  return absl::StrCat("certificates carrying ", kRoleUriPrefix, acl.role);
}

}  // namespace

std::string DescribeTls(const Credentials& credentials, const std::vector<RoleAcl>& roles) {
  if (credentials.description.empty()) return "TLS off: plaintext gRPC (insecure = true)";
  std::string line = absl::StrCat("mutual TLS, ", credentials.description);
  for (const RoleAcl& acl : roles) {
    absl::StrAppend(&line, "; ", acl.setting, ": ",
                    acl.identities.empty() ? absl::StrCat("[] (", DefaultRule(acl), ")")
                                           : absl::StrJoin(acl.identities, ", "));
  }
  return line;
}

std::string DescribeDefaultRoles(const Credentials& credentials,
                                 const std::vector<RoleAcl>& roles) {
  if (credentials.description.empty()) return "";
  std::vector<std::string> rules;
  for (const RoleAcl& acl : roles) {
    if (acl.identities.empty() && !acl.role.empty()) {
      rules.push_back(
          absl::StrCat(acl.setting, " is empty: only ", DefaultRule(acl), " may act in that role"));
    }
  }
  if (rules.empty()) return "";
  return absl::StrCat(absl::StrJoin(rules, "; "),
                      ". scripts/make-certs.sh writes these URIs; certificates made before it did "
                      "carry no role and are refused: re-issue them with make-certs, or list their "
                      "identities in the allow list");
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const TlsConfig& config, int64_t now_ns) {
  if (config.insecure) return grpc::InsecureChannelCredentials();
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(config);
  if (!m.ok()) return m.status();
  absl::StatusOr<CertificateSummary> checked = CheckTlsMaterial(*m, now_ns, TlsRole::kClient);
  if (!checked.ok()) return checked.status();
  return ChannelFrom(*m);
}

std::string ExplainTlsDialFailure(const std::string& detail) {
  // gRPC passes on the TLS library's words; the server's refusals arrive as alerts, or as a
  // connection closed without one.
  static const std::pair<const char*, const char*> kMeanings[] = {
      {"is not in peer certificate",
       "the server's certificate does not name the address dialled: add it as a SAN, or dial a "
       "name the certificate has"},
      {"certificate verify failed",
       "the server's certificate did not verify against the CA bundle: signed by another CA, "
       "expired, or not for server use"},
      {"alert certificate expired", "the server says this certificate has expired"},
      {"alert unknown ca", "the server does not trust this certificate's CA"},
      {"alert certificate required", "the server requires a client certificate"},
      {"alert unsupported certificate", "the server refused this certificate's key usage"},
      {"alert bad certificate",
       "the server refused this certificate (expired, from another CA, or not for client use)"},
      {"Socket closed",
       "the server closed the connection during the handshake: it refused this certificate "
       "(expired, from another CA, or not for client use)"},
      {"Connection reset",
       "the server reset the connection during the handshake: it refused this certificate "
       "(expired, from another CA, or not for client use)"},
  };
  for (const auto& [words, meaning] : kMeanings) {
    if (absl::StrContains(detail, words)) return meaning;
  }
  return "";
}

std::vector<std::string> PeerIdentities(const grpc::ServerContextBase& context) {
  std::vector<std::string> out;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return out;
  for (const char* prop : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& v : auth->FindPropertyValues(prop)) {
      std::string name(v.data(), v.size());
      // gRPC lists URI SANs too: a role URI is PeerRoles', not a name, as on HTTPS (whose
      // CertificateNames lists no URIs), so that no allow list matches it.
      if (absl::StartsWith(name, kRoleUriPrefix)) continue;
      // A certificate often repeats its CN as a SAN; print and match each name once.
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
    }
  }
  return out;
}

std::vector<std::string> PeerRoles(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return {};
  // The certificate itself: which SAN kinds gRPC lists as properties differs between versions.
  for (const grpc::string_ref& pem : auth->FindPropertyValues("x509_pem_cert")) {
    return PemCertificateRoles(std::string(pem.data(), pem.size()));
  }
  return {};
}

absl::Status RoleAcl::Check(const grpc::ServerContextBase& context, const std::string& who) const {
  if (plaintext && identities.empty()) return absl::OkStatus();
  return CheckIdentities(PeerIdentities(context), PeerRoles(context), who);
}

absl::Status RoleAcl::CheckIdentities(const std::vector<std::string>& peer,
                                      const std::vector<std::string>& peer_roles,
                                      const std::string& who) const {
  std::string why;
  if (!identities.empty()) {
    for (const std::string& p : peer) {
      if (std::find(identities.begin(), identities.end(), p) != identities.end()) {
        return absl::OkStatus();
      }
    }
    why = setting.empty() ? "" : absl::StrCat(" (not in ", setting, ")");
  } else if (plaintext || role.empty()) {
    return absl::OkStatus();
  } else if (std::find(peer_roles.begin(), peer_roles.end(), role) != peer_roles.end()) {
    return absl::OkStatus();
  } else {
    // The list is empty, so the certificate's role decides.
    why = absl::StrCat(" (its certificate does not carry ", kRoleUriPrefix, role,
                       setting.empty() ? "" : absl::StrCat(", and ", setting, " is empty"), ")");
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "caller ", peer.empty() ? std::string("without a certificate") : absl::StrJoin(peer, "/"),
      " may not act as ", who, why));
}

}  // namespace podprof::security
