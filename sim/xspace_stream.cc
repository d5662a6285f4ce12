#include "sim/xspace_stream.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "trace/varint.h"

namespace podprof::sim {
namespace {

constexpr int kLengthDelimited = 2;
// A reserved length: 5 bytes hold up to 2^35 - 1; protobuf parses up to 2^31 - 1.
constexpr int kLengthBytes = 5;

// `v` as exactly kLengthBytes bytes: every byte but the last with its continuation bit set.
void RedundantVarint(uint64_t v, char* out) {
  for (int i = 0; i < kLengthBytes; ++i) {
    const uint8_t low = static_cast<uint8_t>(v & 0x7f);
    out[i] = static_cast<char>(i + 1 < kLengthBytes ? low | 0x80 : low);
    v >>= 7;
  }
}

}  // namespace

void AppendTag(std::string* out, uint32_t field, int wire_type) {
  trace::PutVarint((uint64_t{field} << 3) | static_cast<uint64_t>(wire_type), out);
}

void AppendVarintField(std::string* out, uint32_t field, uint64_t value) {
  AppendTag(out, field, 0);
  trace::PutVarint(value, out);
}

void AppendBytesField(std::string* out, uint32_t field, absl::string_view bytes) {
  AppendTag(out, field, kLengthDelimited);
  trace::PutVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

XSpaceStream::XSpaceStream(std::ostream& out) : out_(out), base_(out.tellp()) {}

void XSpaceStream::BeginField(uint32_t field) {
  AppendTag(&buffer_, field, kLengthDelimited);
  length_at_ = size();
  buffer_.append(kLengthBytes, '\0');
}

absl::Status XSpaceStream::EndField() {
  if (length_at_ < 0) return absl::InternalError("no field is open");
  const int64_t length = size() - length_at_ - kLengthBytes;
  if (length > std::numeric_limits<int32_t>::max()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a plane of ", length, " bytes is larger than protobuf can parse (2 GiB)"));
  }
  char bytes[kLengthBytes];
  RedundantVarint(static_cast<uint64_t>(length), bytes);
  if (length_at_ >= flushed_) {
    buffer_.replace(static_cast<size_t>(length_at_ - flushed_), kLengthBytes, bytes, kLengthBytes);
  } else {
    // Already written: go back and fill it in.
    if (absl::Status s = Flush(); !s.ok()) return s;
    out_.seekp(base_ + length_at_);
    out_.write(bytes, kLengthBytes);
    out_.seekp(base_ + flushed_);
    if (!out_) return absl::DataLossError("cannot fill in a plane's length in the trace file");
  }
  length_at_ = -1;
  return absl::OkStatus();
}

void XSpaceStream::Append(absl::string_view bytes) {
  buffer_.append(bytes.data(), bytes.size());
  // A placeholder still in the buffer is fine to write: EndField seeks back to it.
  if (buffer_.size() >= kFlushBytes) Flush().IgnoreError();  // the error stays on the stream
}

void XSpaceStream::AppendField(uint32_t field, absl::string_view bytes) {
  AppendBytesField(&buffer_, field, bytes);
  if (buffer_.size() >= kFlushBytes) Flush().IgnoreError();
}

absl::Status XSpaceStream::Flush() {
  out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  flushed_ += static_cast<int64_t>(buffer_.size());
  buffer_.clear();
  if (!out_) return absl::DataLossError("cannot write the trace file");
  return absl::OkStatus();
}

}  // namespace podprof::sim
