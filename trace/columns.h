// podprof's column encodings of timelines and counter series: one codec for the capture stream
// (an agent sends counter series in it) and the store (SCHEMA.md: timeline_blocks,
// counter_series), so a series the agent encoded is stored as it arrived, not decoded and
// encoded again.
//
// Timeline blocks have two encodings, told apart by their first four bytes. The first (v1, what
// rows stored and agents released before 2026-12-07 hold) is one zstd frame (level 1:
// encoded on the agent's and the aggregator's hot paths) of a varint count, then per event its
// zigzag start delta, zigzag duration, kernel and collective. The second (v2,
// trace/timeline_v2.h), which EncodeTimeline writes, keeps the count in a zstd skippable frame
// in front and the events as columns (the gaps between events and their durations as byte
// planes): 0.70 of v1's bytes on a podprof-loadgen host-second. Both read everywhere.
//
// Counter series have two encodings, told apart by their first four bytes. The first (v1, what
// rows stored before 2026-12-07 and agents of the previous release hold) is a timeline's
// layout: the count, then per sample the zigzag time delta and the value's 8 bytes. The second
// (v2, trace/counter_v2.h), which EncodeCounters writes, takes the series as what it mostly is:
// levels and running totals sampled at kernel boundaries (times and values in columns of byte
// planes, mode 3) or on a grid (deltas of deltas of times, integer deltas or XORs of values,
// runs of repeated steps, modes 1 and 2), the count in a zstd skippable frame in front (read
// without decompressing anything), the body at zstd level 3. Both read everywhere.
// Measured by bench_counter_columns (--reps 5 --levels -1,1,3,5,9,19, 2 shared cores, timings
// +-30%) on the real captures' numeric event stats (they hold no counter series), the
// simulator's v5p (per-kernel counters) and v7x (TensorCore counters sampled every 5 us)
// kernel-profiling hosts, 20 ms, 2 chips, and a podprof-loadgen host-second (what
// bench_pod_scale stores: 4 chips' training steps, 8 counters each); bytes a sample v1 -> v2,
// encode Msamples/s v1 -> v2:
//   tpu_v6e fixture   62,692 samples  5.96 -> 5.08 (0.85)  11.3 ->  4.0
//   gpu_8xv100        96,480 samples  3.43 -> 2.65 (0.77)   8.9 ->  7.4
//   sim v5p            2,136 samples  5.70 -> 5.29 (0.93)  13.0 ->  5.5
//   sim v7x          618,984 samples  2.55 -> 0.26 (0.10)  27.3 -> 17.5
//   loadgen host-s   221,716 samples  4.83 -> 3.57 (0.74)  19.2 ->  8.5
// all: 0.46 of v1's bytes, in 1.8 times v1's encode time (columns and, where they may win,
// records are both compressed). The level: over all inputs, against level 3, level 1 takes
// 1.011 the bytes in 0.92 the time, 5: 0.985 / 1.70, 9: 0.981 / 3.4, 19: 0.954 / 56; -1:
// 1.054 / 0.72. Level 3 stays the knee. The loadgen's series are noise-bound: their kernels'
// times jitter 3% (about 13 bits a sample that no layout removes) and the energy totals'
// differences carry ~40 significant bits; level 19 takes 0.96 of level 3's bytes there.
#ifndef PODPROF_TRACE_COLUMNS_H_
#define PODPROF_TRACE_COLUMNS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trace/counter_v2.h"
#include "trace/model.h"

