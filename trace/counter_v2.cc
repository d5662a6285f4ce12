#include "trace/counter_v2.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/zstd_codec.h"
#include "trace/count_frame.h"
#include "trace/varint.h"

namespace podprof::trace::counter_v2 {
namespace {

using count_frame::GetPlanes;
using count_frame::Header;
using count_frame::PutPlanes;
using count_frame::SignificantBytes;

constexpr uint8_t kModePlain = 0, kModeRecords = 1, kModeDeltaRecords = 2, kModeColumns = 3,
                  kModeSharedTimes = 4;
// Mode 3's flags: times as deltas of deltas (else deltas), values as XORs (else differences
// of their bits).
constexpr uint8_t kColumnDods = 1, kColumnXors = 2;
// Mode 3's fields before its planes: the mode, flags and the two columns' plane counts.
constexpr size_t kColumnsHeader = 4;
constexpr uint64_t kSame = 0, kIntDelta = 1, kXor = 2;
constexpr uint64_t kHasDod = 4;

// Mode 4's most that trying a reference's candidate starts costs: a reference whose times
// repeat (two pieces of one chip that overlap) has a few; more is a hostile blob's way to make
// every read scan its span again and again.
constexpr int kMaxCandidates = 8;

// The most a sample may take in a body: a record of one sample (h and the delta of delta 10
// bytes each, an XOR 9), a plain one (18) or columns (16, and 3 bytes of header a body).
constexpr uint64_t kMaxSampleBytes = 29;

// Integers of magnitude up to this are exact doubles, and so are their differences' sums.
constexpr double kMaxExactInt = 9007199254740992.0;  // 2^53

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}

double FromBits(uint64_t b) {
  double v;
  std::memcpy(&v, &b, 8);
  return v;
}

// A value an integer step reproduces exactly: not -0.0 (its bits are not +0.0's), no NaN or
// infinity (the comparisons fail).
bool IsExactInt(double v) {
  return v >= -kMaxExactInt && v <= kMaxExactInt && v == std::trunc(v) &&
         !(v == 0 && std::signbit(v));
}

// One sample's change from the previous: the zigzag delta of delta of its time, how its value
// follows (kind) and the step's argument (the zigzag integer difference or the XOR).
struct Step {
  uint64_t dod = 0;
  uint64_t kind = kSame;
  uint64_t arg = 0;
  bool operator==(const Step& o) const { return dod == o.dod && kind == o.kind && arg == o.arg; }
};

void PutRecord(const Step& s, uint64_t run, std::string* out) {
  PutVarint(((run - 1) << 3) | (s.dod != 0 ? kHasDod : 0) | s.kind, out);
  if (s.dod != 0) PutVarint(s.dod, out);
  if (s.kind == kIntDelta) {
    PutVarint(s.arg, out);
  } else if (s.kind == kXor) {
    const int lz = __builtin_clzll(s.arg) / 8, tz = __builtin_ctzll(s.arg) / 8;
    out->push_back(static_cast<char>(lz << 4 | tz));
    for (int b = 7 - lz; b >= tz; --b) out->push_back(static_cast<char>(s.arg >> (8 * b)));
  }
}

// What the plain mode takes, and the time fields of records with deltas of deltas and with
// deltas.
struct TimeSizes {
  size_t plain = 0, dods = 0, deltas = 0;
};

TimeSizes SizeTimes(const int64_t* time_ns, size_t begin, size_t end) {
  TimeSizes z;
  uint64_t prev_t = 0, prev_dt = 0;
  for (size_t i = begin; i < end; ++i) {
    // Modulo 2^64: every pair of int64 times has a difference, and adding it back is exact.
    const uint64_t t = static_cast<uint64_t>(time_ns[i]), dt = t - prev_t;
    const size_t delta = VarintSize(ZigZag(static_cast<int64_t>(dt)));
    z.plain += delta + 8;
    z.deltas += delta;
    z.dods += VarintSize(ZigZag(static_cast<int64_t>(dt - prev_dt)));
    prev_t = t;
    prev_dt = i == begin ? 0 : dt;
  }
  return z;
}

// The records of [begin, end) after the mode byte in `raw`, their time field the delta of
// delta (kModeRecords) or the delta (kModeDeltaRecords).
void PutRecords(const int64_t* time_ns, const double* value, size_t begin, size_t end, uint8_t mode,
                std::string* raw) {
  uint64_t prev_t = 0, prev_dt = 0, prev_bits = 0;
  int64_t prev_int = 0;
  bool prev_is_int = true;  // the first value's predecessor is +0.0
  Step pending;
  uint64_t run = 0;
  for (size_t i = begin; i < end; ++i) {
    const uint64_t t = static_cast<uint64_t>(time_ns[i]), dt = t - prev_t;
    Step s;
    s.dod = ZigZag(static_cast<int64_t>(mode == kModeRecords ? dt - prev_dt : dt));
    prev_t = t;
    prev_dt = i == begin ? 0 : dt;  // the second sample's delta of delta is its delta
    const uint64_t bits = Bits(value[i]);
    const bool is_int = IsExactInt(value[i]);
    if (bits == prev_bits) {
      s.kind = kSame;
    } else if (is_int && prev_is_int) {
      s.kind = kIntDelta;
      s.arg = ZigZag(static_cast<int64_t>(value[i]) - prev_int);
    } else {
      s.kind = kXor;
      s.arg = bits ^ prev_bits;
    }
    prev_bits = bits;
    prev_is_int = is_int;
    if (is_int) prev_int = static_cast<int64_t>(value[i]);
    if (run > 0 && s == pending) {
      ++run;
      continue;
    }
    if (run > 0) PutRecord(pending, run, raw);
    pending = s;
    run = 1;
  }
  if (run > 0) PutRecord(pending, run, raw);
}

void PutPlain(const int64_t* time_ns, const double* value, size_t begin, size_t end,
              std::string* raw) {
  uint64_t prev = 0;
  for (size_t i = begin; i < end; ++i) {
    const uint64_t t = static_cast<uint64_t>(time_ns[i]);
    PutVarint(ZigZag(static_cast<int64_t>(t - prev)), raw);
    prev = t;
    char bytes[8];
    std::memcpy(bytes, &value[i], 8);
    raw->append(bytes, 8);
  }
}

// The value column of samples [begin, end): the zigzag difference of each value's bits from
// the previous value's (the first's from +0.0), or their XOR where it takes less than 7/8 of
// the bytes. Fills `diffs` and `xors` and returns which of them and its plane count.
struct ValueColumn {
  bool xors = false;
  int planes = 0;
};
ValueColumn ValuesOf(const double* value, size_t begin, size_t end, std::vector<uint64_t>* diffs,
                     std::vector<uint64_t>* xors) {
  const size_t n = end - begin;
  diffs->resize(n), xors->resize(n);
  size_t diff_bytes = 0, xor_bytes = 0;
  int diff_planes = 0, xor_planes = 0;
  uint64_t prev_bits = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t bits = Bits(value[begin + i]);
    (*diffs)[i] = ZigZag(static_cast<int64_t>(bits - prev_bits));
    (*xors)[i] = bits ^ prev_bits;
    prev_bits = bits;
    const int d = SignificantBytes((*diffs)[i]), x = SignificantBytes((*xors)[i]);
    diff_bytes += d, xor_bytes += x;
    diff_planes = std::max(diff_planes, d), xor_planes = std::max(xor_planes, x);
  }
  const bool use_xors = xor_bytes * 8 < diff_bytes * 7;
  return {use_xors, use_xors ? xor_planes : diff_planes};
}

