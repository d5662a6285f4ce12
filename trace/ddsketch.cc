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
  if (exponent == 0) {  // Subnormal: far below any duration; take the slow, exact path.
    return static_cast<int32_t>(std::ceil(std::log2(value) * kIndexScale));
  }
  const uint64_t mantissa = bits & ((uint64_t{1} << 52) - 1);
  const OctaveTables& t = Tables();
  int j = t.first_candidate[mantissa >> 44];
  while (mantissa > t.boundary[j]) ++j;
  return static_cast<int32_t>((exponent - 1023) * 64 + j);
}

double DDSketch::ValueOf(int32_t index) {
  // The point of bucket (gamma^(i-1), gamma^i] equally far, relatively, from both ends.
  return 2.0 * std::exp2(index / kIndexScale) / (kGamma + 1.0);
}

void DDSketch::EnsureIndex(int32_t index) {
  if (bins_.empty()) {
    min_index_ = index;
    bins_.assign(1, 0);
    return;
  }
  if (index < min_index_) {
    bins_.insert(bins_.begin(), static_cast<size_t>(min_index_ - index), 0);
    min_index_ = index;
  } else if (index >= min_index_ + static_cast<int32_t>(bins_.size())) {
    bins_.resize(static_cast<size_t>(index - min_index_) + 1, 0);
  }
}

void DDSketch::Add(double value, uint64_t count) {
  if (count == 0) return;
  count_ += count;
  if (!(value > 0) || !std::isfinite(value)) {
    zero_count_ += count;
    return;
  }
  int32_t index = IndexOf(value);
  EnsureIndex(index);
  bins_[static_cast<size_t>(index - min_index_)] += count;
}

void DDSketch::Merge(const DDSketch& other) {
  count_ += other.count_;
  zero_count_ += other.zero_count_;
  if (other.bins_.empty()) return;
  EnsureIndex(other.min_index_);
  EnsureIndex(other.min_index_ + static_cast<int32_t>(other.bins_.size()) - 1);
  size_t shift = static_cast<size_t>(other.min_index_ - min_index_);
  for (size_t i = 0; i < other.bins_.size(); ++i) bins_[shift + i] += other.bins_[i];
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
  s.min_index_ = static_cast<int32_t>((zz >> 1) ^ (~(zz & 1) + 1));
  s.bins_.resize(n);
  s.count_ = s.zero_count_;
  for (uint64_t i = 0; i < n; ++i) {
    if (!GetVarint(&blob, &s.bins_[i])) {
      return absl::InvalidArgumentError(absl::StrCat("sketch blob is truncated at bucket ", i));
    }
    s.count_ += s.bins_[i];
  }
  if (!blob.empty()) return absl::InvalidArgumentError("sketch blob has trailing bytes");
  return s;
}

}  // namespace podprof::trace
