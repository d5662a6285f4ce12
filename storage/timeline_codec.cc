#include "storage/timeline_codec.h"

#include <zstd.h>

#include <cstring>

#include "common/status_macros.h"
#include "trace/varint.h"

namespace podprof::storage {
namespace {

using trace::GetVarint;
using trace::PutVarint;
using trace::UnZigZag;
using trace::ZigZag;

std::string Compress(const std::string& raw) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3);
  out.resize(ZSTD_isError(n) ? 0 : n);
  return out;
}

absl::StatusOr<std::string> Decompress(absl::string_view blob) {
  unsigned long long size = ZSTD_getFrameContentSize(blob.data(), blob.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > (1ull << 32)) {
    return absl::DataLossError("timeline block is not a zstd frame");
  }
  std::string out(size, '\0');
  size_t n = ZSTD_decompress(out.data(), out.size(), blob.data(), blob.size());
  if (ZSTD_isError(n)) return absl::DataLossError(ZSTD_getErrorName(n));
  return out;
}

}  // namespace

std::string EncodeTimeline(const trace::EventBlock& b, const std::vector<int64_t>& kernel_ids) {
  std::string raw;
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
  return Compress(raw);
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
  std::string raw;
  raw.reserve(8 + s.value.size() * 12);
  PutVarint(s.value.size(), &raw);
  int64_t prev = 0;
  for (size_t i = 0; i < s.value.size(); ++i) {
    PutVarint(ZigZag(s.time_ns[i] - prev), &raw);
    prev = s.time_ns[i];
    char bytes[8];
    std::memcpy(bytes, &s.value[i], 8);
    raw.append(bytes, 8);
  }
  return Compress(raw);
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
