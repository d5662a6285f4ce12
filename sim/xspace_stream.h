// Writes an XSpace's wire format to a seekable stream a piece at a time, so that a simulated
// host never holds a whole session in memory.
//
// A kernel-profiling session is mostly counter samples: at 10 us, a v7x chip writes about 100k
// sample lines in 2 s, each with an event per counter (36 by default), and as generated
// protobuf objects a 4-chip host's 2-second session took 3.3 GB. Here a plane is written as a
// length-delimited field whose length is reserved as a 5-byte redundant varint and filled in
// when the plane is complete (as Perfetto's protozero reserves the sizes of nested messages);
// its lines can then be streamed into it as they are generated. Every protobuf parser, and
// podprof's own reader, accepts such a length.
//
// Not thread-safe: one writer per stream.
#ifndef PODPROF_SIM_XSPACE_STREAM_H_
#define PODPROF_SIM_XSPACE_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace podprof::sim {

// Appends protobuf wire-format pieces to a string.
void AppendTag(std::string* out, uint32_t field, int wire_type);
void AppendVarintField(std::string* out, uint32_t field, uint64_t value);
void AppendBytesField(std::string* out, uint32_t field, absl::string_view bytes);

class XSpaceStream {
 public:
  // `out` must be seekable (a file or a string stream) and outlive this.
  explicit XSpaceStream(std::ostream& out);
  XSpaceStream(const XSpaceStream&) = delete;
  XSpaceStream& operator=(const XSpaceStream&) = delete;

  // Starts the length-delimited field `field` (one open at a time); EndField fills its
  // length. Fields larger than 2 GiB, which protobuf cannot parse, fail EndField.
  void BeginField(uint32_t field);
  absl::Status EndField();
  // Bytes of the current position (inside the open field or at the top level).
  void Append(absl::string_view bytes);
  // A whole length-delimited field of known content.
  void AppendField(uint32_t field, absl::string_view bytes);
  // Writes what is buffered; the stream's error, if any, from here on.
  absl::Status Flush();
  // Bytes written so far, buffered ones included.
  int64_t size() const { return flushed_ + static_cast<int64_t>(buffer_.size()); }

 private:
  // Buffered bytes are written once this many are held: large enough that the stream sees
  // few calls, small enough not to matter next to the session.
  static constexpr size_t kFlushBytes = 1 << 20;

  std::ostream& out_;
  const std::streamoff base_;
  std::string buffer_;
  int64_t flushed_ = 0;
  // Where the open field's length placeholder starts (in bytes since the stream's start), or -1.
  int64_t length_at_ = -1;
};

}  // namespace podprof::sim

#endif  // PODPROF_SIM_XSPACE_STREAM_H_
