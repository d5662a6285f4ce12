// The second encoding of timeline blocks (trace/columns.h says when each is written and read):
// the events as columns, each laid out for what it holds.
//
// A blob is a zstd skippable frame holding the event count, then one zstd frame of the body:
//   magic    4 bytes, 0x184D2A53 little-endian (a skippable frame's magic, variant 3; the
//            second counter encoding's is variant 2, the first encodings' a zstd frame's)
//   size     4 bytes little-endian, the bytes of the header that follow
//   header   varint event count, then zero bytes (padding, see kMaxEventsPerByte)
//   frame    one zstd frame (level 1) with its content size: the body
// The count is read without decompressing anything; the whole blob is a valid zstd stream.
//
// The body is a mode byte, then the events:
//   mode 1 (columns): the gap column's plane count (0-8), the duration column's, then the gap
//     column and the duration column, each as that many planes of one byte per event, the most
//     significant plane first, then the kernel column (a varint each) and the collective
//     column (a varint each). An event's gap is the zigzag of its start less the previous
//     event's end (start plus duration; the first event's previous end is 0), its duration
//     zigzag too, both modulo 2^64 (every int64 round-trips). Kernels back to back make the
//     gaps small; jittered durations keep their noise in their low planes and the repeating
//     high bytes of a training step apart in theirs, where zstd's matcher finds them.
//   mode 0 (plain): the first encoding's events, per event the zigzag varint start delta
//     (modulo 2^64), zigzag duration, kernel and collective. Written when mode 1's frame would
//     take more bytes than this body does uncompressed (one outlier widens a whole column), so
//     that no block takes more than zstd's bound on the first encoding's events: what the
//     stream sizes its runs by (MaxCounterBytesWithin).
// Measured on a podprof-loadgen host-second (what bench_pod_scale stores, 34,380 events in 16
// blocks): 11.0 bytes an event in the first encoding, 7.7 in this one (bench_counter_columns and
// timeline_columns_test print both); level 3 took 0.99 of level 1's bytes there
// (bench_counter_columns prints the ratio, `timelines at level 3`).
#ifndef PODPROF_TRACE_TIMELINE_V2_H_
#define PODPROF_TRACE_TIMELINE_V2_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trace/model.h"

namespace podprof::trace::timeline_v2 {

inline constexpr uint32_t kMagic = 0x184D2A53;

// The zstd level of the body: 1, since blocks are encoded on the agent's hot path and, for
// imports, the aggregator's, and level 3 saves only 1% of the bytes (measured above).
inline constexpr int kLevel = 1;

// True when `blob` starts with this encoding's magic (it may still be damaged).
bool Is(absl::string_view blob);

// Events [begin, end) of `b`, kernels as `kernel_ids[b.kernel[i]]`; padded up to
// `max_events_per_byte` (an honest run of identical events compresses past any bound).
std::string Encode(const EventBlock& b, const std::vector<int64_t>& kernel_ids, size_t begin,
                   size_t end, uint64_t max_events_per_byte, int level = kLevel);

// The declared event count, from the header alone. DataLoss naming `what` for a damaged one.
absl::StatusOr<uint64_t> Count(absl::string_view blob, absl::string_view what);

// What can be checked without decompressing: the header, a count within
// `max_events_per_byte` of the blob's bytes, one whole zstd frame after it whose content is
// within `max_bytes` and what the count can fill (2 to 40 bytes an event, and the body's few
// bytes of header). Returns the count. DataLoss otherwise.
absl::StatusOr<uint64_t> Check(absl::string_view blob, uint64_t max_bytes,
                               uint64_t max_events_per_byte);

// Appends the events to `b`'s columns (kernels as stored) after Check. DataLoss for a damaged
// blob; never more events than the declared count.
absl::Status Decode(absl::string_view blob, uint64_t max_bytes, EventBlock* b);

}  // namespace podprof::trace::timeline_v2

#endif  // PODPROF_TRACE_TIMELINE_V2_H_
