#include "security/tls_rotation.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace podprof::security {
namespace {

std::string FdPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// Key first, then the chain: gRPC reads the key as the first private key block of the file and
// the chain as its certificate blocks, so one file serves as both.
std::string Identity(const TlsMaterial& m) { return absl::StrCat(m.key, "\n", m.cert); }

}  // namespace

absl::Status TlsRotation::Swap(const std::string& name, const std::string& data, int64_t mtime_s,
                               int* fd) {
  int fresh = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fresh < 0) return Errno("memfd_create");
  size_t written = 0;
  while (written < data.size()) {
    ssize_t n = write(fresh, data.data() + written, data.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      close(fresh);
      return Errno("writing the TLS material");
    }
    written += static_cast<size_t>(n);
  }
  const struct timespec times[2] = {{static_cast<time_t>(mtime_s), 0},
                                    {static_cast<time_t>(mtime_s), 0}};
  if (futimens(fresh, times) != 0) {
    close(fresh);
    return Errno("stamping the TLS material");
  }
  if (*fd < 0) {
    *fd = fresh;
    return absl::OkStatus();
  }
  // One atomic step: a reader opening /proc/self/fd/N gets the old file or the new one.
  if (dup3(fresh, *fd, O_CLOEXEC) < 0) {
    close(fresh);
    return Errno("publishing the TLS material");
  }
  close(fresh);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<TlsRotation>> TlsRotation::Start(const TlsMaterial& material) {
  std::shared_ptr<TlsRotation> r(new TlsRotation());
  {
    absl::MutexLock lock(&r->mu_);
    r->generation_ = 1;
    r->identity_ = Identity(material);
    r->ca_ = material.ca;
    if (absl::Status s =
            Swap("podprof-tls-identity", r->identity_, r->generation_, &r->identity_fd_);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = Swap("podprof-tls-ca", r->ca_, r->generation_, &r->ca_fd_); !s.ok()) {
      return s;
    }
  }
  r->provider_ = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      FdPath(r->identity_fd_), FdPath(r->identity_fd_), FdPath(r->ca_fd_), kRefreshSeconds);
  return r;
}

absl::StatusOr<bool> TlsRotation::Publish(const TlsMaterial& material) {
  absl::MutexLock lock(&mu_);
  const std::string identity = Identity(material);
  if (identity == identity_ && material.ca == ca_) return false;
  // Each generation's files carry its number as their time: the watcher compares modification
  // times before and after reading, and drops a read that saw two generations.
  ++generation_;
  // The CA bundle first: peers presenting certificates of a new CA are then accepted by the
  // time our own new certificate (possibly of that CA) is served.
  if (material.ca != ca_) {
    if (absl::Status s = Swap("podprof-tls-ca", material.ca, generation_, &ca_fd_); !s.ok()) {
      return s;
    }
    ca_ = material.ca;
  }
  if (identity != identity_) {
    if (absl::Status s = Swap("podprof-tls-identity", identity, generation_, &identity_fd_);
        !s.ok()) {
      return s;
    }
    identity_ = identity;
  }
  return true;
}

}  // namespace podprof::security