// Mode 3 after `raw`'s mode byte: the time column (zigzag deltas, or deltas of deltas where
// they take less than 7/8 of the bytes: a grid), then the value column (ValuesOf), each cut
// into byte planes. A running total's differences keep their high bytes and a gauge's levels
// repeat as whole runs of bytes each training step, which zstd's matcher finds in a plane, not
// between interleaved time bytes.
void PutColumns(const int64_t* time_ns, const double* value, size_t begin, size_t end,
                std::string* raw) {
  const size_t n = end - begin;
  thread_local std::vector<uint64_t> deltas, dods, diffs, xors;
  deltas.resize(n), dods.resize(n);
  size_t delta_bytes = 0, dod_bytes = 0;
  int delta_planes = 0, dod_planes = 0;
  uint64_t prev_t = 0, prev_dt = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t t = static_cast<uint64_t>(time_ns[begin + i]), dt = t - prev_t;
    deltas[i] = ZigZag(static_cast<int64_t>(dt));
    dods[i] = ZigZag(static_cast<int64_t>(dt - prev_dt));
    prev_t = t;
    prev_dt = i == 0 ? 0 : dt;
    const int b[2] = {SignificantBytes(deltas[i]), SignificantBytes(dods[i])};
    delta_bytes += b[0], dod_bytes += b[1];
    delta_planes = std::max(delta_planes, b[0]), dod_planes = std::max(dod_planes, b[1]);
  }
  const ValueColumn values = ValuesOf(value, begin, end, &diffs, &xors);
  const bool use_dods = dod_bytes * 8 < delta_bytes * 7;
  const int time_planes = use_dods ? dod_planes : delta_planes;
  raw->push_back(static_cast<char>((use_dods ? kColumnDods : 0) | (values.xors ? kColumnXors : 0)));
  raw->push_back(static_cast<char>(time_planes));
  raw->push_back(static_cast<char>(values.planes));
  PutPlanes(use_dods ? dods : deltas, time_planes, raw);
  PutPlanes(values.xors ? xors : diffs, values.planes, raw);
  if (n > (1u << 20)) {  // no huge buffers left behind
    for (auto* v : {&deltas, &dods, &diffs, &xors}) std::vector<uint64_t>().swap(*v);
  }
}

