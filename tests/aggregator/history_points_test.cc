// The history API's points: the rate over the merged rows and each point's regression flag, as
// the web page draws them without judging anything itself.
#include <vector>

#include "aggregator/api_rows.h"
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

}  // namespace
}  // namespace podprof::aggregator
