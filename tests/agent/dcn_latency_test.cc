// The agent's DCN transfer latency per interval (agent/dcn_latency.h): tpu-info's percentile on
// hand-computed distributions, the difference of two cumulative reads across classes and
// restarts, and hostile distributions refused with memory bounded.
#include "agent/dcn_latency.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "proto/tpu_metric_names.h"

namespace podprof::agent {
namespace {

namespace rt = tpu::monitoring::runtime;

constexpr int64_t kSecondNs = 1'000'000'000;

// Worked by hand from tpu-info's `_get_percentile` (rank = floor(total * q), walk down from
// the top bucket, interpolate in the bucket whose lower bound is scale * growth^(i-1)), and
// checked against tpu-info 0.14's own function on the same lists.
TEST(TpuInfoPercentileTest, HandComputed) {
  const std::vector<int64_t> b = {0, 2, 3, 5};  // scale 10, growth 2: [10,20) [20,40) [40,80)
  // p50: rank 5; after the top bucket 5 lie below: 40 * (1 + 0/5) = 40.
  EXPECT_DOUBLE_EQ(TpuInfoPercentile(b, 10, 0.5, 10, 2), 40);
  // p99: rank 9; 4 into the top bucket of 5: 40 * (1 + 4/5 * 1) = 72.
  EXPECT_DOUBLE_EQ(TpuInfoPercentile(b, 10, 0.99, 10, 2), 72);
  // p20: rank 2; the top bucket leaves 5 > 2, the next leaves 2: 20 * (1 + 0/3) = 20.
  EXPECT_DOUBLE_EQ(TpuInfoPercentile(b, 10, 0.2, 10, 2), 20);
  // p30: rank 3: 20 * (1 + 1/3) = 26.67.
  EXPECT_DOUBLE_EQ(TpuInfoPercentile(b, 10, 0.3, 10, 2), 20 * (1 + 1.0 / 3));
  // Growth 1.25: 80 in [1.25^16, 1.25^17) and 80 in [1.25^26, 1.25^27). p50: rank 80, 80
  // below the top class: its lower bound; p99: rank 158, 78 of 80 into it.
  std::vector<int64_t> c(66, 0);
  c[17] = 80;
  c[27] = 80;
  EXPECT_NEAR(TpuInfoPercentile(c, 160, 0.5, 1, 1.25), 330.872245, 1e-5);
  EXPECT_NEAR(TpuInfoPercentile(c, 160, 0.99, 1, 1.25), 330.872245 * (1 + 78.0 / 80 * 0.25), 1e-5);
  // Nothing, or all in the underflow: 1.0, as tpu-info says.
  EXPECT_DOUBLE_EQ(TpuInfoPercentile({0, 0, 0}, 0, 0.5, 10, 2), 1.0);
  EXPECT_DOUBLE_EQ(TpuInfoPercentile({5, 0, 0}, 5, 0.5, 10, 2), 1.0);
  EXPECT_DOUBLE_EQ(TpuInfoPercentile({}, 5, 0.5, 10, 2), 1.0);
}

// One buffer-size class's Metric with these bucket counts, started at `start_ns`.
rt::Metric Class(const std::string& label, const std::vector<int64_t>& buckets, int64_t start_ns,
                 double scale = 1, double growth = 2) {
  rt::Metric m;
  m.mutable_attribute()->set_key(tpu_metrics::kMegascaleKey);
  rt::Attribute* a =
      m.mutable_attribute()->mutable_value()->mutable_kvlist_attr()->add_attributes();
  a->set_key(tpu_metrics::kBufferSizeKey);
  a->mutable_value()->set_string_attr(label);
  m.mutable_start_timestamp()->set_seconds(start_ns / kSecondNs);
  m.mutable_start_timestamp()->set_nanos(static_cast<int32_t>(start_ns % kSecondNs));
  rt::Distribution* d = m.mutable_distribution();
  int64_t n = 0;
  for (int64_t b : buckets) {
    d->add_bucket_counts(b);
    n += b;
  }
  d->set_count(n);
  auto* e = d->mutable_bucket_options()->mutable_exponential_buckets();
  e->set_scale(scale);
  e->set_growth_factor(growth);
  e->set_num_finite_buckets(static_cast<int32_t>(buckets.size()) - 2);
  return m;
}

rt::TPUMetric Metric(std::vector<rt::Metric> classes) {
  rt::TPUMetric out;
  out.set_name(tpu_metrics::kDcnTransferUs);
  for (rt::Metric& m : classes) *out.add_metrics() = std::move(m);
  return out;
}

TEST(DcnLatencyTrackerTest, TheIntervalIsTheGrowthOfEveryClass) {
  DcnLatencyTracker t;
  const int64_t start = 100 * kSecondNs;
  // First read: only remembered (it began before the agent looked).
  ASSERT_TRUE(t.Add(0, Metric({Class("1MB+", {0, 50, 0, 0}, start)}), 0).ok());
  DcnInterval first = t.Finish();
  EXPECT_EQ(first.transfers, 0);
  EXPECT_EQ(first.p50_us, -1);
  // The interval's 10 transfers lie in [4, 8) whatever the 50 before them were.
  ASSERT_TRUE(
      t.Add(0, Metric({Class("1MB+", {0, 50, 0, 5}, start), Class("4MB+", {0, 0, 0, 5}, start)}),
            200 * kSecondNs)
          .ok());
  DcnInterval second = t.Finish();
  EXPECT_EQ(second.transfers, 5);  // the 4MB+ class was first seen: remembered only
  EXPECT_DOUBLE_EQ(second.p50_us, 4 * (1 + 2.0 / 5));
  ASSERT_TRUE(
      t.Add(0, Metric({Class("1MB+", {0, 50, 0, 6}, start), Class("4MB+", {0, 0, 0, 14}, start)}),
            201 * kSecondNs)
          .ok());
  DcnInterval third = t.Finish();
  EXPECT_EQ(third.transfers, 10);  // 1 + 9, summed over the classes
  EXPECT_DOUBLE_EQ(third.p50_us, 4 * (1 + 5.0 / 10));
  EXPECT_DOUBLE_EQ(third.p99_us, 4 * (1 + 9.0 / 10));
  // Nothing new: no transfers, no percentiles.
  ASSERT_TRUE(
      t.Add(0, Metric({Class("1MB+", {0, 50, 0, 6}, start), Class("4MB+", {0, 0, 0, 14}, start)}),
            202 * kSecondNs)
          .ok());
  EXPECT_EQ(t.Finish().transfers, 0);
}

TEST(DcnLatencyTrackerTest, ARestartCountsFromTheRestart) {
  DcnLatencyTracker t;
  ASSERT_TRUE(t.Add(0, Metric({Class("1MB+", {0, 50, 0, 0}, 100 * kSecondNs)}), 0).ok());
  t.Finish();
  // Restarted at 250 s, after the last sample (240 s): all 3 of it are the interval's.
  ASSERT_TRUE(
      t.Add(0, Metric({Class("1MB+", {0, 3, 0, 0}, 250 * kSecondNs)}), 240 * kSecondNs).ok());
  EXPECT_EQ(t.Finish().transfers, 3);
  // Counts that went back under the same start: a restart not said; nothing counted.
  ASSERT_TRUE(
      t.Add(0, Metric({Class("1MB+", {0, 1, 0, 0}, 250 * kSecondNs)}), 260 * kSecondNs).ok());
  EXPECT_EQ(t.Finish().transfers, 0);
}

TEST(DcnLatencyTrackerTest, HostileDistributionsAreRefusedNotCounted) {
  DcnLatencyTracker t;
  const int64_t start = 100 * kSecondNs;
  // A million buckets.
  std::vector<int64_t> many(1'000'000, 0);
  many[5] = 1;
  absl::Status s = t.Add(0, Metric({Class("1MB+", many, start)}), 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("too many buckets: class \"1MB+\" has 1000000"), std::string::npos)
      << s;
  // Counts near int64's limit, which a sum would overflow.
  s = t.Add(0, Metric({Class("1MB+", {0, INT64_MAX, INT64_MAX, 0}, start)}), 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  s = t.Add(0, Metric({Class("1MB+", {0, -5, 0, 0}, start)}), 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  // Buckets that are not exponential, or a growth that is not one.
  rt::Metric linear = Class("1MB+", {0, 1, 0, 0}, start);
  linear.mutable_distribution()->mutable_bucket_options()->mutable_linear_buckets();
  EXPECT_FALSE(t.Add(0, Metric({linear}), 0).ok());
  EXPECT_FALSE(t.Add(0, Metric({Class("1MB+", {0, 1, 0, 0}, start, 1, 1.0)}), 0).ok());
  EXPECT_FALSE(t.Add(0, Metric({Class("1MB+", {0, 1, 0, 0}, start, -1, 2)}), 0).ok());
  EXPECT_FALSE(t.Add(0, Metric({Class("1MB+", {0, 1, 0, 0}, start, NAN, 2)}), 0).ok());
  // Thousands of classes.
  std::vector<rt::Metric> classes;
  for (int i = 0; i < 5000; ++i) classes.push_back(Class(std::to_string(i), {0, 1}, start));
  s = t.Add(0, Metric(classes), 0);
  EXPECT_NE(s.message().find("serves 5000, at most 64"), std::string::npos) << s;
  EXPECT_EQ(t.Finish().transfers, 0);

  // A class in another layout than the interval's first is left out; the rest still counts.
  DcnLatencyTracker u;
  ASSERT_TRUE(u.Add(0,
                    Metric({Class("1MB+", {0, 0, 0, 0}, start),
                            Class("2MB+", {0, 0, 0, 0}, start, 1, 1.5)}),
                    0)
                  .ok());
  u.Finish();
  s = u.Add(
      0, Metric({Class("1MB+", {0, 0, 4, 0}, start), Class("2MB+", {0, 0, 7, 0}, start, 1, 1.5)}),
      200 * kSecondNs);
  EXPECT_NE(s.message().find("bucket layouts differ"), std::string::npos) << s;
  const DcnInterval iv = u.Finish();
  EXPECT_EQ(iv.transfers, 4);
  EXPECT_DOUBLE_EQ(iv.p50_us, 2 * (1 + 2.0 / 4));
}

}  // namespace
}  // namespace podprof::agent
