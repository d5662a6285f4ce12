#include "trace/columns.h"

#include <cstring>
#include <optional>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/checked.h"
#include "common/status_macros.h"
#include "common/zstd_codec.h"
#include "trace/counter_v2.h"
#include "trace/timeline_v2.h"
#include "trace/varint.h"

namespace podprof::trace {
namespace {

// Upper bound of a varint's size, for the count in front of a run.
constexpr size_t kCountBytes = 10;

// An encoded event: start delta, duration, kernel and collective, a varint each.
constexpr uint64_t kMinEventBytes = 4;
constexpr uint64_t kMaxEventBytes = 4 * kCountBytes;

// The count at the front in a block of its own: ingest reads it (EncodedCount) for every block
// and series it stores, and must not decompress their events to do so.
std::string Compress(const std::string& raw) { return ZstdCompress(raw, 1, kCountBytes); }

absl::StatusOr<std::string> Decompress(absl::string_view blob, uint64_t max_bytes,
                                       absl::string_view what) {
  return ZstdDecompress(blob, max_bytes, what);
}

}  // namespace

std::string EncodeTimeline(const EventBlock& b, const std::vector<int64_t>& kernel_ids) {
  return EncodeTimeline(b, kernel_ids, 0, b.size());
}

std::string EncodeTimeline(const EventBlock& b, const std::vector<int64_t>& kernel_ids,
                           size_t begin, size_t end) {
  return timeline_v2::Encode(b, kernel_ids, begin, end, kMaxEventsPerByte);
}

std::string EncodeTimelineV1(const EventBlock& b, const std::vector<int64_t>& kernel_ids,
                             size_t begin, size_t end) {
  thread_local std::string raw;  // reused: ingest encodes many blocks per thread
  raw.clear();
  raw.reserve(8 + (end - begin) * 12);
  PutVarint(end - begin, &raw);
  int64_t prev = 0;
  for (size_t i = begin; i < end; ++i) {
    PutVarint(ZigZag(b.start_ps[i] - prev), &raw);
    prev = b.start_ps[i];
    PutVarint(ZigZag(b.duration_ps[i]), &raw);
    PutVarint(static_cast<uint64_t>(kernel_ids[b.kernel[i]]), &raw);
    PutVarint(b.collective[i], &raw);
  }
  std::string out = Compress(raw);
  if (raw.capacity() > (16u << 20)) std::string().swap(raw);  // no huge buffer left behind
  return out;
}

absl::Status DecodeTimeline(absl::string_view blob, EventBlock* b) {
  if (timeline_v2::Is(blob)) return timeline_v2::Decode(blob, uint64_t{1} << 32, b);
  ASSIGN_OR_RETURN(std::string raw, Decompress(blob, uint64_t{1} << 32, "timeline block"));
  absl::string_view in(raw);
  uint64_t n;
  if (!GetVarint(&in, &n) || n > in.size()) return absl::DataLossError("timeline block header");
  b->start_ps.reserve(b->start_ps.size() + n);
  b->duration_ps.reserve(b->duration_ps.size() + n);
  b->kernel.reserve(b->kernel.size() + n);
  b->collective.reserve(b->collective.size() + n);
  int64_t prev = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t start, dur, kernel, coll;
    if (!GetVarint(&in, &start) || !GetVarint(&in, &dur) || !GetVarint(&in, &kernel) ||
        !GetVarint(&in, &coll)) {
      return absl::DataLossError("timeline block is truncated");
    }
    // A stored or received block is anyone's bytes: deltas that pass an int64 are damage.
    const std::optional<int64_t> next = CheckedAdd(prev, UnZigZag(start));
    if (!next) return absl::DataLossError("timeline block's start times pass an int64");
    prev = *next;
    b->start_ps.push_back(prev);
    b->duration_ps.push_back(UnZigZag(dur));
    b->kernel.push_back(static_cast<uint32_t>(kernel));
    b->collective.push_back(coll);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> EncodedCount(absl::string_view blob, absl::string_view what) {
  // Timeline blobs and the first counter encoding are zstd frames; the second counter encoding
  // starts with a skippable frame of the count, which no zstd frame's magic matches.
  if (counter_v2::Is(blob)) return counter_v2::Count(blob, what);
  if (timeline_v2::Is(blob)) return timeline_v2::Count(blob, what);
  ASSIGN_OR_RETURN(std::string front, ZstdDecompressPrefix(blob, kCountBytes, what));
  absl::string_view in(front);
  uint64_t n;
  if (!GetVarint(&in, &n)) return absl::DataLossError(absl::StrCat(what, " header"));
  return n;
}

std::string EncodeCountersV1(const int64_t* time_ns, const double* value, size_t begin,
                             size_t end) {
  thread_local std::string raw;  // reused: many series per thread
  raw.clear();
  raw.reserve(kCountBytes + (end - begin) * 18);
  PutVarint(end - begin, &raw);
  uint64_t prev = 0;
  for (size_t i = begin; i < end; ++i) {
    // Modulo 2^64 (no signed overflow); the decoder refuses a delta past an int64.
    PutVarint(ZigZag(static_cast<int64_t>(static_cast<uint64_t>(time_ns[i]) - prev)), &raw);
    prev = static_cast<uint64_t>(time_ns[i]);
    char bytes[8];
    std::memcpy(bytes, &value[i], 8);
    raw.append(bytes, 8);
  }
  std::string out = Compress(raw);
  if (raw.capacity() > (16u << 20)) std::string().swap(raw);  // no huge buffer left behind
  return out;
}

std::string EncodeCounters(const int64_t* time_ns, const double* value, size_t begin, size_t end) {
  return counter_v2::Encode(time_ns, value, begin, end);
}

std::string EncodeCountersSharingTimes(absl::string_view reference, const int64_t* ref_time,
                                       size_t ref_n, const int64_t* time_ns, const double* value,
                                       size_t begin, size_t end) {
  return counter_v2::EncodeSharingTimes(reference, ref_time, ref_n, time_ns, value, begin, end);
}

absl::StatusOr<std::string> CounterReference(absl::string_view blob) {
  if (counter_v2::Is(blob)) return counter_v2::Reference(blob);
  return std::string();
}

size_t MaxCounterBytesWithin(size_t limit) {
  // ZSTD_compressBound(n) = n + n/256 + (n < 128 KiB ? (128 KiB - n) >> 11 : 0), at most
  // n + n/256 + 64; the frame's header and checksum are inside it. The first encoding's count
  // block adds its header and the count stored raw (kCountBytes), 16 bytes with room to spare:
  // n + n/256 + 80 in all. The second encoding's frame is at most what its plain body (a mode
  // byte more than the samples took in the first, S + 1 with S <= n - kCountBytes) takes: the
  // other modes' frames are written only when no larger than S + 1 (counter_v2.h), the plain
  // body within zstd's bound; with its header 8 bytes and the count (<= 10):
  // 18 + (S + 1) + (S + 1)/256 + 64 <= n + n/256 + 73.
  // Its padding only raises a blob to one byte per kMaxSamplesPerByte samples, far below either.
  constexpr size_t kSlack = 64 + 16;
  if (limit < kSlack + kCountBytes + 18) return 0;
  const size_t n = (limit - kSlack) * 256 / 257;
  return n > kCountBytes ? n - kCountBytes : 0;
}

absl::Status DecodeCounters(absl::string_view blob, CounterSeries* s, uint64_t max_bytes,
                            const counter_v2::ReferenceTimes* reference) {
  if (counter_v2::Is(blob)) return counter_v2::Decode(blob, s, max_bytes, reference);
  ASSIGN_OR_RETURN(std::string raw, Decompress(blob, max_bytes, "counter series"));
  absl::string_view in(raw);
  uint64_t n;
  if (!GetVarint(&in, &n) || n > in.size()) return absl::DataLossError("counter series header");
  s->time_ns.clear();
  s->value.clear();
  s->time_ns.reserve(n);
  s->value.reserve(n);
  int64_t prev = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t delta;
    if (!GetVarint(&in, &delta) || in.size() < 8) {
      return absl::DataLossError("counter series is truncated");
    }
    const std::optional<int64_t> next = CheckedAdd(prev, UnZigZag(delta));
    if (!next) return absl::DataLossError("counter series' times pass an int64");
    prev = *next;
    double v;
    std::memcpy(&v, in.data(), 8);
    in.remove_prefix(8);
    s->time_ns.push_back(prev);
    s->value.push_back(v);
  }
  return absl::OkStatus();
}

absl::StatusOr<CounterSeries> DecodeCounters(absl::string_view blob) {
  CounterSeries s;
  RETURN_IF_ERROR(DecodeCounters(blob, &s));
  return s;
}

std::vector<int64_t> HostKernelNumbers(size_t kernels) {
  std::vector<int64_t> numbers(kernels);
  for (size_t i = 0; i < kernels; ++i) numbers[i] = static_cast<int64_t>(i) + 1;
  return numbers;
}

std::string EncodeKernelMap(const std::vector<int64_t>& ids) {
  std::string out;
  out.reserve(ids.size() * 3);
  for (int64_t id : ids) PutVarint(static_cast<uint64_t>(id), &out);
  return out;
}

absl::StatusOr<std::vector<int64_t>> DecodeKernelMap(absl::string_view blob) {
  std::vector<int64_t> ids;
  uint64_t v;
  while (!blob.empty()) {
    if (!GetVarint(&blob, &v)) return absl::DataLossError("kernel map is truncated");
    ids.push_back(static_cast<int64_t>(v));
  }
  return ids;
}

absl::Status MapKernels(const std::vector<int64_t>& map, EventBlock* b) {
  if (map.empty()) return absl::OkStatus();
  for (uint32_t& k : b->kernel) {
    if (k == 0 || k > map.size()) {
      return absl::DataLossError(absl::StrCat("timeline block names kernel ", k, " of a host with ",
                                              map.size(), " kernels"));
    }
    k = static_cast<uint32_t>(map[k - 1]);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> CheckTimeline(absl::string_view blob, uint64_t max_bytes) {
  if (timeline_v2::Is(blob)) return timeline_v2::Check(blob, max_bytes, kMaxEventsPerByte);
  ASSIGN_OR_RETURN(uint64_t raw, ZstdCheckedContentSize(blob, max_bytes, "timeline block"));
  ASSIGN_OR_RETURN(uint64_t n, EncodedCount(blob, "timeline block"));
  // Each event is four varints of 1 to 10 bytes, after the count's own: a count the content
  // cannot hold (one event stored as 10^15) or content the count does not fill (zero padding
  // that decompresses to 64 MiB on every read) is not a timeline.
  const uint64_t count_bytes = VarintSize(n);
  if (n > raw / kMinEventBytes || raw < count_bytes + n * kMinEventBytes ||
      raw > count_bytes + n * kMaxEventBytes) {
    return absl::DataLossError(absl::StrCat("timeline block claims ", n, " events in ", raw,
                                            " bytes (each takes ", kMinEventBytes, " to ",
                                            kMaxEventBytes, ")"));
  }
  // Events a compressed byte may stand for: real timelines compress a few times, a run of
  // identical events thousands of times (16.7 million events in 6 KB made an export of
  // 9.6 GB); a block past this ratio is refused before anything expands it.
  if (n > kMaxEventsPerByte * blob.size()) {
    return absl::DataLossError(absl::StrCat("timeline block claims ", n, " events in ", blob.size(),
                                            " compressed bytes, more than ", kMaxEventsPerByte,
                                            " a byte"));
  }
  return n;
}

absl::Status DecodeEncodedBlocks(HostCapture* capture) {
  for (EventBlock& b : capture->blocks) {
    if (b.encoded.empty() || b.size() > 0) continue;
    absl::Status d = DecodeTimeline(b.encoded, &b);
    for (size_t i = 0; d.ok() && i < b.size(); ++i) {
      if (b.kernel[i] == 0 || b.kernel[i] > capture->kernels.size()) {
        d = absl::DataLossError(absl::StrCat("event ", i, " names kernel id ", b.kernel[i],
                                             " but ids 1..", capture->kernels.size(),
                                             " are defined"));
      }
      --b.kernel[i];
    }
    if (!d.ok()) {
      const int ordinal = static_cast<size_t>(b.chip) < capture->host.chips.size()
                              ? capture->host.chips[b.chip].ordinal
                              : b.chip;
      return absl::InvalidArgumentError(
          absl::StrCat("timeline \"", b.line, "\" of chip ", ordinal, ": ", d.message()));
    }
    std::string().swap(b.encoded);
    b.encoded_events = 0;
  }
  return absl::OkStatus();
}

absl::Status CheckCounters(absl::string_view blob, uint64_t max_bytes) {
  if (counter_v2::Is(blob)) return counter_v2::Check(blob, max_bytes).status();
  return ZstdCheckFrame(blob, max_bytes, "counter series");
}

absl::Status DecodeChipCounters(const std::vector<CounterSeries*>& series,
                                const std::vector<bool>& wanted, size_t* failed) {
  const size_t n = series.size();
  // What each blob's header names (nullopt: a damaged header, which only matters when the
  // series is wanted): the series named are decoded first and their times gathered.
  std::vector<std::optional<std::string>> refs(n);
  absl::flat_hash_set<std::string> named;
  for (size_t i = 0; i < n; ++i) {
    const CounterSeries& s = *series[i];
    if (s.encoded.empty()) {
      refs[i].emplace();
      continue;
    }
    absl::StatusOr<std::string> r = CounterReference(s.encoded);
    if (!r.ok() && wanted[i]) {
      *failed = i;
      return r.status();
    }
    if (r.ok()) refs[i] = std::move(*r);
    if (r.ok() && wanted[i] && !refs[i]->empty()) named.insert(*refs[i]);
  }
  auto decode = [&](size_t i, const counter_v2::ReferenceTimes* reference) -> absl::Status {
    CounterSeries& s = *series[i];
    if (!s.time_ns.empty() || s.encoded.empty()) return absl::OkStatus();
    absl::Status d = DecodeCounters(s.encoded, &s, uint64_t{1} << 32, reference);
    if (!d.ok()) *failed = i;
    return d;
  };
  // The series that hold their own times: the wanted ones, and those a wanted one names
  // (helpers, whose samples are dropped again unless they held them already).
  std::vector<bool> helper(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (!refs[i] || !refs[i]->empty()) continue;
    helper[i] = !wanted[i] && named.contains(series[i]->name) && series[i]->time_ns.empty();
    if (wanted[i] || helper[i]) RETURN_IF_ERROR(decode(i, nullptr));
  }
  absl::flat_hash_map<std::string, std::vector<int64_t>> gathered;
  for (size_t i = 0; i < n; ++i) {
    if (!refs[i] || !refs[i]->empty() || !named.contains(series[i]->name)) continue;
    auto& t = gathered[series[i]->name];
    t.insert(t.end(), series[i]->time_ns.begin(), series[i]->time_ns.end());
  }
  // Indexed once for all the blobs that take their times from them.
  absl::flat_hash_map<std::string, counter_v2::ReferenceTimes> times;
  for (auto& [name, t] : gathered) times.emplace(name, counter_v2::ReferenceTimes(std::move(t)));
  for (size_t i = 0; i < n; ++i) {
    if (!wanted[i] || !refs[i] || refs[i]->empty()) continue;
    auto it = times.find(*refs[i]);
    RETURN_IF_ERROR(decode(i, it == times.end() ? nullptr : &it->second));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!helper[i]) continue;
    std::vector<int64_t>().swap(series[i]->time_ns);
    std::vector<double>().swap(series[i]->value);
  }
  return absl::OkStatus();
}

absl::Status DecodeEncodedSeries(HostCapture* capture) {
  // A chip's series decode together: some take their times from another of the chip's.
  absl::btree_map<int, std::vector<CounterSeries*>> by_chip;
  for (CounterSeries& s : capture->counters) by_chip[s.chip].push_back(&s);
  for (const auto& [chip, series] : by_chip) {
    size_t failed = 0;
    if (absl::Status d =
            DecodeChipCounters(series, std::vector<bool>(series.size(), true), &failed);
        !d.ok()) {
      const int ordinal = static_cast<size_t>(chip) < capture->host.chips.size()
                              ? capture->host.chips[chip].ordinal
                              : chip;
      return absl::InvalidArgumentError(
          absl::StrCat("counter ", series[failed]->name, " of chip ", ordinal, ": ", d.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace podprof::trace
