#include "storage/segments.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/status_macros.h"

namespace podprof::storage {
namespace {

void PutU32(uint32_t v, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t GetU32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

// Writes all of `iov` at the file's end, retrying short writes and EINTR.
absl::Status WriteAll(int fd, struct iovec* iov, int count, const std::string& path) {
  while (count > 0) {
    const ssize_t n = ::writev(fd, iov, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat("write ", path));
    }
    size_t left = static_cast<size_t>(n);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return absl::OkStatus();
}

// Reads exactly `n` bytes at `offset`; false when the file ends first.
absl::StatusOr<bool> ReadAt(int fd, char* out, int64_t n, int64_t offset, const std::string& path) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, out, static_cast<size_t>(n), offset);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat("read ", path));
    }
    if (r == 0) return false;
    out += r;
    n -= r;
    offset += r;
  }
  return true;
}

// Closes `fd` when it goes out of scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<SegmentFiles>> SegmentFiles::Open(const std::string& dir,
                                                                 bool read_only) {
  if (!read_only && ::mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
    return ErrnoToStatus(errno, absl::StrCat("create the store's segment folder ", dir));
  }
  return std::unique_ptr<SegmentFiles>(new SegmentFiles(dir, read_only));
}

SegmentFiles::~SegmentFiles() {
  absl::MutexLock lock(&mu_);
  for (auto& [segment, f] : open_) ::close(f.fd);
}

std::string SegmentFiles::PathOf(int64_t segment) const {
  return absl::StrFormat("%s/%012d.seg", dir_, segment);
}

absl::StatusOr<SegmentFiles::OpenFile*> SegmentFiles::OpenForAppend(int64_t segment) {
  auto it = open_.find(segment);
  if (it != open_.end()) return &it->second;
  if (read_only_) {
    return absl::FailedPreconditionError(
        absl::StrCat("the store's segments in ", dir_, " are open for reading only"));
  }
  const std::string path = PathOf(segment);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoToStatus(err, absl::StrCat("stat ", path));
  }
  OpenFile f{fd, st.st_size};
  if (f.size == 0) {
    struct iovec iov {
      const_cast<char*>(kSegmentMagic.data()), kSegmentMagic.size()
    };
    if (absl::Status s = WriteAll(fd, &iov, 1, path); !s.ok()) {
      ::ftruncate(fd, 0);
      ::close(fd);
      return s;
    }
    f.size = static_cast<int64_t>(kSegmentMagic.size());
  }
  return &open_.emplace(segment, f).first->second;
}

absl::StatusOr<SegmentRef> SegmentFiles::Append(int64_t segment, absl::string_view payload) {
  if (static_cast<int64_t>(payload.size()) > kMaxRecordBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a blob of ", payload.size(), " bytes is past a segment record's ", kMaxRecordBytes));
  }
  SegmentRef ref;
  ref.segment = segment;
  ref.bytes = static_cast<int64_t>(payload.size());
  // The checksum is computed before the lock: other appends need not wait for it.
  ref.crc = Crc32c(payload);
  char header[kRecordHeaderBytes];
  PutU32(static_cast<uint32_t>(payload.size()), header);
  PutU32(ref.crc, header + 4);
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(OpenFile * f, OpenForAppend(segment));
  struct iovec iov[2] = {{header, sizeof(header)},
                         {const_cast<char*>(payload.data()), payload.size()}};
  if (absl::Status s = WriteAll(f->fd, iov, 2, PathOf(segment)); !s.ok()) {
    // A half-written record would be cut at the next start-up anyway; cutting it now keeps
    // the next append's offset right.
    if (::ftruncate(f->fd, f->size) != 0) {
      ::close(f->fd);
      open_.erase(segment);
    }
    return s;
  }
  ref.offset = f->size + kRecordHeaderBytes;
  f->size += kRecordHeaderBytes + ref.bytes;
  unsynced_.insert(segment);
  return ref;
}

