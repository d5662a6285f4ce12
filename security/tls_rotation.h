// TLS material that can be replaced while a daemon serves.
//
// gRPC re-reads certificates only through its file watcher, which polls paths and cannot tell
// a key from one rotation and a certificate from the next (it reads the two files one after
// the other and serves whatever it got). So the watcher is pointed at copies this class owns:
// anonymous in-memory files (memfd), one holding key and certificate together, one the CA
// bundle, reached through /proc/self/fd. Publish() writes the new material into fresh memfds
// and moves each onto its fixed descriptor number with one dup3(), so the watcher sees old or
// new material, never a mix; each generation's files get its number as modification time, which
// makes the watcher discard a read that straddled a swap. The private key never touches a disk.
#ifndef PODPROF_SECURITY_TLS_ROTATION_H_
#define PODPROF_SECURITY_TLS_ROTATION_H_

#include <grpcpp/security/tls_certificate_provider.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "security/tls.h"

namespace podprof::security {

class TlsRotation {
 public:
  // How often gRPC's watcher looks at the copies: a rotation reaches new handshakes within it.
  static constexpr int kRefreshSeconds = 1;

  // Publishes `material` (already checked) and starts the watcher over it.
  static absl::StatusOr<std::shared_ptr<TlsRotation>> Start(const TlsMaterial& material);

  // The watcher that server and channel credentials take their material from.
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider() const {
    return provider_;
  }

  // Replaces the material served from now on, if it differs from the current one; returns
  // whether it did. The caller checks `material` first: the watcher takes it as it is.
  absl::StatusOr<bool> Publish(const TlsMaterial& material) ABSL_LOCKS_EXCLUDED(mu_);

  // The descriptors stay open: gRPC's watcher thread belongs to the provider, which the
  // credentials (and through them servers and channels) keep alive past this object.
  TlsRotation(const TlsRotation&) = delete;
  TlsRotation& operator=(const TlsRotation&) = delete;

 private:
  TlsRotation() = default;
  // Writes `data` to a new memfd stamped `mtime_s` (a generation number) and moves it onto `*fd`
  // (or makes `*fd` it).
  static absl::Status Swap(const std::string& name, const std::string& data, int64_t mtime_s,
                           int* fd);

  absl::Mutex mu_;
  int identity_fd_ = -1;
  int ca_fd_ = -1;
  std::string identity_ ABSL_GUARDED_BY(mu_);
  std::string ca_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider_;
};

}  // namespace podprof::security

#endif  // PODPROF_SECURITY_TLS_ROTATION_H_
