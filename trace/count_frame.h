// What the second column encodings of counter series and timelines (counter_v2.h,
// timeline_v2.h) share: a blob that is a zstd skippable frame holding the item count, then one
// zstd frame of the body, and bodies whose columns are cut into byte planes. Internal to trace/.
//
// The blob: the skippable frame's magic (4 bytes little-endian, one encoding's own), its size
// (4 bytes little-endian), the varint count, an optional label (a varint length of at least 1,
// then its bytes: padding is zero bytes, so a label's first byte tells it from padding) and
// zero padding, then the body's frame. The count and label are read without decompressing
// anything; the whole blob is a valid zstd stream.
#ifndef PODPROF_TRACE_COUNT_FRAME_H_
#define PODPROF_TRACE_COUNT_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace podprof::trace::count_frame {

struct Header {
  uint64_t count = 0;
  size_t size = 0;  // the skippable frame's bytes: where the body's frame starts
  // The label (a view into the blob), empty when there is none.
  absl::string_view label;
};

// The longest label a header may hold.
inline constexpr size_t kMaxLabelBytes = 4096;

// True when `blob` starts with `magic` (it may still be damaged).
bool Is(absl::string_view blob, uint32_t magic);

// `frame` behind the skippable frame of `magic` holding `count`; an honest blob of more than
// `max_per_byte` items a byte (a long run that compresses past any bound) is padded up to it
// rather than refused by its reader. `max_per_byte` > 0.
// `label` (at most kMaxLabelBytes) goes into the header when not empty.
std::string Wrap(uint32_t magic, uint64_t count, const std::string& frame, uint64_t max_per_byte,
                 absl::string_view label = {});

// The header of a blob of `magic`. DataLoss naming `what` when it is not one (`encoding`
// names the encoding it is not of), is truncated, or holds more than its count, padding and,
// for an encoding whose blobs may be `labelled`, a label.
absl::StatusOr<Header> Read(absl::string_view blob, uint32_t magic, absl::string_view what,
                            absl::string_view encoding, bool labelled);

// The bytes `x` takes without its leading zero bytes.
inline int SignificantBytes(uint64_t x) { return x == 0 ? 0 : 8 - __builtin_clzll(x) / 8; }

// `column` as `planes` planes of one byte per item, the most significant first, after `raw`.
void PutPlanes(const std::vector<uint64_t>& column, int planes, std::string* raw);

// Item `i` of a column of `n` items in `planes` planes starting at `column`.
inline uint64_t GetPlanes(const char* column, size_t n, int planes, size_t i) {
  uint64_t x = 0;
  for (int p = 0; p < planes; ++p) x = x << 8 | static_cast<uint8_t>(column[p * n + i]);
  return x;
}

}  // namespace podprof::trace::count_frame

#endif  // PODPROF_TRACE_COUNT_FRAME_H_
