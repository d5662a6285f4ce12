// Base-128 varints (the protobuf encoding) for podprof's own compact blobs: sketches, timeline
// and counter blocks.
#ifndef PODPROF_TRACE_VARINT_H_
#define PODPROF_TRACE_VARINT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace podprof::trace {

inline void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

// Reads one varint from the front of `in`; false if it is truncated or longer than 10 bytes.
inline bool GetVarint(absl::string_view* in, uint64_t* v) {
  uint64_t r = 0;
  for (int i = 0; i < 10 && !in->empty(); ++i) {
    uint8_t b = static_cast<uint8_t>((*in)[0]);
    in->remove_prefix(1);
    r |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
    if (b < 0x80) {
      *v = r;
      return true;
    }
  }
  return false;
}

inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_VARINT_H_
