#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace podprof {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("read ", path));
  std::string bytes;
  struct stat st;
  // A regular file's size spares the reallocations; /proc files say 0 and grow as read.
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) bytes.reserve(static_cast<size_t>(st.st_size));
  char buf[64 * 1024];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      bytes.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int err = errno;
      close(fd);
      return ErrnoToStatus(err, absl::StrCat("read ", path));
    }
  }
  close(fd);
  return bytes;
}

std::string CredentialPath(const std::string& name) {
  const char* dir = std::getenv("CREDENTIALS_DIRECTORY");
  return dir == nullptr ? std::string() : std::string(dir) + "/" + name;
}

}  // namespace podprof
