#include "trace/ddsketch.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "trace/varint.h"

namespace podprof::trace {
namespace {

constexpr uint8_t kVersion = 1;

}  // namespace

const double DDSketch::kGamma = std::exp2(1.0 / 64.0);
const double DDSketch::kRelativeError = (DDSketch::kGamma - 1) / (DDSketch::kGamma + 1);

namespace {

// Bucket boundaries inside one octave: kBoundary[j] is the mantissa (52 bits) of 2^(j/64),
// and kFirstCandidate[t] the first boundary at or above mantissas whose top 8 bits are t.
// Indexing by table instead of log2() makes Add() several times cheaper; the two agree
// except within an ulp of a boundary, where either bucket keeps the error bound.
struct OctaveTables {
  uint64_t boundary[65];
  uint8_t first_candidate[256];
  OctaveTables() {
    for (int j = 0; j <= 64; ++j) {
      double b = std::exp2(j / 64.0);  // in [1, 2]
      uint64_t bits;
      std::memcpy(&bits, &b, sizeof(bits));
      boundary[j] = j == 64 ? (uint64_t{1} << 52) : (bits & ((uint64_t{1} << 52) - 1));
    }
    for (int t = 0; t < 256; ++t) {
      uint64_t lo = static_cast<uint64_t>(t) << 44;
      int j = 0;
      while (boundary[j] < lo) ++j;
      first_candidate[t] = static_cast<uint8_t>(j);
    }
  }
};

const OctaveTables& Tables() {
  static const OctaveTables* const kTables = new OctaveTables();
  return *kTables;
}

}  // namespace

int32_t DDSketch::IndexOf(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const int exponent = static_cast<int>((bits >> 52) & 0x7FF);
  // Below 2^-64 (subnormals included) or at 2^64 and beyond: the ends of the range.
  if (exponent < 1023 - 64) return kMinIndex;
  if (exponent >= 1023 + 64) return kMaxIndex;
  const uint64_t mantissa = bits & ((uint64_t{1} << 52) - 1);
  const OctaveTables& t = Tables();
  int j = t.first_candidate[mantissa >> 44];
  while (mantissa > t.boundary[j]) ++j;
  return std::clamp(static_cast<int32_t>((exponent - 1023) * 64 + j), kMinIndex, kMaxIndex);
}

double DDSketch::ValueOf(int32_t index) {
  // The point of bucket (gamma^(i-1), gamma^i] equally far, relatively, from both ends.
  return 2.0 * std::exp2(index / kIndexScale) / (kGamma + 1.0);
}

void DDSketch::EnsureIndex(int32_t index) {
  // Callers keep `index` within [kMinIndex, kMaxIndex], so these differences fit in 14 bits;
  // they are taken in 64 bits all the same.
  if (bins_.empty()) {
    min_index_ = index;
    bins_.assign(1, 0);
    return;
  }
  const int64_t first = min_index_;
  const int64_t last = first + static_cast<int64_t>(bins_.size()) - 1;
  if (index < first) {
    bins_.insert(bins_.begin(), static_cast<size_t>(first - index), 0);
    min_index_ = index;
  } else if (index > last) {
    bins_.resize(static_cast<size_t>(index - first) + 1, 0);
  }
}

namespace {

// a + b, held at kMaxCount rather than wrapping: merged sketches of honest data stay far below.
uint64_t AddCount(uint64_t a, uint64_t b) {
  uint64_t out;
  if (__builtin_add_overflow(a, b, &out) || out > DDSketch::kMaxCount) return DDSketch::kMaxCount;
  return out;
}

}  // namespace

void DDSketch::Add(double value, uint64_t count) {
  if (count == 0) return;
  count_ = AddCount(count_, count);
  if (!(value > 0) || !std::isfinite(value)) {
    zero_count_ = AddCount(zero_count_, count);
    return;
  }
  int32_t index = IndexOf(value);
  EnsureIndex(index);
  uint64_t& bin = bins_[static_cast<size_t>(index - min_index_)];
  bin = AddCount(bin, count);
}

void DDSketch::Merge(const DDSketch& other) {
  count_ = AddCount(count_, other.count_);
  zero_count_ = AddCount(zero_count_, other.zero_count_);
  if (other.bins_.empty()) return;
  // Both sketches lie within [kMinIndex, kMaxIndex] (every way in keeps them there), so the
  // merged one spans at most kMaxIndex - kMinIndex + 1 buckets.
  EnsureIndex(other.min_index_);
  EnsureIndex(other.min_index_ + static_cast<int32_t>(other.bins_.size()) - 1);
  size_t shift = static_cast<size_t>(other.min_index_ - min_index_);
  for (size_t i = 0; i < other.bins_.size(); ++i) {
    bins_[shift + i] = AddCount(bins_[shift + i], other.bins_[i]);
  }
}

double DDSketch::Quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_ - 1));
  if (rank < zero_count_) return 0;
  uint64_t seen = zero_count_;
  for (size_t i = 0; i < bins_.size(); ++i) {
    seen += bins_[i];
    if (seen > rank) return ValueOf(min_index_ + static_cast<int32_t>(i));
  }
  return ValueOf(min_index_ + static_cast<int32_t>(bins_.size()) - 1);
}

