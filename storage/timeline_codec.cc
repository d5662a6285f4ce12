#include "storage/timeline_codec.h"

#include <cstring>

#include "common/status_macros.h"
#include "common/zstd_codec.h"
#include "trace/varint.h"

namespace podprof::storage {
namespace {

using trace::GetVarint;
using trace::PutVarint;
using trace::UnZigZag;
using trace::ZigZag;

// Level 1: the store's blobs are compressed on ingest's critical path, once per capture, and
// level 3 cost twice the time for a few percent of size on these varint columns.
std::string Compress(const std::string& raw) { return ZstdCompress(raw, 1); }

absl::StatusOr<std::string> Decompress(absl::string_view blob) {
  return ZstdDecompress(blob, uint64_t{1} << 32, "timeline block");
}

}  // namespace

std::string EncodeTimeline(const trace::EventBlock& b, const std::vector<int64_t>& kernel_ids) {
  thread_local std::string raw;  // reused: ingest encodes many blocks per thread
  raw.clear();
  raw.reserve(8 + b.size() * 12);
  PutVarint(b.size(), &raw);
  int64_t prev = 0;
  for (size_t i = 0; i < b.size(); ++i) {
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

absl::Status DecodeTimeline(absl::string_view blob, trace::EventBlock* b) {
  ASSIGN_OR_RETURN(std::string raw, Decompress(blob));
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
    prev += UnZigZag(start);
    b->start_ps.push_back(prev);
    b->duration_ps.push_back(UnZigZag(dur));
    b->kernel.push_back(static_cast<uint32_t>(kernel));
    b->collective.push_back(coll);
  }
  return absl::OkStatus();
}

std::string EncodeCounters(const trace::CounterSeries& s) {
  thread_local std::string raw;  // reused: ingest encodes many series per thread
  raw.clear();
  raw.reserve(8 + s.value.size() * 18);
  PutVarint(s.value.size(), &raw);
  int64_t prev = 0;
  for (size_t i = 0; i < s.value.size(); ++i) {
    PutVarint(ZigZag(s.time_ns[i] - prev), &raw);
    prev = s.time_ns[i];
    char bytes[8];
    std::memcpy(bytes, &s.value[i], 8);
    raw.append(bytes, 8);
  }
  std::string out = Compress(raw);
  if (raw.capacity() > (16u << 20)) std::string().swap(raw);  // no huge buffer left behind
  return out;
}

absl::StatusOr<trace::CounterSeries> DecodeCounters(absl::string_view blob) {
  ASSIGN_OR_RETURN(std::string raw, Decompress(blob));
  absl::string_view in(raw);
  uint64_t n;
  if (!GetVarint(&in, &n) || n > in.size()) return absl::DataLossError("counter series header");
  trace::CounterSeries out;
  out.time_ns.reserve(n);
  out.value.reserve(n);
  int64_t prev = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t delta;
    if (!GetVarint(&in, &delta) || in.size() < 8) {
      return absl::DataLossError("counter series is truncated");
    }
    prev += UnZigZag(delta);
    double v;
    std::memcpy(&v, in.data(), 8);
    in.remove_prefix(8);
    out.time_ns.push_back(prev);
    out.value.push_back(v);
  }
  return out;
}

}  // namespace podprof::storage
