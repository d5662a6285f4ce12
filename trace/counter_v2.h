// The second encoding of counter series (trace/columns.h says when each is written and read):
// the samples as what they mostly are, running totals and levels sampled on a grid.
//
// A blob is a zstd skippable frame holding the sample count, then one zstd frame of the body:
//   magic    4 bytes, 0x184D2A52 little-endian (a skippable frame's magic, variant 2)
//   size     4 bytes little-endian, the bytes of the header that follow
//   header   varint sample count, for mode 4 alone the name of the series whose times it
//            takes (a varint length, then the name), then zero bytes (padding, see
//            kMaxSamplesPerByte)
//   frame    one zstd frame with its content size: the body
// A first encoding's blob is a single zstd frame, whose magic (0xFD2FB528) no skippable frame
// shares, so the first four bytes tell the two apart; the count is read without decompressing
// anything. The whole blob is a valid zstd stream: `zstd -d` gives the body.
//
// The body is a mode byte, then the samples:
//   mode 3 (columns): a flags byte (1: times as deltas of deltas, else deltas; 2: values as
//     XORs, else differences), the time column's plane count (0-8), the value column's (0-8),
//     then the time column and the value column, each as that many planes of one byte per
//     sample, the most significant plane first. A time is its zigzag delta (ns, modulo 2^64;
//     the first sample's from 0) or delta of delta (as mode 1); a value the zigzag difference
//     of its bits, as an int64 modulo 2^64, from the previous value's (the first's from +0.0),
//     or their XOR. The body is exactly 4 + count x (both plane counts) bytes. Written when
//     its frame is the smallest: times that vary (kernel boundaries: their deltas' high bytes
//     repeat each training step, their low bytes are noise, apart in their planes), running
//     totals (a difference's high bytes repeat), levels that recur each step (zstd's matcher
//     finds a step's run of value bytes again in the value column).
//   mode 1 (records): runs of samples that repeat one (time step change, value step), each
//     a varint h = (run - 1) << 3 | has_dod << 2 | kind, then, when has_dod, the zigzag
//     varint delta of delta of the times (ns, modulo 2^64; the first sample's delta is its
//     time, the second's is its delta from the first), then by kind the value step:
//       0 the value's bits equal the previous value's (the first sample's previous is +0.0)
//       1 both are integers within 2^53 (not -0.0): zigzag varint of their difference
//       2 otherwise: the XOR of the two values' bits, as a byte lz << 4 | tz (its zero bytes
//         at the top and at the bottom) and its 8 - lz - tz other bytes, most significant first
//     A constant level on a grid is one record, a running total of a steady rate too.
//   mode 2 (delta records): mode 1's records with the time delta in place of the delta of
//     delta: written when the deltas take fewer bytes (times that vary, as kernel starts do;
//     the delta of delta of jitter is larger than the jitter).
//   mode 0 (plain): per sample the zigzag varint time delta (modulo 2^64) and the value's 8
//     little-endian bytes, the first encoding's samples. Written when the other modes' frames
//     would take more bytes than the plain body does uncompressed (noise on irregular times),
//     so that no series takes more than zstd's bound on its first encoding's samples: what
//     MaxCounterBytesWithin bounds, and agents size chunks by.
//   mode 4 (shared times): the samples' times are some of another series' of the same chip,
//     the one the header names (the reference): the zigzag varint time of the first sample,
//     the varint span (how many of the reference's samples, from the one at that time, the
//     series' samples cover), a checksum of the series' times (4 bytes little-endian), a flags
//     byte (2: values as XORs), the value column's plane count, a bitmap of span bits (bit j,
//     byte j/8's bit j%8, set when the reference's sample j from the first is one of this
//     series': the first is, as many as the count are, no bit past the span), then the value
//     column's planes as mode 3's. A chip's counters are sampled together: the busy gauges at
//     some of the instants its energy totals are, which take about 2 bytes a sample of their
//     own (measured on podprof-loadgen's v5p host-second) and a bit of the bitmap here. The
//     reference's times are all of its blobs' of the chip, in the order they arrived; a blob
//     of mode 4 is never a reference. Written by EncodeSharingTimes, read with the reference's
//     times: where those repeat a time (two pieces of a chip that overlap), each of the first
//     kMaxCandidates samples at the first time is tried, and the one whose times match the
//     checksum is taken.
// Mode 3 came after modes 0-2 (the only ones blobs encoded on 2026-12-07 hold); every mode
// reads. The encoder writes whichever of mode 3 and mode 1 or 2 compresses smaller (the records
// compressed only when their body is under 8 times mode 3's frame, else they cannot win), or
// mode 0.
// Exact for every double (NaN payloads, -0.0, infinities) and every int64 time.
#ifndef PODPROF_TRACE_COUNTER_V2_H_
#define PODPROF_TRACE_COUNTER_V2_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trace/model.h"

