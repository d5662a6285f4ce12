// The history API's points: the rate over the merged rows and each point's regression flag, as
// the web page draws them without judging anything itself.
#include <vector>

#include "aggregator/api/api_rows.h"
#include "gtest/gtest.h"

namespace podprof::aggregator {
namespace {

storage::HistoryPoint Point(const std::string& id, double median_ps, double spread_ps) {
  storage::HistoryPoint p;
  p.capture_id = id;
  p.count = 100;
  for (int i = 0; i < 100; ++i) {
    const double ps = median_ps + spread_ps * ((i % 21) - 10) / 10.0;
    p.sketch.Add(ps);
    p.total_ps += static_cast<int64_t>(ps);
  }
  p.flops_executed = 100 * 2e6;
  return p;
}

TEST(HistoryPointsTest, EachPointIsJudgedAgainstTheOneBefore) {
  const std::vector<storage::HistoryPoint> points = {
      Point("a", 1e6, 1000),     // oldest: nothing to compare with
      Point("b", 1.2e6, 1000),   // 20% slower: a regression
      Point("c", 1.21e6, 1000),  // 1% on top of b: noise
      Point("d", 1.5e6, 1000),   // 24% slower again
  };
  google::protobuf::RepeatedPtrField<podprof::v1::KernelHistoryPoint> out;
  FillHistoryPoints(points, 0, &out);
  ASSERT_EQ(out.size(), 4);
  EXPECT_FALSE(out[0].regression());
  EXPECT_TRUE(out[1].regression());
  EXPECT_FALSE(out[2].regression());
  EXPECT_TRUE(out[3].regression());
  EXPECT_NEAR(out[0].achieved_tflops(), 2e8 / static_cast<double>(points[0].total_ps), 1e-12);

  // The most recent points only: the first kept is still judged against the one before it.
  google::protobuf::RepeatedPtrField<podprof::v1::KernelHistoryPoint> recent;
  FillHistoryPoints(points, 1, &recent);
  ASSERT_EQ(recent.size(), 3);
  EXPECT_EQ(recent[0].capture_id(), "b");
  EXPECT_TRUE(recent[0].regression());
}

// Issue #53: `history` showed "-" for the MXU where `stats` showed the runtime's mxu_busy gauge.
TEST(HistoryPointsTest, ThePointCarriesTheBusyGaugesMeansAsStatsHasThem) {
  std::vector<storage::HistoryPoint> points = {Point("a", 1e6, 1000), Point("b", 1e6, 1000)};
  points[0].busy_gauges["mxu_busy"] = {0.72 * 4e6, 4'000'000};  // level x ps, ps covered
  points[0].busy_gauges["vpu_busy"] = {0, 4'000'000};           // measured idle
  points[0].busy_gauges["scalar_busy"] = {1, 0};                // covered nothing: no mean
  google::protobuf::RepeatedPtrField<podprof::v1::KernelHistoryPoint> out;
  FillHistoryPoints(points, 0, &out);
  ASSERT_EQ(out.size(), 2);
  EXPECT_DOUBLE_EQ(out[0].utilization().at("mxu_busy"), 0.72);
  EXPECT_DOUBLE_EQ(out[0].utilization().at("vpu_busy"), 0);
  EXPECT_EQ(out[0].utilization().count("scalar_busy"), 0u);
  EXPECT_TRUE(out[1].utilization().empty());  // no counters covered it
}

}  // namespace
}  // namespace podprof::aggregator
