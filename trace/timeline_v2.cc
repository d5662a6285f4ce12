#include "trace/timeline_v2.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/zstd_codec.h"
#include "trace/count_frame.h"
#include "trace/varint.h"

namespace podprof::trace::timeline_v2 {
namespace {

using count_frame::GetPlanes;
using count_frame::Header;
using count_frame::PutPlanes;
using count_frame::SignificantBytes;

constexpr uint8_t kModePlain = 0, kModeColumns = 1;
// Per event: at least a kernel and a collective varint of a byte each (mode 1, no planes); at
// most four varints of 10 bytes (mode 0).
constexpr uint64_t kMinEventBytes = 2, kMaxEventBytes = 40;
// The body's bytes before its events: the mode, and mode 1's two plane counts.
constexpr uint64_t kMaxBodyHeader = 3;

// Zigzag of a difference of int64s taken modulo 2^64, so that no input overflows and every
// one round-trips.
uint64_t ZigZagDiff(int64_t a, int64_t b) {
  return ZigZag(static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)));
}
int64_t AddMod(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

// The first encoding's events: per event zigzag start delta, zigzag duration, kernel,
// collective.
void PutPlain(const EventBlock& b, const std::vector<int64_t>& kernel_ids, size_t begin, size_t end,
              std::string* raw) {
  int64_t prev = 0;
  for (size_t i = begin; i < end; ++i) {
    PutVarint(ZigZagDiff(b.start_ps[i], prev), raw);
    prev = b.start_ps[i];
    PutVarint(ZigZag(b.duration_ps[i]), raw);
    PutVarint(static_cast<uint64_t>(kernel_ids[b.kernel[i]]), raw);
    PutVarint(b.collective[i], raw);
  }
}

// The bytes PutPlain writes, without writing them.
size_t PlainBytes(const EventBlock& b, const std::vector<int64_t>& kernel_ids, size_t begin,
                  size_t end) {
  size_t n = 0;
  int64_t prev = 0;
  for (size_t i = begin; i < end; ++i) {
    n += VarintSize(ZigZagDiff(b.start_ps[i], prev)) + VarintSize(ZigZag(b.duration_ps[i])) +
         VarintSize(static_cast<uint64_t>(kernel_ids[b.kernel[i]])) + VarintSize(b.collective[i]);
    prev = b.start_ps[i];
  }
  return n;
}

void PutColumns(const EventBlock& b, const std::vector<int64_t>& kernel_ids, size_t begin,
                size_t end, std::string* raw) {
  thread_local std::vector<uint64_t> gaps, durations;
  gaps.clear();
  durations.clear();
  int gap_planes = 0, duration_planes = 0;
  int64_t prev_end = 0;
  for (size_t i = begin; i < end; ++i) {
    gaps.push_back(ZigZagDiff(b.start_ps[i], prev_end));
    durations.push_back(ZigZag(b.duration_ps[i]));
    prev_end = AddMod(b.start_ps[i], b.duration_ps[i]);
    gap_planes = std::max(gap_planes, SignificantBytes(gaps.back()));
    duration_planes = std::max(duration_planes, SignificantBytes(durations.back()));
  }
  raw->push_back(static_cast<char>(gap_planes));
  raw->push_back(static_cast<char>(duration_planes));
  PutPlanes(gaps, gap_planes, raw);
  PutPlanes(durations, duration_planes, raw);
  for (size_t i = begin; i < end; ++i)
    PutVarint(static_cast<uint64_t>(kernel_ids[b.kernel[i]]), raw);
  for (size_t i = begin; i < end; ++i) PutVarint(b.collective[i], raw);
  if (end - begin > (1u << 20)) {  // no huge buffers left behind
    std::vector<uint64_t>().swap(gaps);
    std::vector<uint64_t>().swap(durations);
  }
}

absl::StatusOr<Header> ReadHeader(absl::string_view blob, absl::string_view what) {
  return count_frame::Read(blob, kMagic, what, "second timeline encoding", /*labelled=*/false);
}

// The body's frame: whole, its content within `max_bytes` and what the count can fill. A
// count the content cannot hold, or content the count does not fill (padding decompressed on
// every read), is not a timeline.
absl::Status CheckBody(absl::string_view blob, const Header& h, uint64_t max_bytes) {
  ASSIGN_OR_RETURN(const uint64_t raw,
                   ZstdCheckedContentSize(blob.substr(h.size), max_bytes, "timeline block"));
  const uint64_t n = h.count;
  if (n > raw / kMinEventBytes || raw < 1 + n * kMinEventBytes ||
      raw > kMaxBodyHeader + n * kMaxEventBytes) {
    return absl::DataLossError(absl::StrCat("timeline block claims ", n, " events in ", raw,
                                            " bytes (each takes ", kMinEventBytes, " to ",
                                            kMaxEventBytes, ")"));
  }
  return absl::OkStatus();
}

absl::Status Truncated() { return absl::DataLossError("timeline block is truncated"); }

absl::Status DecodePlain(absl::string_view in, uint64_t n, EventBlock* b) {
  int64_t prev = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t start, dur, kernel, coll;
    if (!GetVarint(&in, &start) || !GetVarint(&in, &dur) || !GetVarint(&in, &kernel) ||
        !GetVarint(&in, &coll) || kernel > UINT32_MAX) {
      return Truncated();
    }
    prev = AddMod(prev, UnZigZag(start));
    b->start_ps.push_back(prev);
    b->duration_ps.push_back(UnZigZag(dur));
    b->kernel.push_back(static_cast<uint32_t>(kernel));
    b->collective.push_back(coll);
  }
  return in.empty() ? absl::OkStatus() : absl::DataLossError("timeline block has trailing bytes");
}

