#include "trace/byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace podprof::trace {

absl::StatusOr<std::unique_ptr<FileSource>> FileSource::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoToStatus(err, path);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a capture file"));
  }
  // The reader walks the file front to back; tell the kernel to read ahead.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::unique_ptr<FileSource>(new FileSource(fd, st.st_size, path));
}

FileSource::~FileSource() { ::close(fd_); }

absl::Status FileSource::ReadAt(int64_t offset, size_t n, char* dst) {
  if (offset < 0 || offset > size_ || static_cast<int64_t>(n) > size_ - offset) {
    return absl::OutOfRangeError(
        absl::StrCat(path_, ": read of ", n, " bytes at offset ", offset, " past the end"));
  }
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd_, dst + done, n - done, offset + static_cast<int64_t>(done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat(path_, " at byte offset ", offset + done));
    }
    if (got == 0) {
      return absl::DataLossError(absl::StrCat(path_, ": file shrank while reading, at byte offset ",
                                              offset + static_cast<int64_t>(done)));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::Status MemorySource::ReadAt(int64_t offset, size_t n, char* dst) {
  if (offset < 0 || offset > size() || static_cast<int64_t>(n) > size() - offset) {
    return absl::OutOfRangeError(
        absl::StrCat(name_, ": read of ", n, " bytes at offset ", offset, " past the end"));
  }
  std::memcpy(dst, bytes_.data() + offset, n);
  return absl::OkStatus();
}

}  // namespace podprof::trace