// A checksum of a series' times, which mode 4 keeps: a reference resolved to other samples
// than the encoder's (a damaged blob, a reference series that changed) is then damage, never
// wrong times.
uint32_t TimesChecksum(const int64_t* time_ns, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ static_cast<uint64_t>(time_ns[i])) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  return static_cast<uint32_t>(h ^ (h >> 32));
}

// Mode 4 after `raw`'s mode byte, for samples whose times are among the reference's (sorted,
// strictly increasing): false, writing nothing, when one is not, or the bitmap would take more
// than Check allows a body.
bool PutSharedTimes(const int64_t* ref_time, size_t ref_n, const int64_t* time_ns,
                    const double* value, size_t begin, size_t end, std::string* raw) {
  const size_t n = end - begin;
  const int64_t* first = std::lower_bound(ref_time, ref_time + ref_n, time_ns[begin]);
  if (first == ref_time + ref_n || *first != time_ns[begin]) return false;
  const size_t k = static_cast<size_t>(first - ref_time);
  thread_local std::string bitmap;
  bitmap.clear();
  size_t j = k;
  for (size_t i = begin; i < end; ++i, ++j) {
    while (j < ref_n && ref_time[j] < time_ns[i]) ++j;
    if (j == ref_n || ref_time[j] != time_ns[i]) return false;
    const size_t bit = j - k;
    if (bitmap.size() <= bit / 8) bitmap.resize(bit / 8 + 1, '\0');
    bitmap[bit / 8] = static_cast<char>(bitmap[bit / 8] | (1 << (bit % 8)));
  }
  const size_t span = j - k;
  thread_local std::vector<uint64_t> diffs, xors;
  const ValueColumn values = ValuesOf(value, begin, end, &diffs, &xors);
  // The fields before the bitmap take at most 10 + 10 + 4 + 2 bytes.
  if (26 + bitmap.size() + n * values.planes > n * kMaxSampleBytes) return false;
  PutVarint(ZigZag(time_ns[begin]), raw);
  PutVarint(span, raw);
  const uint32_t sum = TimesChecksum(time_ns + begin, n);
  for (int b = 0; b < 4; ++b) raw->push_back(static_cast<char>(sum >> (8 * b)));
  raw->push_back(static_cast<char>(values.xors ? kColumnXors : 0));
  raw->push_back(static_cast<char>(values.planes));
  *raw += bitmap;
  PutPlanes(values.xors ? xors : diffs, values.planes, raw);
  if (n > (1u << 20)) {  // no huge buffers left behind
    for (auto* v : {&diffs, &xors}) std::vector<uint64_t>().swap(*v);
    std::string().swap(bitmap);
  }
  return true;
}

absl::StatusOr<Header> ReadHeader(absl::string_view blob, absl::string_view what) {
  return count_frame::Read(blob, kMagic, what, "second counter encoding", /*labelled=*/true);
}