absl::Status DecodeColumns(absl::string_view in, uint64_t n, EventBlock* b) {
  if (in.size() < 2) return Truncated();
  const int gap_planes = static_cast<uint8_t>(in[0]), duration_planes = static_cast<uint8_t>(in[1]);
  in.remove_prefix(2);
  if (gap_planes > 8 || duration_planes > 8) {
    return absl::DataLossError("timeline block's columns have more than 8 planes");
  }
  const uint64_t plane_bytes = n * static_cast<uint64_t>(gap_planes + duration_planes);
  if (in.size() < plane_bytes) return Truncated();
  const char* gaps = in.data();
  const char* durations = gaps + n * gap_planes;
  in.remove_prefix(plane_bytes);
  const size_t first = b->size();
  int64_t prev_end = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t start = AddMod(prev_end, UnZigZag(GetPlanes(gaps, n, gap_planes, i)));
    const int64_t duration = UnZigZag(GetPlanes(durations, n, duration_planes, i));
    b->start_ps.push_back(start);
    b->duration_ps.push_back(duration);
    prev_end = AddMod(start, duration);
  }
  b->kernel.resize(first + n);
  b->collective.resize(first + n);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t kernel;
    if (!GetVarint(&in, &kernel) || kernel > UINT32_MAX) return Truncated();
    b->kernel[first + i] = static_cast<uint32_t>(kernel);
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (!GetVarint(&in, &b->collective[first + i])) return Truncated();
  }
  return in.empty() ? absl::OkStatus() : absl::DataLossError("timeline block has trailing bytes");
}

}  // namespace

bool Is(absl::string_view blob) { return count_frame::Is(blob, kMagic); }

std::string Encode(const EventBlock& b, const std::vector<int64_t>& kernel_ids, size_t begin,
                   size_t end, uint64_t max_events_per_byte, int level) {
  thread_local std::string raw;  // reused: ingest encodes many blocks per thread
  raw.assign(1, static_cast<char>(kModeColumns));
  PutColumns(b, kernel_ids, begin, end, &raw);
  std::string frame = ZstdCompress(raw, level);
  // The plain body's bytes: what no frame may pass, so that the stream's sizing stays a bound.
  // Counted, and written only when the columns' frame passes it (rarely: an outlier widens a
  // whole column).
  if (frame.empty() || frame.size() > 1 + PlainBytes(b, kernel_ids, begin, end)) {
    raw.assign(1, static_cast<char>(kModePlain));
    PutPlain(b, kernel_ids, begin, end, &raw);
    frame = ZstdCompress(raw, level);
  }
  if (raw.capacity() > (16u << 20)) std::string().swap(raw);  // no huge buffer left behind
  if (frame.empty()) return std::string();
  // An honest blob past the events-per-byte bound is padded up to it rather than refused.
  return count_frame::Wrap(kMagic, end - begin, frame, max_events_per_byte);
}

absl::StatusOr<uint64_t> Count(absl::string_view blob, absl::string_view what) {
  ASSIGN_OR_RETURN(const Header h, ReadHeader(blob, what));
  return h.count;
}

absl::StatusOr<uint64_t> Check(absl::string_view blob, uint64_t max_bytes,
                               uint64_t max_events_per_byte) {
  ASSIGN_OR_RETURN(const Header h, ReadHeader(blob, "timeline block"));
  // Events a compressed byte may stand for (columns.h, kMaxEventsPerByte).
  if (h.count > max_events_per_byte * blob.size()) {
    return absl::DataLossError(absl::StrCat("timeline block claims ", h.count, " events in ",
                                            blob.size(), " compressed bytes, more than ",
                                            max_events_per_byte, " a byte"));
  }
  RETURN_IF_ERROR(CheckBody(blob, h, max_bytes));
  return h.count;
}

absl::Status Decode(absl::string_view blob, uint64_t max_bytes, EventBlock* b) {
  ASSIGN_OR_RETURN(const Header h, ReadHeader(blob, "timeline block"));
  RETURN_IF_ERROR(CheckBody(blob, h, max_bytes));
  const uint64_t n = h.count;
  ASSIGN_OR_RETURN(const std::string body,
                   ZstdDecompress(blob.substr(h.size), max_bytes, "timeline block"));
  absl::string_view in(body);
  const uint8_t mode = static_cast<uint8_t>(in[0]);  // Check: at least the mode byte
  in.remove_prefix(1);
  const size_t before = b->size();
  b->start_ps.reserve(before + n);
  b->duration_ps.reserve(before + n);
  b->kernel.reserve(before + n);
  b->collective.reserve(before + n);
  absl::Status d;
  if (mode == kModePlain) {
    d = DecodePlain(in, n, b);
  } else if (mode == kModeColumns) {
    d = DecodeColumns(in, n, b);
  } else {
    d = absl::DataLossError(absl::StrCat("timeline block of unknown mode ", mode));
  }
  if (!d.ok()) {  // nothing of a damaged block is left behind
    b->start_ps.resize(before);
    b->duration_ps.resize(before);
    b->kernel.resize(before);
    b->collective.resize(before);
  }
  return d;
}

}  // namespace podprof::trace::timeline_v2