bool DDSketch::WithinValues(double lo, double hi) const {
  if (zero_count_ > 0 && !(lo <= 0)) return false;
  auto [first, bins] = Normalized();
  if (bins.empty()) return true;
  if (!(hi > 0)) return false;
  const int32_t last = first + static_cast<int32_t>(bins.size()) - 1;
  return (lo <= 0 || first >= IndexOf(lo)) && last <= IndexOf(hi);
}

std::pair<int32_t, std::vector<uint64_t>> DDSketch::Normalized() const {
  size_t first = 0, last = bins_.size();
  while (first < last && bins_[first] == 0) ++first;
  while (last > first && bins_[last - 1] == 0) --last;
  return {first < last ? min_index_ + static_cast<int32_t>(first) : 0,
          std::vector<uint64_t>(bins_.begin() + first, bins_.begin() + last)};
}

void DDSketch::Bins(std::vector<int32_t>* indices, std::vector<uint64_t>* counts) const {
  indices->clear();
  counts->clear();
  for (size_t i = 0; i < bins_.size(); ++i) {
    if (bins_[i] == 0) continue;
    indices->push_back(min_index_ + static_cast<int32_t>(i));
    counts->push_back(bins_[i]);
  }
}

absl::StatusOr<DDSketch> DDSketch::FromBins(uint64_t zero_count,
                                            const std::vector<int32_t>& indices,
                                            const std::vector<uint64_t>& counts) {
  if (indices.size() != counts.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch bins: ", indices.size(), " indices but ", counts.size(), " counts"));
  }
  DDSketch s;
  uint64_t total = zero_count;
  if (total > kMaxCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch bins: count more than ", kMaxCount, " values"));
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < kMinIndex || indices[i] > kMaxIndex) {
      return absl::InvalidArgumentError(absl::StrCat("sketch bins: bucket index ", indices[i],
                                                     " is outside ", kMinIndex, "..", kMaxIndex));
    }
    if (__builtin_add_overflow(total, counts[i], &total) || total > kMaxCount) {
      return absl::InvalidArgumentError(
          absl::StrCat("sketch bins: count more than ", kMaxCount, " values"));
    }
  }
  s.count_ = s.zero_count_ = zero_count;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (counts[i] == 0) continue;
    s.EnsureIndex(indices[i]);
    s.bins_[static_cast<size_t>(indices[i] - s.min_index_)] += counts[i];
    s.count_ += counts[i];
  }
  return s;
}

std::string DDSketch::Serialize() const {
  auto [first, bins] = Normalized();
  std::string out;
  out.push_back(static_cast<char>(kVersion));
  PutVarint(zero_count_, &out);
  PutVarint((static_cast<uint64_t>(first) << 1) ^ static_cast<uint64_t>(first >> 31), &out);
  PutVarint(bins.size(), &out);
  for (uint64_t c : bins) PutVarint(c, &out);
  return out;
}

absl::StatusOr<DDSketch> DDSketch::Deserialize(absl::string_view blob) {
  if (blob.empty() || static_cast<uint8_t>(blob[0]) != kVersion) {
    return absl::InvalidArgumentError(
        blob.empty() ? "sketch blob is empty"
                     : absl::StrCat("sketch blob has unknown version ",
                                    static_cast<int>(static_cast<uint8_t>(blob[0]))));
  }
  blob.remove_prefix(1);
  DDSketch s;
  uint64_t zz, n;
  if (!GetVarint(&blob, &s.zero_count_) || !GetVarint(&blob, &zz) || !GetVarint(&blob, &n)) {
    return absl::InvalidArgumentError("sketch blob is truncated in its header");
  }
  // Each bucket takes at least one byte, so a count beyond the blob's size is damage.
  if (n > blob.size() || zz > 0xFFFFFFFFu) {
    return absl::InvalidArgumentError("sketch blob header is inconsistent");
  }
  // Zigzag: 2k for k >= 0, 2|k| - 1 for k < 0; computed in 64 bits.
  const int64_t first =
      (zz & 1) ? -static_cast<int64_t>((zz + 1) >> 1) : static_cast<int64_t>(zz >> 1);
  // The buckets' range is checked before anything is sized by it: a stored or sent sketch
  // reaching beyond [kMinIndex, kMaxIndex] is damage (or an attack), never a duration.
  if (n > 0 && (first < kMinIndex || first + static_cast<int64_t>(n) - 1 > kMaxIndex)) {
    return absl::InvalidArgumentError(absl::StrCat("sketch blob holds buckets ", first, "..",
                                                   first + static_cast<int64_t>(n) - 1, " outside ",
                                                   kMinIndex, "..", kMaxIndex));
  }
  s.min_index_ = n > 0 ? static_cast<int32_t>(first) : 0;
  s.bins_.resize(n);
  s.count_ = s.zero_count_;
  if (s.count_ > kMaxCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("sketch blob counts more than ", kMaxCount, " values"));
  }
  for (uint64_t i = 0; i < n; ++i) {
    if (!GetVarint(&blob, &s.bins_[i])) {
      return absl::InvalidArgumentError(absl::StrCat("sketch blob is truncated at bucket ", i));
    }
    if (__builtin_add_overflow(s.count_, s.bins_[i], &s.count_) || s.count_ > kMaxCount) {
      return absl::InvalidArgumentError(
          absl::StrCat("sketch blob counts more than ", kMaxCount, " values"));
    }
  }
  if (!blob.empty()) return absl::InvalidArgumentError("sketch blob has trailing bytes");
  return s;
}

}  // namespace podprof::trace
