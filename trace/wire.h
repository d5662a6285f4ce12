// Protobuf wire-format decoding for the streaming XSpace reader.
//
// Two levels: a Cursor walks a message region of a ByteSource field by field through a
// Window (so a plane of many GB never needs to be in memory, and offsets are 64-bit), and a
// Span decodes a small message (an XEvent, an XStat) that the Window made contiguous. Every
// length is checked against the end of the enclosing message before anything is read, so
// damaged input yields a Status naming the byte offset, never an out-of-bounds read.
#ifndef PODPROF_TRACE_WIRE_H_
#define PODPROF_TRACE_WIRE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "trace/byte_source.h"

namespace podprof::trace::wire {

enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

// The tag of a field numbered below 16: one byte on the wire.
constexpr uint8_t OneByteTag(uint32_t field, WireType wt) {
  return static_cast<uint8_t>(field << 3 | wt);
}

// Builds the error for damaged input: "malformed XSpace at byte offset N: <what>".
absl::Status MalformedAt(int64_t offset, absl::string_view what);

// Hands out contiguous views of a ByteSource. In-memory sources are viewed in place; files go
// through one buffer that grows only as far as the largest single view asked for.
// Not thread-safe.
class Window {
 public:
  explicit Window(ByteSource* source);
  // Returns a pointer to bytes [offset, offset + n), valid until the next call. The caller
  // has checked that the range lies inside the source.
  absl::Status View(int64_t offset, size_t n, const uint8_t** out) {
    if (offset >= buf_start_ && offset + static_cast<int64_t>(n) <= buf_start_ + buf_len_) {
      *out = buf_ + (offset - buf_start_);
      return absl::OkStatus();
    }
    return Refill(offset, n, out);
  }
  int64_t size() const { return size_; }
  ByteSource& source() const { return *source_; }

 private:
  absl::Status Refill(int64_t offset, size_t n, const uint8_t** out);

  ByteSource* const source_;
  const int64_t size_;
  std::vector<char> storage_;
  const uint8_t* buf_ = nullptr;
  int64_t buf_start_ = 0;
  int64_t buf_len_ = 0;
};

// A contiguous, bounds-checked view of one small message. Methods return false on damaged
// input; offset() then tells where.
class Span {
 public:
  Span() = default;
  Span(const uint8_t* begin, const uint8_t* end, int64_t base_offset)
      : Span(begin, end, end, base_offset) {}
  // `readable`: where the bytes that may be read end, at or past `end` (the message's end). A
  // message's last varint (an XStat's value, in every stat of every event) then takes the
  // fast path too, its end checked against `end` after it is decoded.
  Span(const uint8_t* begin, const uint8_t* end, const uint8_t* readable, int64_t base_offset)
      : p_(begin), begin_(begin), end_(end), readable_(readable), base_(base_offset) {}

  bool done() const { return p_ >= end_; }
  int64_t offset() const { return base_ + (p_ - begin_); }
  // The bytes not read yet.
  absl::string_view rest() const {
    return absl::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(end_ - p_));
  }