namespace podprof::trace {

// Per event: zigzag start delta (the first from 0), zigzag duration, kernel id
// (`kernel_ids[b.kernel[i]]`: the stored kernels.id), collective id.
std::string EncodeTimeline(const EventBlock& b, const std::vector<int64_t>& kernel_ids);
// Events [begin, end) of `b` alone, as a block of their own with `b`'s base.
std::string EncodeTimeline(const EventBlock& b, const std::vector<int64_t>& kernel_ids,
                           size_t begin, size_t end);
// The same events in the first encoding, as agents and aggregators wrote them before: for tests
// and benchmarks that compare the two, and stores that hold such rows.
std::string EncodeTimelineV1(const EventBlock& b, const std::vector<int64_t>& kernel_ids,
                             size_t begin, size_t end);
// Appends a blob's events to `b`'s columns; kernel ids stay the stored kernels.id. DataLoss
// for a damaged blob.
absl::Status DecodeTimeline(absl::string_view blob, EventBlock* b);

// The host's own kernel numbering in a timeline blob: its kernel index + 1, as agents encode
// their blocks and the store keeps them beside the host's kernel map (KernelMapOf).
std::vector<int64_t> HostKernelNumbers(size_t kernels);
// A host's kernel map as the store keeps it (capture_hosts.kernel_map): kernels.id for each
// kernel index, varints.
std::string EncodeKernelMap(const std::vector<int64_t>& ids);
absl::StatusOr<std::vector<int64_t>> DecodeKernelMap(absl::string_view blob);
// Turns a decoded block's host numbering into the store's kernels.id through `map` (the host's
// kernel map); an empty map (rows stored before the map was kept) leaves the ids as they are.
// DataLoss for a number outside the map.
absl::Status MapKernels(const std::vector<int64_t>& map, EventBlock* b);

// The most events one compressed byte of a timeline blob may stand for. Timelines with ps
// jitter hold about 0.2 events a byte, a simulated run of one kernel repeated identically
// about 760 (CaptureDecoderTest.TheEventsPerByteBoundLeavesHonestBlocksAlone prints both);
// zero padding or a forged run of empty events reaches thousands, and would expand on every
// read and export.
inline constexpr uint64_t kMaxEventsPerByte = 1024;

// What can be checked of a timeline blob without decoding it (one whole zstd frame, content
// within `max_bytes`, a count its content can hold and fills, at most kMaxEventsPerByte
// events a compressed byte), and its event count.
absl::StatusOr<uint64_t> CheckTimeline(absl::string_view blob, uint64_t max_bytes);
// Decodes each of `capture`'s blocks that holds only its encoding, its host numbering turned
// into kernel indices. InvalidArgument naming the first damaged block (chip ordinal, line) or
// one naming a kernel the capture does not define.
absl::Status DecodeEncodedBlocks(HostCapture* capture);

// The number of events (a timeline blob) or samples (a counter blob) the blob holds, read from
// its front without decoding the rest: for sizing an export before writing it. DataLoss naming
// `what` for a damaged blob.
absl::StatusOr<uint64_t> EncodedCount(absl::string_view blob, absl::string_view what);

// Samples [begin, end) of a series in the second encoding (trace/counter_v2.h).
std::string EncodeCounters(const int64_t* time_ns, const double* value, size_t begin, size_t end);
// The same samples in the first encoding, as agents and aggregators wrote them before: for tests
// and benchmarks that compare the two.
std::string EncodeCountersV1(const int64_t* time_ns, const double* value, size_t begin, size_t end);
// The same samples taking their times from the series named `reference` of the same chip,
// whose times are `ref_time[0, ref_n)` (strictly increasing), when they are all among them
// (counter_v2's mode 4, which readers decode with the reference's times); as EncodeCounters
// otherwise. Within the same bound (MaxCounterBytesWithin).
std::string EncodeCountersSharingTimes(absl::string_view reference, const int64_t* ref_time,
                                       size_t ref_n, const int64_t* time_ns, const double* value,
                                       size_t begin, size_t end);
inline std::string EncodeCounters(const CounterSeries& s) {
  return EncodeCounters(s.time_ns.data(), s.value.data(), 0, s.value.size());
}
// The most a run of samples may take unencoded in the first encoding (the count aside: per
// sample its zigzag time delta and 8 bytes) for its encoding, either, to stay within `limit`
// bytes whatever it holds (zstd's bound for incompressible input), 0 when not even one sample
// fits. The second encoding's frame never takes more than zstd's bound on the first's samples
// and a mode byte (trace/counter_v2.h's mode 0). The same holds of a run of timeline events
// measured in the first timeline encoding (trace/timeline_v2.h's mode 0), so the stream sizes
// its timeline runs by it too.
size_t MaxCounterBytesWithin(size_t limit);
// Sets `s`'s times and values from a blob of either encoding. DataLoss for a damaged blob, or
// one whose content, or (v2) samples decoded at 16 bytes each, would exceed `max_bytes` (a
// small blob from the network may not claim gigabytes).
// A blob that takes its times from another series of its chip (counter_v2's mode 4) needs
// that series' times, all its blobs' in the order they arrived (`reference`); DataLoss without.
absl::Status DecodeCounters(absl::string_view blob, CounterSeries* s,
                            uint64_t max_bytes = uint64_t{1} << 32,
                            const counter_v2::ReferenceTimes* reference = nullptr);
absl::StatusOr<CounterSeries> DecodeCounters(absl::string_view blob);
// The name of the series whose times a blob takes (from its header alone), empty for one that
// holds its own (the first encoding's always do). DataLoss for a damaged header.
absl::StatusOr<std::string> CounterReference(absl::string_view blob);
// Decodes `series` (the series of one chip, in the order they arrived, each holding its blob
// in `encoded`; `wanted[i]` says whether series i's samples are asked for): the wanted ones,
// and the unwanted ones that a wanted one takes its times from, which are then cleared again.
// The first damaged one's error, its index in `*failed`.
absl::Status DecodeChipCounters(const std::vector<CounterSeries*>& series,
                                const std::vector<bool>& wanted, size_t* failed);
// What can be checked of a blob without decoding it (v1: one whole zstd frame, content within
// `max_bytes`; v2: counter_v2::Check, the count within `max_bytes` decoded too): for a
// receiver that keeps series encoded until it needs their samples.
absl::Status CheckCounters(absl::string_view blob, uint64_t max_bytes);
// Fills in the samples of each of `capture`'s series that holds only its encoding
// (CounterSeries::encoded), keeping the encoding. InvalidArgument naming the first damaged
// series (chip ordinal, counter).
absl::Status DecodeEncodedSeries(HostCapture* capture);

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_COLUMNS_H_
