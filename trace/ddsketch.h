// DDSketch: a mergeable quantile sketch with a guaranteed relative error.
//
// A positive value x falls in bucket ceil(log_gamma(x)) with gamma = 2^(1/64), so every
// quantile it reports is within kRelativeError (about 0.54%) of the exact one, and the buckets
// line up with OpenTelemetry exponential histograms at scale 6. Sketches merge by adding bucket
// counts, so merging chips, hosts or captures in any order gives the same sketch.
// Values <= 0 are counted in a separate zero bucket. Plain value type; not synchronised.
#ifndef PODPROF_TRACE_DDSKETCH_H_
#define PODPROF_TRACE_DDSKETCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace podprof::trace {

class DDSketch {
 public:
  // gamma = 2^(1/64); kIndexScale = 1 / log2(gamma).
  static constexpr double kIndexScale = 64.0;
  // The bucket indices a sketch may hold: values in [2^-64, 2^64], far beyond any duration in
  // ps (an int64 of ps ends below 2^63). A sketch then spans at most 8,193 buckets (64 KiB),
  // whatever it merges, and index arithmetic cannot overflow. Add() clamps into the range;
  // Deserialize() and FromBins(), which read what others sent or stored, refuse beyond it.
  static constexpr int32_t kMinIndex = -64 * 64;
  static constexpr int32_t kMaxIndex = 64 * 64;
  // The most values a sketch may count (2^53, beyond any capture's executions): sums of a few
  // thousand such sketches cannot wrap.
  static constexpr uint64_t kMaxCount = uint64_t{1} << 53;
  static const double kGamma;
  // (gamma - 1) / (gamma + 1): the bound on |reported - exact| / exact.
  static const double kRelativeError;

  // Adds `count` occurrences of `value`.
  void Add(double value, uint64_t count = 1);
  // Adds all of `other`'s counts to this sketch.
  void Merge(const DDSketch& other);

  uint64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }

  // The q-quantile (q in [0, 1]) by rank floor(q * (count - 1)) of the sorted values, within
  // kRelativeError of the exact value at that rank. 0 for an empty sketch.
  double Quantile(double q) const;

  // Compact binary form: a version byte, then varints (zero count, first bucket index
  // zigzag-encoded, bucket count, per-bucket counts). Typically tens to a few hundred bytes.
  std::string Serialize() const;
  // Parses Serialize()'s output; InvalidArgument names what is wrong with the blob: among
  // others, buckets outside [kMinIndex, kMaxIndex] or more than kMaxCount values.
  static absl::StatusOr<DDSketch> Deserialize(absl::string_view blob);

  // The buckets as parallel arrays (index, count) of the non-empty ones in index order, and the
  // zero bucket: the form a fleet store keeps, where adding counts by index (ClickHouse's
  // sumMap) merges sketches exactly as Merge does.
  uint64_t zero_count() const { return zero_count_; }
  void Bins(std::vector<int32_t>* indices, std::vector<uint64_t>* counts) const;
  // The sketch Bins described; InvalidArgument for arrays of different lengths, an index
  // outside [kMinIndex, kMaxIndex] or more than kMaxCount values.
  static absl::StatusOr<DDSketch> FromBins(uint64_t zero_count, const std::vector<int32_t>& indices,
                                           const std::vector<uint64_t>& counts);

  // Whether every value it counts could lie in [lo, hi]: its buckets lie between lo's and
  // hi's, and its zero bucket is empty unless lo <= 0. A sketch sent beside a minimum and a
  // maximum is held to them with this.
  bool WithinValues(double lo, double hi) const;

  bool operator==(const DDSketch& o) const {
    return count_ == o.count_ && zero_count_ == o.zero_count_ && Normalized() == o.Normalized();
  }

 private:
  static int32_t IndexOf(double value);
  static double ValueOf(int32_t index);
  void EnsureIndex(int32_t index);
  // (first index, counts) without leading or trailing empty buckets.
  std::pair<int32_t, std::vector<uint64_t>> Normalized() const;

  uint64_t count_ = 0;
  uint64_t zero_count_ = 0;
  int32_t min_index_ = 0;       // bucket index of bins_[0]
  std::vector<uint64_t> bins_;  // dense counts from min_index_
};

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_DDSKETCH_H_
