#include "trace/ddsketch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"
#include "trace/varint.h"

namespace podprof::trace {
namespace {

using ::podprof::testing::StatusIs;
using ::testing::HasSubstr;

double ExactQuantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

std::vector<double> LogNormalDurations(int n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  // Kernel-like durations: around 50 us, spread over several orders of magnitude, in ps.
  std::lognormal_distribution<double> dist(std::log(50e6), 1.5);
  std::vector<double> v(n);
  for (double& x : v) x = std::round(dist(rng)) + 1;
  return v;
}

TEST(DDSketchTest, RelativeErrorIsAboutHalfAPercent) {
  EXPECT_NEAR(DDSketch::kRelativeError, 0.0054, 0.0001);
}

TEST(DDSketchTest, QuantilesWithinPromisedRelativeError) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::vector<double> values = LogNormalDurations(20000, seed);
    DDSketch sketch;
    for (double v : values) sketch.Add(v);
    ASSERT_EQ(sketch.count(), values.size());
    for (double q : {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0}) {
      double exact = ExactQuantile(values, q);
      double got = sketch.Quantile(q);
      EXPECT_LE(std::abs(got - exact) / exact, DDSketch::kRelativeError + 1e-12)
          << "q=" << q << " exact=" << exact << " got=" << got << " seed=" << seed;
    }
  }
}

TEST(DDSketchTest, SmallAndRepeatedValues) {
  DDSketch sketch;
  sketch.Add(1000, 3);
  sketch.Add(0);
  EXPECT_EQ(sketch.count(), 4u);
  EXPECT_EQ(sketch.Quantile(0), 0);  // The zero bucket sorts first.
  EXPECT_NEAR(sketch.Quantile(0.5), 1000, 1000 * DDSketch::kRelativeError);
  EXPECT_NEAR(sketch.Quantile(1), 1000, 1000 * DDSketch::kRelativeError);
  EXPECT_EQ(DDSketch().Quantile(0.5), 0);
}