// Reads one sample's value step of `kind` from `in`; false when truncated or malformed.
bool GetStep(uint64_t kind, absl::string_view* in, uint64_t* arg) {
  if (kind == kIntDelta) return GetVarint(in, arg);
  if (kind != kXor) return kind == kSame;
  if (in->empty()) return false;
  const uint8_t shape = static_cast<uint8_t>((*in)[0]);
  const int lz = shape >> 4, tz = shape & 15;
  if (lz + tz > 7 || in->size() < static_cast<size_t>(9 - lz - tz)) return false;
  uint64_t x = 0;
  for (int b = 7 - lz; b >= tz; --b) {
    x |= uint64_t{static_cast<uint8_t>((*in)[8 - lz - b])} << (8 * b);
  }
  in->remove_prefix(9 - lz - tz);
  *arg = x;
  return true;
}

absl::Status DecodePlain(absl::string_view in, uint64_t n, CounterSeries* s) {
  uint64_t t = 0;
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t delta;
    if (!GetVarint(&in, &delta) || in.size() < 8) {
      return absl::DataLossError("counter series is truncated");
    }
    t += static_cast<uint64_t>(UnZigZag(delta));
    s->time_ns[i] = static_cast<int64_t>(t);
    std::memcpy(&s->value[i], in.data(), 8);
    in.remove_prefix(8);
  }
  if (!in.empty()) return absl::DataLossError("counter series has bytes past its samples");
  return absl::OkStatus();
}

absl::Status DecodeRecords(absl::string_view in, uint64_t n, bool dods, CounterSeries* s) {
  uint64_t t = 0, prev_dt = 0, bits = 0;
  int64_t as_int = 0;
  bool is_int = true;
  for (uint64_t i = 0; i < n;) {
    uint64_t h, dod = 0, arg = 0;
    if (!GetVarint(&in, &h)) return absl::DataLossError("counter series is truncated");
    const uint64_t kind = h & 3, run = (h >> 3) + 1;
    if ((h & kHasDod) && !GetVarint(&in, &dod)) {
      return absl::DataLossError("counter series is truncated");
    }
    if (!GetStep(kind, &in, &arg)) return absl::DataLossError("counter series record is damaged");
    if (run > n - i) {
      return absl::DataLossError(
          absl::StrCat("counter series record of ", run, " samples past its ", n, " samples"));
    }
    const uint64_t step_dod = static_cast<uint64_t>(UnZigZag(dod));
    const int64_t step_int = UnZigZag(arg);
    // Two integers within 2^53 differ by at most 2^54.
    if (kind == kIntDelta &&
        (!is_int || step_int > (int64_t{1} << 54) || step_int < -(int64_t{1} << 54))) {
      return absl::DataLossError("counter series steps an integer from a non-integer");
    }
    for (const uint64_t last = i + run; i < last; ++i) {
      const uint64_t dt = dods ? prev_dt + step_dod : step_dod;
      t += dt;
      prev_dt = i == 0 ? 0 : dt;
      if (kind == kIntDelta) {
        as_int += step_int;
        if (as_int > int64_t{1} << 53 || as_int < -(int64_t{1} << 53)) {
          return absl::DataLossError("counter series' integer values pass 2^53");
        }
        const double v = static_cast<double>(as_int);
        bits = Bits(v);
      } else if (kind == kXor) {
        bits ^= arg;
        is_int = IsExactInt(FromBits(bits));
        if (is_int) as_int = static_cast<int64_t>(FromBits(bits));
      }
      s->time_ns[i] = static_cast<int64_t>(t);
      s->value[i] = FromBits(bits);
    }
  }
  if (!in.empty()) return absl::DataLossError("counter series has bytes past its samples");
  return absl::OkStatus();
}

