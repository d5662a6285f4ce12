// Mutual TLS for every podprof gRPC connection (agent <-> aggregator, CLI -> aggregator).
//
// Each side presents a certificate signed by the deployment's CA and checks the other's; a
// client without a certificate, or with one from another CA, fails the handshake. On top,
// roles: only agents may register, only the aggregator may start captures on an agent, only
// operators may start captures or change data. A role is held because the deployment says so,
// never merely because the CA signed the certificate: a role's allow list (the certificate's CN
// or a DNS/IP SAN), or, while that list is empty, the role's URI subject alternative name
// (`urn:podprof:role:agent`, `...:aggregator`, `...:operator`) that scripts/make-certs.sh writes.
// Otherwise any certificate of the CA (a viewer's, or one stolen from a TPU host's workload)
// could register as an agent or take a host's trace. Plaintext is allowed only when configured
// (`insecure = true`), and then the daemons warn at start-up.
#ifndef PODPROF_SECURITY_TLS_H_
#define PODPROF_SECURITY_TLS_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace podprof::security {

struct TlsConfig {
  // Plaintext, no certificates: only for loopback tests and trusted networks.
  bool insecure = false;
  // PEM files. Empty: `$CREDENTIALS_DIRECTORY/tls.crt`, `tls.key`, `ca.crt` (systemd's
  // LoadCredential=).
  std::string cert, key, ca;
};

// The PEM material a TlsConfig names, read once, and the files it came from (for messages).
struct TlsMaterial {
  std::string cert, key, ca;
  std::string cert_path, key_path, ca_path;
};

// Reads the files; errors name the file and the config key. InvalidArgument when TLS is on
// and a file is not configured and not among the credentials.
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsConfig& config);

class TlsRotation;

// Both sides of a daemon: it serves and dials with the same certificate.
struct Credentials {
  std::shared_ptr<grpc::ServerCredentials> server;
  std::shared_ptr<grpc::ChannelCredentials> channel;
  // The certificate as checked at load (certificate_check.h): its identity, CA and validity,
  // for the start-up log line; empty for plaintext. `expires_soon` asks for a warning.
  std::string description;
  bool expires_soon = false;
  // Where RotateCredentials publishes new material (tls_rotation.h); null for plaintext.
  std::shared_ptr<TlsRotation> rotation;
};
// Reads the TLS material once, checks it as of `now_ns` (CheckTlsMaterial: the key is the
// certificate's and not encrypted, the certificate is valid and chains to the CA bundle) and
// makes both sides (or insecure ones). Errors name the config key, the file and the problem.
absl::StatusOr<Credentials> DaemonCredentials(const TlsConfig& config, int64_t now_ns);

// Rereads and checks the TLS files `config` names (as DaemonCredentials does) and, when they
// differ from what `credentials` serve, publishes them: new handshakes, in both directions, use
// them within TlsRotation::kRefreshSeconds; connections already open keep theirs, so running
// captures go on. Returns the new certificate's description, or "" when nothing changed. An
// error (bad material, or a switch between TLS and plaintext, which needs a restart) leaves
// the served material as it was.
absl::StatusOr<std::string> RotateCredentials(const Credentials& credentials,
                                              const TlsConfig& config, int64_t now_ns);

// The URI subject alternative name that gives a certificate a role: kRoleUriPrefix + role.
inline constexpr char kRoleUriPrefix[] = "urn:podprof:role:";
inline constexpr char kAgentRole[] = "agent";            // registers, heartbeats, telemetry
inline constexpr char kAggregatorRole[] = "aggregator";  // starts captures on agents
inline constexpr char kOperatorRole[] = "operator";      // starts and cancels captures, imports

struct RoleAcl;

// The line a daemon logs at start-up: the TLS mode, its certificate's identity, CA and validity,
// and each role's rule as `key: a, b`, or, for an empty list, the role URI that admits (or
// "any certificate of the CA" for a role no certificate names).
std::string DescribeTls(const Credentials& credentials, const std::vector<RoleAcl>& roles);

// For a daemon with TLS whose allow lists are (some of them) empty, the line it logs once at
// start-up: which role URI now admits each such role, and what certificates made before roles
// existed need (re-issue, or list their identities). "" when every list is set or TLS is off.
std::string DescribeDefaultRoles(const Credentials& credentials, const std::vector<RoleAcl>& roles);

// Channel credentials presenting our certificate and verifying the server's (or insecure), for
// a client that only dials (the CLI): the material is checked as of `now_ns` for that role, so
// a mismatched key or an expired certificate is an error here rather than a failed dial.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const TlsConfig& config, int64_t now_ns);

// What a failed dial's gRPC message means when TLS is in play, as far as the TLS library says:
// "the server's certificate does not name the address dialled ...", or "" when it says nothing
// recognisable. For the CLI's and the agent's messages.
std::string ExplainTlsDialFailure(const std::string& grpc_detail);

// The verified identities of the caller: its certificate's common name and subject alternative
// names as gRPC lists them, but no role URI (PeerRoles), each once. Empty for a plaintext
// connection.
std::vector<std::string> PeerIdentities(const grpc::ServerContextBase& context);

// The roles the caller's verified certificate carries (its `urn:podprof:role:<role>` URI SANs,
// as "<role>"), read from the certificate itself (gRPC's `x509_pem_cert`, parsed with
// OpenSSL) rather than from whichever SAN kinds gRPC lists. Empty for a plaintext connection.
std::vector<std::string> PeerRoles(const grpc::ServerContextBase& context);

// Who may act in one role. Built by the daemon from its configuration; immutable, so it may be
// shared across threads.
struct RoleAcl {
  // The role a certificate's URI SAN names (kAgentRole, ...): with `identities` empty, only a
  // certificate carrying it acts in the role. Empty for a role no certificate names (the
  // XProf facade's clients are workloads): then an empty list admits any certificate of the CA.
  std::string role;
  // The allowed identities (CN or DNS/IP SAN). Not empty: they alone decide, exact match.
  std::vector<std::string> identities;
  // The configuration key that lists them ("tls.allowed_operators"), named in refusals.
  std::string setting;
  // The daemon runs without TLS (`insecure = true`, which it warns of): no caller has a
  // certificate, so an empty list admits every caller and a non-empty one none.
  bool plaintext = false;

  // OK, or PermissionDenied naming the caller's identities, `who` ("an operator") and why.
  absl::Status Check(const grpc::ServerContextBase& context, const std::string& who) const;
  // The same for a caller known by its certificate's names and roles (an HTTPS client's:
  // security::CertificateNames and CertificateRoles).
  absl::Status CheckIdentities(const std::vector<std::string>& peer,
                               const std::vector<std::string>& peer_roles,
                               const std::string& who) const;
};

}  // namespace podprof::security

#endif  // PODPROF_SECURITY_TLS_H_