absl::Status SegmentFiles::Sync() {
  absl::MutexLock lock(&mu_);
  for (auto it = unsynced_.begin(); it != unsynced_.end(); it = unsynced_.erase(it)) {
    auto f = open_.find(*it);
    if (f == open_.end()) continue;
    if (::fdatasync(f->second.fd) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("fdatasync ", PathOf(*it)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SegmentFiles::Seal(int64_t segment) {
  absl::MutexLock lock(&mu_);
  auto f = open_.find(segment);
  if (f == open_.end()) {
    // Never appended to by this process: its length is the file's.
    struct stat st;
    if (::stat(PathOf(segment).c_str(), &st) != 0) {
      if (errno == ENOENT) return 0;
      return ErrnoToStatus(errno, absl::StrCat("stat ", PathOf(segment)));
    }
    return static_cast<int64_t>(st.st_size);
  }
  if (unsynced_.count(segment) > 0 && ::fdatasync(f->second.fd) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("fdatasync ", PathOf(segment)));
  }
  unsynced_.erase(segment);
  const int64_t size = f->second.size;
  ::close(f->second.fd);
  open_.erase(f);
  return size;
}

absl::StatusOr<std::string> SegmentFiles::Read(const SegmentRef& ref) const {
  const std::string path = PathOf(ref.segment);
  if (ref.bytes < 0 || ref.bytes > kMaxRecordBytes || ref.offset < kRecordHeaderBytes) {
    return absl::DataLossError(absl::StrCat("a record of ", ref.bytes, " bytes at ", ref.offset,
                                            " of ", path, " is not one the store writes"));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::DataLossError(absl::StrCat("segment file ", path, " is missing"));
    }
    return ErrnoToStatus(errno, absl::StrCat("open ", path));
  }
  FdCloser closer{fd};
  std::string out(static_cast<size_t>(ref.bytes), '\0');
  ASSIGN_OR_RETURN(const bool whole, ReadAt(fd, out.data(), ref.bytes, ref.offset, path));
  if (!whole) {
    return absl::DataLossError(
        absl::StrCat(path, " ends before the record of ", ref.bytes, " bytes at ", ref.offset));
  }
  if (Crc32c(out) != ref.crc) {
    return absl::DataLossError(absl::StrCat("the record of ", ref.bytes, " bytes at ", ref.offset,
                                            " of ", path, " does not match its checksum"));
  }
  return out;
}

absl::StatusOr<SegmentScan> SegmentFiles::Recover(int64_t segment) {
  const std::string path = PathOf(segment);
  SegmentScan scan;
  const int fd = ::open(path.c_str(), read_only_ ? O_RDONLY | O_CLOEXEC : O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return scan;
    return ErrnoToStatus(errno, absl::StrCat("open ", path));
  }
  FdCloser closer{fd};
  scan.exists = true;
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoToStatus(errno, absl::StrCat("stat ", path));
  scan.file_bytes = st.st_size;
  std::string magic(kSegmentMagic.size(), '\0');
  ASSIGN_OR_RETURN(bool whole, ReadAt(fd, magic.data(), magic.size(), 0, path));
  if (whole && magic == kSegmentMagic) {
    int64_t at = static_cast<int64_t>(magic.size());
    std::string payload;
    while (true) {
      char header[kRecordHeaderBytes];
      ASSIGN_OR_RETURN(whole, ReadAt(fd, header, sizeof(header), at, path));
      if (!whole) break;
      const int64_t n = GetU32(header);
      if (n > kMaxRecordBytes || at + kRecordHeaderBytes + n > scan.file_bytes) break;
      payload.resize(static_cast<size_t>(n));
      ASSIGN_OR_RETURN(whole, ReadAt(fd, payload.data(), n, at + kRecordHeaderBytes, path));
      if (!whole || Crc32c(payload) != GetU32(header + 4)) break;
      at += kRecordHeaderBytes + n;
      ++scan.records;
    }
    scan.valid_bytes = at;
  }
  if (scan.valid_bytes < scan.file_bytes && !read_only_) {
    if (::ftruncate(fd, scan.valid_bytes) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("truncate ", path));
    }
    if (::fdatasync(fd) != 0) return ErrnoToStatus(errno, absl::StrCat("fdatasync ", path));
  }
  return scan;
}

absl::StatusOr<int64_t> SegmentFiles::FileBytes(int64_t segment) const {
  struct stat st;
  if (::stat(PathOf(segment).c_str(), &st) != 0) {
    if (errno == ENOENT) return -1;
    return ErrnoToStatus(errno, absl::StrCat("stat ", PathOf(segment)));
  }
  return static_cast<int64_t>(st.st_size);
}

absl::StatusOr<std::vector<int64_t>> SegmentFiles::List() const {
  std::vector<int64_t> out;
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return out;
    return ErrnoToStatus(errno, absl::StrCat("list ", dir_));
  }
  while (const struct dirent* e = ::readdir(d)) {
    absl::string_view name = e->d_name;
    int64_t segment;
    if (absl::ConsumeSuffix(&name, ".seg") && absl::SimpleAtoi(name, &segment)) {
      out.push_back(segment);
    }
  }
  ::closedir(d);
  return out;
}

absl::Status SegmentFiles::Remove(int64_t segment) {
  {
    absl::MutexLock lock(&mu_);
    auto f = open_.find(segment);
    if (f != open_.end()) {
      ::close(f->second.fd);
      open_.erase(f);
    }
    unsynced_.erase(segment);
  }
  if (::unlink(PathOf(segment).c_str()) != 0 && errno != ENOENT) {
    return ErrnoToStatus(errno, absl::StrCat("delete ", PathOf(segment)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SegmentFiles::DiskBytes() const {
  ASSIGN_OR_RETURN(const std::vector<int64_t> segments, List());
  int64_t total = 0;
  for (const int64_t segment : segments) {
    struct stat st;
    if (::stat(PathOf(segment).c_str(), &st) == 0)
      total += static_cast<int64_t>(st.st_blocks) * 512;
  }
  return total;
}

}  // namespace podprof::storage
