// Random-access byte sources for the streaming XSpace reader: a file read with pread(2)
// (no size limit: offsets are 64-bit) or bytes already in memory.
#ifndef PODPROF_TRACE_BYTE_SOURCE_H_
#define PODPROF_TRACE_BYTE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace podprof::trace {

// Read-only bytes addressed by offset. Implementations are not synchronised; one reader uses
// a source at a time.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  // Total size in bytes.
  virtual int64_t size() const = 0;
  // Copies [offset, offset + n) into dst. Fails (naming the source) on I/O errors or when the
  // range is not inside the source.
  virtual absl::Status ReadAt(int64_t offset, size_t n, char* dst) = 0;
  // All bytes when they are already in memory (then readers use them in place), else null.
  virtual const char* data() const { return nullptr; }
  // Name for messages (a path, or "<memory>").
  virtual const std::string& name() const = 0;
};

// A file opened read-only. Owns its descriptor.
class FileSource final : public ByteSource {
 public:
  // Opens `path`; errors are NotFound / PermissionDenied / ... naming the path.
  static absl::StatusOr<std::unique_ptr<FileSource>> Open(const std::string& path);
  ~FileSource() override;
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  int64_t size() const override { return size_; }
  absl::Status ReadAt(int64_t offset, size_t n, char* dst) override;
  const std::string& name() const override { return path_; }

 private:
  FileSource(int fd, int64_t size, std::string path) : fd_(fd), size_(size), path_(path) {}
  const int fd_;
  const int64_t size_;
  const std::string path_;
};

// Bytes owned by someone else, who keeps them alive and unchanged while the source is used.
class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(absl::string_view bytes, std::string name = "<memory>")
      : bytes_(bytes), name_(std::move(name)) {}
  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }
  absl::Status ReadAt(int64_t offset, size_t n, char* dst) override;
  const char* data() const override { return bytes_.data(); }
  const std::string& name() const override { return name_; }

 private:
  const absl::string_view bytes_;
  const std::string name_;
};

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_BYTE_SOURCE_H_