  // Inlined wherever it is called (as are the reads below): the reader's hot path is a few
  // of these an XEvent field, and GCC left them as calls.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool ReadVarint(uint64_t* v) {
    if (p_ < end_ && *p_ < 0x80) {  // Most values (tags, small ids) fit in one byte.
      *v = *p_++;
      return true;
    }
    if (readable_ - p_ >= 10) {  // Room for the longest varint: decode without bounds checks.
      const uint8_t* p = p_;
      uint64_t r = p[0] & 0x7F;
      int n = 1;
      // Unrolled, a constant shift a byte: offsets and durations in ps take 4 to 7 bytes.
#pragma GCC unroll 9
      for (int i = 1; i < 10; ++i) {
        const uint64_t b = p[i];
        if (i == 9 && b > 1) break;  // Would overflow 64 bits.
        r |= (b & 0x7F) << (7 * i);
        if (b < 0x80) {
          n = i + 1;
          break;
        }
      }
      if (n > 1 && p + n <= end_) {
        p_ = p + n;
        *v = r;
        return true;
      }
      // A bad varint inside the message fails here, p_ unmoved; one that reaches past the
      // message's end fails in the slow path, which stops there (the offset errors name).
      if (end_ - p_ >= 10) return false;
    }
    return ReadVarintSlow(v);
  }
  // Moves past the next byte when it is `b` (a one-byte tag the caller expects next).
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool TakeByte(uint8_t b) {
    if (p_ < end_ && *p_ == b) {
      ++p_;
      return true;
    }
    return false;
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool ReadTag(uint32_t* field, WireType* wt) {
    uint64_t tag;
    if (!ReadVarint(&tag) || tag > 0xFFFFFFFFu) return false;
    *field = static_cast<uint32_t>(tag >> 3);
    *wt = static_cast<WireType>(tag & 7);
    return *field != 0;
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool ReadFixed64(uint64_t* v) {
    if (end_ - p_ < 8) return false;
    uint64_t x = 0;
    for (int i = 7; i >= 0; --i) x = (x << 8) | p_[i];
    p_ += 8;
    *v = x;
    return true;
  }
  // Reads a length prefix and the bytes after it.
  bool ReadBytes(absl::string_view* out) {
    uint64_t len;
    if (!ReadVarint(&len) || len > static_cast<uint64_t>(end_ - p_)) return false;
    *out = absl::string_view(reinterpret_cast<const char*>(p_), len);
    p_ += len;
    return true;
  }
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool ReadSub(Span* sub) {
    uint64_t len;
    if (!ReadVarint(&len) || len > static_cast<uint64_t>(end_ - p_)) return false;
    *sub = Span(p_, p_ + len, readable_, offset());
    p_ += len;
    return true;
  }
  bool Skip(WireType wt);

 private:
  bool ReadVarintSlow(uint64_t* v);

  const uint8_t* p_ = nullptr;
  const uint8_t* begin_ = nullptr;
  const uint8_t* end_ = nullptr;
  const uint8_t* readable_ = nullptr;  // at or past end_
  int64_t base_ = 0;
};

// Walks the fields of one message region [pos, end) of a Window's source.
class Cursor {
 public:
  // `what` names the message for error messages ("XPlane"); it must outlive the cursor.
  Cursor(Window* window, int64_t pos, int64_t end, const char* what)
      : window_(window), pos_(pos), end_(end), what_(what) {}

  bool done() const { return pos_ >= end_; }
  int64_t pos() const { return pos_; }
  int64_t end() const { return end_; }
  const char* what() const { return what_; }
  // Moves to an absolute offset inside the region (used to revisit recorded fields).
  void Seek(int64_t pos) { pos_ = pos; }

  absl::Status ReadTag(uint32_t* field, WireType* wt);
  absl::Status ReadVarint(uint64_t* v);
  absl::Status ReadFixed64(uint64_t* v);
  // Reads a length prefix; fails if the length runs past the end of this message.
  absl::Status ReadLength(int64_t* len);
  // Reads a length-delimited field as a child region and moves past it.
  absl::Status ReadSub(const char* what, Cursor* child);
  // Reads a length-delimited field into a contiguous Span (valid until the next Window use).
  absl::Status ReadSpan(Span* span);
  // Copies a length-delimited field.
  absl::Status ReadString(std::string* out);
  // Skips the value of a field of wire type `wt`. Groups are rejected (XSpace has none).
  absl::Status Skip(WireType wt);
  // Error for damaged input at the current position.
  absl::Status Error(absl::string_view msg) const;
  // Fails unless `wt` is `want` for field `field`.
  absl::Status Expect(uint32_t field, WireType wt, WireType want) const;

 private:
  Window* window_;
  int64_t pos_;
  int64_t end_;
  const char* what_;
};

// Skips an unknown field's value inside a Span (same rules as Cursor::Skip).
inline bool Span::Skip(WireType wt) {
  uint64_t v;
  absl::string_view s;
  switch (wt) {
    case kVarint:
      return ReadVarint(&v);
    case kFixed64:
      return ReadFixed64(&v);
    case kLengthDelimited:
      return ReadBytes(&s);
    case kFixed32:
      if (end_ - p_ < 4) return false;
      p_ += 4;
      return true;
    default:
      return false;
  }
}

}  // namespace podprof::trace::wire

#endif  // PODPROF_TRACE_WIRE_H_