namespace podprof::trace::counter_v2 {

inline constexpr uint32_t kMagic = 0x184D2A52;

// The zstd level of the body (the measurements are in trace/columns.h).
inline constexpr int kLevel = 3;

// The most samples one byte of a blob may stand for. A run record makes a constant of a
// million samples a few bytes; the first encoding spent at least 9 bytes a sample before zstd,
// whose best ratio keeps it under about 3,600 samples a byte. A blob past this is refused (a
// hostile agent's 40 bytes claiming millions of samples, decoded on every read and export),
// and the encoder pads the header of an honest one that would be (a byte per 4,096 samples).
inline constexpr uint64_t kMaxSamplesPerByte = 4096;

// What a sample takes decoded (its time and value): `max_bytes` bounds count times this.
inline constexpr uint64_t kDecodedSampleBytes = 16;

// True when `blob` starts with this encoding's magic (it may still be damaged).
bool Is(absl::string_view blob);

// Samples [begin, end) of a series, the body compressed at `level`.
std::string Encode(const int64_t* time_ns, const double* value, size_t begin, size_t end,
                   int level = kLevel);

// The declared sample count, from the header alone. DataLoss naming `what` for a damaged one.
absl::StatusOr<uint64_t> Count(absl::string_view blob, absl::string_view what);

// What can be checked without decompressing: the header, a count within `max_bytes` decoded
// and kMaxSamplesPerByte, one whole zstd frame after it whose content is within `max_bytes` and
// what the count can fill. Returns the count. DataLoss otherwise.
absl::StatusOr<uint64_t> Check(absl::string_view blob, uint64_t max_bytes);

// Samples [begin, end) of a series as mode 4, taking their times from the reference series
// named `reference`, whose times are `ref_time[0, ref_n)` (strictly increasing), when they are
// all among them and that takes no more than the plain mode would; otherwise as Encode does.
std::string EncodeSharingTimes(absl::string_view reference, const int64_t* ref_time, size_t ref_n,
                               const int64_t* time_ns, const double* value, size_t begin,
                               size_t end, int level = kLevel);

// The times of a reference series (all its blobs' of the chip, in order), indexed once for
// every blob that takes its times from them: a time is found in O(log n) whether or not they
// increase (they do not where two pieces of a chip overlap).
class ReferenceTimes {
 public:
  explicit ReferenceTimes(std::vector<int64_t> times);
  const std::vector<int64_t>& times() const { return times_; }
  // Up to `most` positions whose time is `t`, the first first.
  std::vector<size_t> Find(int64_t t, size_t most) const;

 private:
  std::vector<int64_t> times_;
  std::vector<size_t> by_time_;  // positions ordered by (time, position); empty when sorted
};

// The name of the series whose times a blob's samples take (mode 4), from the header alone;
// empty for one that holds its own. DataLoss for a damaged header.
absl::StatusOr<std::string> Reference(absl::string_view blob);

// Sets `s`'s times and values (replacing them) after Check. `reference`: the times of the
// series Reference names (null: the chip has none).
// DataLoss for a damaged blob, a mode 4 one without its reference or whose times are not
// the reference's; never produces more than the declared count.
absl::Status Decode(absl::string_view blob, CounterSeries* s, uint64_t max_bytes,
                    const ReferenceTimes* reference = nullptr);

}  // namespace podprof::trace::counter_v2

#endif  // PODPROF_TRACE_COUNTER_V2_H_