TEST(DDSketchTest, MergeOrderDoesNotMatter) {
  std::vector<double> values = LogNormalDurations(5000, 7);
  std::vector<DDSketch> parts(5);
  for (size_t i = 0; i < values.size(); ++i) parts[i % parts.size()].Add(values[i]);
  DDSketch whole;
  for (double v : values) whole.Add(v);

  std::vector<int> order = {0, 1, 2, 3, 4};
  int permutations = 0;
  do {
    DDSketch merged;
    for (int i : order) merged.Merge(parts[i]);
    EXPECT_EQ(merged, whole);
    EXPECT_EQ(merged.Serialize(), whole.Serialize());
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(permutations, 120);

  // Tree-shaped merges agree with flat ones too.
  DDSketch left = parts[0], right = parts[3];
  left.Merge(parts[1]);
  right.Merge(parts[4]);
  right.Merge(parts[2]);
  right.Merge(left);
  EXPECT_EQ(right.Serialize(), whole.Serialize());
}

TEST(DDSketchTest, SerializeRoundTripIsCompact) {
  std::vector<double> values = LogNormalDurations(10000, 11);
  DDSketch sketch;
  for (double v : values) sketch.Add(v);
  sketch.Add(0, 2);
  std::string blob = sketch.Serialize();
  EXPECT_LT(blob.size(), 2048u);
  auto back = DDSketch::Deserialize(blob);
  ASSERT_OK(back);
  EXPECT_EQ(*back, sketch);
  EXPECT_EQ(back->count(), sketch.count());
  EXPECT_EQ(back->Quantile(0.9), sketch.Quantile(0.9));
}

TEST(DDSketchTest, DeserializeRejectsDamage) {
  DDSketch sketch;
  sketch.Add(12345);
  std::string blob = sketch.Serialize();
  EXPECT_FALSE(DDSketch::Deserialize("").ok());
  EXPECT_FALSE(DDSketch::Deserialize("\x07").ok());
  EXPECT_FALSE(DDSketch::Deserialize(blob.substr(0, blob.size() - 1)).ok());
  EXPECT_FALSE(DDSketch::Deserialize(blob + "x").ok());
  EXPECT_FALSE(DDSketch::Deserialize(std::string("\x01\x00\x00\xff\xff\xff\xff\x0f", 8)).ok());
}

// A sketch whose zigzag-encoded first bucket is `first`, holding one value in each of `n`
// buckets: what a hostile agent or a damaged row can put in a blob.
std::string BlobAt(int64_t first, uint64_t n) {
  std::string blob(1, '\x01');
  PutVarint(0, &blob);
  PutVarint(ZigZag(first), &blob);
  PutVarint(n, &blob);
  for (uint64_t i = 0; i < n; ++i) PutVarint(1, &blob);
  return blob;
}

// Two sketches of one kernel far apart (bucket -2^31 and 1701) were merged with int32
// arithmetic into 2^31 buckets (std::length_error), and a stored bucket at 2^31-1 allocated
// on every read: both are refused where they are read, and what is read merges in bounds.
TEST(DDSketchTest, BucketsBeyondAnyDurationAreRefusedWhereRead) {
  EXPECT_THAT(DDSketch::Deserialize(BlobAt(INT32_MIN, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside")));
  EXPECT_THAT(DDSketch::Deserialize(BlobAt(INT32_MAX, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside")));
  EXPECT_THAT(DDSketch::Deserialize(BlobAt(DDSketch::kMaxIndex, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside")));
  EXPECT_THAT(DDSketch::FromBins(0, {1701, INT32_MIN}, {1, 1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("outside")));
  // The ends of the range themselves are sketches, and merge into at most the whole range.
  ASSERT_OK_AND_ASSIGN(DDSketch low, DDSketch::Deserialize(BlobAt(DDSketch::kMinIndex, 1)));
  ASSERT_OK_AND_ASSIGN(DDSketch high, DDSketch::Deserialize(BlobAt(DDSketch::kMaxIndex, 1)));
  low.Merge(high);
  EXPECT_EQ(low.count(), 2u);
  std::vector<int32_t> idx;
  std::vector<uint64_t> cnt;
  low.Bins(&idx, &cnt);
  EXPECT_EQ(idx, (std::vector<int32_t>{DDSketch::kMinIndex, DDSketch::kMaxIndex}));
}

// Values beyond the range (or subnormal) land in its end buckets rather than outside it.
TEST(DDSketchTest, AddKeepsExtremeValuesInRange) {
  DDSketch s;
  s.Add(1e300);
  s.Add(std::numeric_limits<double>::denorm_min());
  s.Add(1e-30);
  std::vector<int32_t> idx;
  std::vector<uint64_t> cnt;
  s.Bins(&idx, &cnt);
  ASSERT_EQ(idx.size(), 2u);
  EXPECT_EQ(idx.front(), DDSketch::kMinIndex);
  EXPECT_EQ(idx.back(), DDSketch::kMaxIndex);
  EXPECT_EQ(s.count(), 3u);
  // Ordinary values keep their exact buckets: 1 ps is bucket 0, 2^62 ps bucket 62 * 64.
  DDSketch t;
  t.Add(1);
  t.Add(std::ldexp(1.0, 62));
  t.Bins(&idx, &cnt);
  EXPECT_EQ(idx, (std::vector<int32_t>{0, 62 * 64}));
}

// Counts that would wrap a uint64 (or exceed any capture) are refused, not wrapped.
TEST(DDSketchTest, CountsThatWrapAreRefused) {
  std::string blob(1, '\x01');
  for (int i = 0; i < 9; ++i) blob.push_back('\xff');
  blob.push_back('\x01');  // zero count 2^64 - 1
  blob += std::string("\x00\x00", 2);
  EXPECT_THAT(DDSketch::Deserialize(blob),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("counts more than")));
  EXPECT_THAT(DDSketch::FromBins(0, {1, 2}, {UINT64_MAX, 2}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more than")));
}

// The fleet store keeps sketches as (index, count) arrays and merges them by adding counts per
// index (ClickHouse's sumMap): that must be Merge, exactly.
TEST(DDSketchTest, BinsAddedByIndexAreTheMergedSketch) {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> d(10, 1.5);
  DDSketch a, b, merged;
  a.Add(0, 3);  // the zero bucket travels on its own
  for (int i = 0; i < 5000; ++i) a.Add(d(rng));
  for (int i = 0; i < 3000; ++i) b.Add(d(rng) * 3);
  merged = a;
  merged.Merge(b);
  std::map<int32_t, uint64_t> summed;
  for (const DDSketch* s : {&a, &b}) {
    std::vector<int32_t> idx;
    std::vector<uint64_t> cnt;
    s->Bins(&idx, &cnt);
    ASSERT_EQ(idx.size(), cnt.size());
    ASSERT_TRUE(std::is_sorted(idx.begin(), idx.end()));
    for (size_t i = 0; i < idx.size(); ++i) {
      EXPECT_GT(cnt[i], 0u);  // only non-empty buckets
      summed[idx[i]] += cnt[i];
    }
  }
  std::vector<int32_t> idx;
  std::vector<uint64_t> cnt;
  for (const auto& [i, c] : summed) {
    idx.push_back(i);
    cnt.push_back(c);
  }
  absl::StatusOr<DDSketch> rebuilt = DDSketch::FromBins(a.zero_count() + b.zero_count(), idx, cnt);
  ASSERT_OK(rebuilt);
  EXPECT_EQ(*rebuilt, merged);
  for (double q : {0.0, 0.01, 0.5, 0.99, 1.0}) EXPECT_EQ(rebuilt->Quantile(q), merged.Quantile(q));
  EXPECT_FALSE(DDSketch::FromBins(0, {1, 2}, {1}).ok());
}

}  // namespace
}  // namespace podprof::trace