absl::Status DecodeColumns(absl::string_view in, uint64_t n, CounterSeries* s) {
  if (in.size() < kColumnsHeader - 1) return absl::DataLossError("counter series is truncated");
  const uint8_t flags = static_cast<uint8_t>(in[0]);
  const int time_planes = static_cast<uint8_t>(in[1]), value_planes = static_cast<uint8_t>(in[2]);
  in.remove_prefix(kColumnsHeader - 1);
  if ((flags & ~(kColumnDods | kColumnXors)) != 0 || time_planes > 8 || value_planes > 8) {
    return absl::DataLossError("counter series' columns are damaged");
  }
  // n <= max_bytes / 16 (Check), so this product does not overflow.
  if (in.size() != n * static_cast<uint64_t>(time_planes + value_planes)) {
    return absl::DataLossError(absl::StrCat("counter series' columns take ", in.size(),
                                            " bytes, not what ", n, " samples take"));
  }
  const char* times = in.data();
  const char* values = times + n * static_cast<size_t>(time_planes);
  uint64_t t = 0, prev_dt = 0, bits = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t step = UnZigZag(GetPlanes(times, n, time_planes, i));
    const uint64_t dt =
        (flags & kColumnDods) ? prev_dt + static_cast<uint64_t>(step) : static_cast<uint64_t>(step);
    t += dt;
    prev_dt = i == 0 ? 0 : dt;
    const uint64_t v = GetPlanes(values, n, value_planes, i);
    bits = (flags & kColumnXors) ? bits ^ v : bits + static_cast<uint64_t>(UnZigZag(v));
    s->time_ns[i] = static_cast<int64_t>(t);
    s->value[i] = FromBits(bits);
  }
  return absl::OkStatus();
}

// Mode 4's body after the mode byte: the samples' times from `reference` (the reference
// series' times, null when the chip has none of that name), the values as mode 3's.
absl::Status DecodeSharedTimes(absl::string_view in, uint64_t n, absl::string_view name,
                               const ReferenceTimes* reference_times, CounterSeries* s) {
  uint64_t anchor, span;
  if (!GetVarint(&in, &anchor) || !GetVarint(&in, &span) || in.size() < 6) {
    return absl::DataLossError("counter series is truncated");
  }
  uint32_t sum = 0;
  for (int b = 0; b < 4; ++b) sum |= uint32_t{static_cast<uint8_t>(in[b])} << (8 * b);
  const uint8_t flags = static_cast<uint8_t>(in[4]);
  const int value_planes = static_cast<uint8_t>(in[5]);
  in.remove_prefix(6);
  if ((flags & ~kColumnXors) != 0 || value_planes > 8) {
    return absl::DataLossError("counter series' columns are damaged");
  }
  // n <= max_bytes / 16 and the body within max_bytes (Check): neither product overflows, and
  // a span past the body's bits is damage before it is used.
  const uint64_t value_bytes = n * static_cast<uint64_t>(value_planes);
  if (n == 0 || span < n || span > (in.size() + 1) * 8 ||
      in.size() != (span + 7) / 8 + value_bytes) {
    return absl::DataLossError(absl::StrCat("counter series' columns take ", in.size(),
                                            " bytes, not what ", n, " samples over ", span,
                                            " of the reference's take"));
  }
  const absl::string_view bitmap = in.substr(0, (span + 7) / 8);
  uint64_t ones = 0;
  for (char c : bitmap) ones += __builtin_popcount(static_cast<uint8_t>(c));
  const uint8_t last = static_cast<uint8_t>(bitmap.back());
  if (ones != n || (static_cast<uint8_t>(bitmap[0]) & 1) == 0 ||
      (span % 8 != 0 && (last >> (span % 8)) != 0)) {
    return absl::DataLossError(
        absl::StrCat("counter series' bitmap marks ", ones, " of ", span, " samples, not its ", n));
  }
  if (reference_times == nullptr) {
    return absl::DataLossError(absl::StrCat("counter series takes its times from \"", name,
                                            "\", which its chip does not have"));
  }
  // The reference's samples at the first time, each a candidate start: one when its times
  // increase, a few when two pieces overlap.
  const std::vector<int64_t>* reference = &reference_times->times();
  const std::vector<size_t> starts = reference_times->Find(UnZigZag(anchor), kMaxCandidates);
  bool matched = false;
  for (size_t k : starts) {
    if (span > reference->size() - k) break;
    for (uint64_t j = 0, i = 0; j < span; ++j) {
      if ((static_cast<uint8_t>(bitmap[j / 8]) >> (j % 8)) & 1)
        s->time_ns[i++] = (*reference)[k + j];
    }
    if (TimesChecksum(s->time_ns.data(), n) == sum) {
      matched = true;
      break;
    }
  }
  if (!matched) {
    return absl::DataLossError(absl::StrCat("counter series' times are not among those of \"", name,
                                            "\" (", reference->size(), " samples)"));
  }
  const char* values = in.data() + bitmap.size();
  uint64_t bits = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t v = GetPlanes(values, n, value_planes, i);
    bits = (flags & kColumnXors) ? bits ^ v : bits + static_cast<uint64_t>(UnZigZag(v));
    s->value[i] = FromBits(bits);
  }
  return absl::OkStatus();
}

}  // namespace

