#include "trace/wire.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace podprof::trace::wire {
namespace {

// Reads are at least this large so that walking many small fields costs few system calls.
constexpr size_t kMinRead = 1 << 20;
constexpr int kMaxVarintBytes = 10;

const char* WireTypeName(WireType wt) {
  switch (wt) {
    case kVarint:
      return "varint";
    case kFixed64:
      return "fixed64";
    case kLengthDelimited:
      return "length-delimited";
    case kStartGroup:
      return "start-group";
    case kEndGroup:
      return "end-group";
    case kFixed32:
      return "fixed32";
  }
  return "invalid";
}

}  // namespace

absl::Status MalformedAt(int64_t offset, absl::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed XSpace at byte offset ", offset, ": ", what));
}

Window::Window(ByteSource* source) : source_(source), size_(source->size()) {
  if (source->data() != nullptr) {
    buf_ = reinterpret_cast<const uint8_t*>(source->data());
    buf_len_ = size_;
  }
}

absl::Status Window::Refill(int64_t offset, size_t n, const uint8_t** out) {
  if (offset < 0 || offset > size_ || static_cast<int64_t>(n) > size_ - offset) {
    return MalformedAt(offset, absl::StrCat("needs ", n, " bytes but the file ends at ", size_));
  }
  if (source_->data() != nullptr) {  // Whole source in memory: the check above suffices.
    *out = buf_ + offset;
    return absl::OkStatus();
  }
  size_t want = std::max(n, kMinRead);
  want = static_cast<size_t>(std::min<int64_t>(static_cast<int64_t>(want), size_ - offset));
  if (storage_.size() < want) {
    // Grow only for an unusually large single view; release the old buffer first so peak
    // memory is one buffer, not two.
    storage_.clear();
    storage_.shrink_to_fit();
    storage_.resize(want);
  }
  absl::Status s = source_->ReadAt(offset, want, storage_.data());
  if (!s.ok()) return s;
  buf_ = reinterpret_cast<const uint8_t*>(storage_.data());
  buf_start_ = offset;
  buf_len_ = static_cast<int64_t>(want);
  *out = buf_;
  return absl::OkStatus();
}

bool Span::ReadVarintSlow(uint64_t* v) {
  uint64_t result = 0;
  for (int i = 0; i < kMaxVarintBytes; ++i) {
    if (p_ >= end_) return false;
    uint8_t b = *p_++;
    if (i == 9 && b > 1) return false;  // Would overflow 64 bits.
    result |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
    if (b < 0x80) {
      *v = result;
      return true;
    }
  }
  return false;
}

absl::Status Cursor::Error(absl::string_view msg) const {
  return MalformedAt(pos_, absl::StrCat(msg, " (in ", what_, ")"));
}

absl::Status Cursor::ReadVarint(uint64_t* v) {
  int64_t avail = std::min<int64_t>(kMaxVarintBytes, end_ - pos_);
  if (avail <= 0) return Error("varint runs past the end of the message");
  const uint8_t* p;
  absl::Status s = window_->View(pos_, static_cast<size_t>(avail), &p);
  if (!s.ok()) return s;
  Span span(p, p + avail, pos_);
  if (!span.ReadVarint(v)) {
    return Error(avail < kMaxVarintBytes ? "varint runs past the end of the message"
                                         : "varint longer than 10 bytes");
  }
  pos_ = span.offset();
  return absl::OkStatus();
}

absl::Status Cursor::ReadTag(uint32_t* field, WireType* wt) {
  int64_t at = pos_;
  uint64_t tag;
  absl::Status s = ReadVarint(&tag);
  if (!s.ok()) return s;
  if (tag > 0xFFFFFFFFu || (tag >> 3) == 0) {
    pos_ = at;
    return Error(absl::StrCat("invalid field tag ", tag));
  }
  *field = static_cast<uint32_t>(tag >> 3);
  *wt = static_cast<WireType>(tag & 7);
  if (*wt > kFixed32) {
    pos_ = at;
    return Error(absl::StrCat("invalid wire type ", static_cast<int>(*wt), " for field ", *field));
  }
  return absl::OkStatus();
}

absl::Status Cursor::ReadFixed64(uint64_t* v) {
  if (end_ - pos_ < 8) return Error("fixed64 runs past the end of the message");
  const uint8_t* p;
  absl::Status s = window_->View(pos_, 8, &p);
  if (!s.ok()) return s;
  Span span(p, p + 8, pos_);
  span.ReadFixed64(v);
  pos_ += 8;
  return absl::OkStatus();
}

absl::Status Cursor::ReadLength(int64_t* len) {
  int64_t at = pos_;
  uint64_t v;
  absl::Status s = ReadVarint(&v);
  if (!s.ok()) return s;
  if (v > static_cast<uint64_t>(end_ - pos_)) {
    pos_ = at;
    return Error(absl::StrCat("length ", v, " runs past the end of the message (", end_ - at,
                              " bytes left)"));
  }
  *len = static_cast<int64_t>(v);
  return absl::OkStatus();
}

absl::Status Cursor::ReadSub(const char* what, Cursor* child) {
  int64_t len;
  absl::Status s = ReadLength(&len);
  if (!s.ok()) return s;
  *child = Cursor(window_, pos_, pos_ + len, what);
  pos_ += len;
  return absl::OkStatus();
}

absl::Status Cursor::ReadSpan(Span* span) {
  int64_t len;
  absl::Status s = ReadLength(&len);
  if (!s.ok()) return s;
  const uint8_t* p = nullptr;
  if (len > 0) {
    s = window_->View(pos_, static_cast<size_t>(len), &p);
    if (!s.ok()) return s;
  }
  *span = Span(p, p + len, pos_);
  pos_ += len;
  return absl::OkStatus();
}

absl::Status Cursor::ReadString(std::string* out) {
  Span span;
  absl::Status s = ReadSpan(&span);
  if (!s.ok()) return s;
  absl::string_view bytes = span.rest();
  out->assign(bytes.data(), bytes.size());
  return absl::OkStatus();
}

absl::Status Cursor::Skip(WireType wt) {
  uint64_t v;
  int64_t len;
  switch (wt) {
    case kVarint:
      return ReadVarint(&v);
    case kFixed64:
      return ReadFixed64(&v);
    case kLengthDelimited: {
      absl::Status s = ReadLength(&len);
      if (s.ok()) pos_ += len;  // Skipped without reading: nothing is copied.
      return s;
    }
    case kFixed32:
      if (end_ - pos_ < 4) return Error("fixed32 runs past the end of the message");
      pos_ += 4;
      return absl::OkStatus();
    default:
      return Error(absl::StrCat("unsupported wire type ", WireTypeName(wt)));
  }
}

absl::Status Cursor::Expect(uint32_t field, WireType wt, WireType want) const {
  if (wt == want) return absl::OkStatus();
  return Error(absl::StrCat("field ", field, " has wire type ", WireTypeName(wt), ", expected ",
                            WireTypeName(want)));
}

}  // namespace podprof::trace::wire