bool Is(absl::string_view blob) { return count_frame::Is(blob, kMagic); }

ReferenceTimes::ReferenceTimes(std::vector<int64_t> times) : times_(std::move(times)) {
  if (std::is_sorted(times_.begin(), times_.end())) return;
  by_time_.resize(times_.size());
  for (size_t i = 0; i < by_time_.size(); ++i) by_time_[i] = i;
  std::stable_sort(by_time_.begin(), by_time_.end(),
                   [&](size_t a, size_t b) { return times_[a] < times_[b]; });
}

std::vector<size_t> ReferenceTimes::Find(int64_t t, size_t most) const {
  std::vector<size_t> out;
  if (by_time_.empty()) {
    for (auto it = std::lower_bound(times_.begin(), times_.end(), t);
         it != times_.end() && *it == t && out.size() < most; ++it) {
      out.push_back(static_cast<size_t>(it - times_.begin()));
    }
    return out;
  }
  for (auto it = std::lower_bound(by_time_.begin(), by_time_.end(), t,
                                  [&](size_t i, int64_t v) { return times_[i] < v; });
       it != by_time_.end() && times_[*it] == t && out.size() < most; ++it) {
    out.push_back(*it);
  }
  return out;
}

std::string Encode(const int64_t* time_ns, const double* value, size_t begin, size_t end,
                   int level) {
  thread_local std::string raw;  // reused: many series per thread
  // The plain mode's bytes (the first encoding's samples): what no body may pass compressed,
  // so that MaxCounterBytesWithin stays a bound.
  const TimeSizes sizes = SizeTimes(time_ns, begin, end);
  const size_t plain = 1 + sizes.plain;
  std::string frame;
  // Columns for what varies (kernel boundaries' jittered times, running totals); the records,
  // when they take fewer bytes than the columns' frame, for what repeats (a level or a steady
  // rate on a grid: a run is one record). Both compressed only where the records may win.
  if (end > begin) {
    raw.assign(1, static_cast<char>(kModeColumns));
    PutColumns(time_ns, value, begin, end, &raw);
    frame = ZstdCompress(raw, level);
  }
  // Deltas of deltas for times on a grid (mostly 0), deltas where they vary more (kernel
  // starts): whichever takes fewer bytes before zstd.
  const uint8_t mode = sizes.dods <= sizes.deltas ? kModeRecords : kModeDeltaRecords;
  raw.assign(1, static_cast<char>(mode));
  PutRecords(time_ns, value, begin, end, mode, &raw);
  if (frame.empty() || raw.size() < 8 * frame.size()) {
    std::string records = ZstdCompress(raw, level);
    if (frame.empty() || (!records.empty() && records.size() < frame.size())) {
      frame = std::move(records);
    }
  }
  if (frame.empty() || frame.size() > plain) {
    raw.clear();
    raw.reserve(plain);
    raw.push_back(static_cast<char>(kModePlain));
    PutPlain(time_ns, value, begin, end, &raw);
    frame = ZstdCompress(raw, level);
  }
  if (raw.capacity() > (16u << 20)) std::string().swap(raw);  // no huge buffer left behind
  if (frame.empty()) return std::string();
  // An honest blob past kMaxSamplesPerByte is padded up to it rather than refused.
  return count_frame::Wrap(kMagic, end - begin, frame, kMaxSamplesPerByte);
}

std::string EncodeSharingTimes(absl::string_view reference, const int64_t* ref_time, size_t ref_n,
                               const int64_t* time_ns, const double* value, size_t begin,
                               size_t end, int level) {
  if (end > begin && !reference.empty() && reference.size() <= count_frame::kMaxLabelBytes) {
    thread_local std::string raw;
    raw.assign(1, static_cast<char>(kModeSharedTimes));
    if (PutSharedTimes(ref_time, ref_n, time_ns, value, begin, end, &raw)) {
      std::string frame = ZstdCompress(raw, level);
      // The frame and the name within the plain body's bytes: the blob then takes no more than
      // one of the other modes may (MaxCounterBytesWithin).
      const size_t name = VarintSize(reference.size()) + reference.size();
      const bool fits =
          !frame.empty() && frame.size() + name <= 1 + SizeTimes(time_ns, begin, end).plain;
      if (raw.capacity() > (16u << 20)) std::string().swap(raw);
      if (fits) return count_frame::Wrap(kMagic, end - begin, frame, kMaxSamplesPerByte, reference);
    }
  }
  return Encode(time_ns, value, begin, end, level);
}

absl::StatusOr<uint64_t> Count(absl::string_view blob, absl::string_view what) {
  ASSIGN_OR_RETURN(const Header h, ReadHeader(blob, what));
  return h.count;
}

absl::StatusOr<std::string> Reference(absl::string_view blob) {
  ASSIGN_OR_RETURN(const Header h, ReadHeader(blob, "counter series"));
  return std::string(h.label);
}

absl::StatusOr<uint64_t> Check(absl::string_view blob, uint64_t max_bytes) {
  ASSIGN_OR_RETURN(const Header h, ReadHeader(blob, "counter series"));
  if (h.count > max_bytes / kDecodedSampleBytes) {
    return absl::DataLossError(absl::StrCat("counter series claims ", h.count,
                                            " samples, more than ", max_bytes, " bytes decoded"));
  }
  if (h.count > kMaxSamplesPerByte * blob.size()) {
    return absl::DataLossError(absl::StrCat("counter series claims ", h.count, " samples in ",
                                            blob.size(), " bytes, more than ", kMaxSamplesPerByte,
                                            " a byte"));
  }
  ASSIGN_OR_RETURN(const uint64_t raw,
                   ZstdCheckedContentSize(blob.substr(h.size), max_bytes, "counter series"));
  // The mode byte, then what the count can take at most: more is padding decompressed on every
  // read.
  if (raw < 1 || raw - 1 > h.count * kMaxSampleBytes) {
    return absl::DataLossError(
        absl::StrCat("counter series claims ", h.count, " samples in ", raw, " bytes"));
  }
  return h.count;
}

absl::Status Decode(absl::string_view blob, CounterSeries* s, uint64_t max_bytes,
                    const ReferenceTimes* reference) {
  ASSIGN_OR_RETURN(const uint64_t n, Check(blob, max_bytes));
  ASSIGN_OR_RETURN(const Header h, ReadHeader(blob, "counter series"));
  ASSIGN_OR_RETURN(const std::string body,
                   ZstdDecompress(blob.substr(h.size), max_bytes, "counter series"));
  absl::string_view in(body);
  const uint8_t mode = static_cast<uint8_t>(in[0]);  // Check: at least the mode byte
  in.remove_prefix(1);
  // A reference's name and the mode that reads it come together.
  if ((mode == kModeSharedTimes) != !h.label.empty()) {
    return absl::DataLossError(absl::StrCat("counter series of mode ", mode,
                                            h.label.empty()
                                                ? " names no series to take its times from"
                                                : " names a series to take its times from"));
  }
  s->time_ns.resize(n);
  s->value.resize(n);
  absl::Status d;
  if (mode == kModePlain) {
    d = DecodePlain(in, n, s);
  } else if (mode == kModeRecords || mode == kModeDeltaRecords) {
    d = DecodeRecords(in, n, mode == kModeRecords, s);
  } else if (mode == kModeColumns) {
    d = DecodeColumns(in, n, s);
  } else if (mode == kModeSharedTimes) {
    d = DecodeSharedTimes(in, n, h.label, reference, s);
  } else {
    d = absl::DataLossError(absl::StrCat("counter series of unknown mode ", mode));
  }
  if (!d.ok()) {
    s->time_ns.clear();
    s->value.clear();
  }
  return d;
}

}  // namespace podprof::trace::counter_v2
