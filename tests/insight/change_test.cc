#include "insight/change.h"

#include "gtest/gtest.h"
#include "trace/ddsketch.h"

namespace podprof::insight {
namespace {

// `n` durations around `ps`, spread by +-`spread` ps.
trace::DDSketch Around(double ps, double spread, int n = 200) {
  trace::DDSketch s;
  for (int i = 0; i < n; ++i) s.Add(ps + spread * ((i % 21) - 10) / 10.0);
  return s;
}

TEST(ChangeTest, RelativeChangeIsZeroWithoutBothSides) {
  EXPECT_DOUBLE_EQ(RelativeChange(100, 120), 0.2);
  EXPECT_DOUBLE_EQ(RelativeChange(100, 80), -0.2);
  EXPECT_EQ(RelativeChange(0, 120), 0);
  EXPECT_EQ(RelativeChange(100, 0), 0);
}

TEST(ChangeTest, MedianShiftNeedsTheThresholdAndTheBaselineSpread) {
  const trace::DDSketch base = Around(1e6, 5000);
  // 20% slower: beyond 5% and beyond the baseline's p90.
  const QuantileShift slow = MedianShift(base, Around(1.2e6, 5000), kDefaultRegressionThreshold);
  EXPECT_NEAR(slow.change, 0.2, 0.015);
  EXPECT_TRUE(slow.regressed);
  // 0.1% slower: noise.
  EXPECT_FALSE(MedianShift(base, Around(1.001e6, 5000), kDefaultRegressionThreshold).regressed);
  // 6% slower, but inside a baseline that spreads +-10%: not a regression.
  const trace::DDSketch wide = Around(1e6, 100'000);
  const QuantileShift inside = MedianShift(wide, Around(1.06e6, 1000), kDefaultRegressionThreshold);
  EXPECT_GT(inside.change, 0.05);
  EXPECT_FALSE(inside.regressed);
  // Faster is never a regression.
  EXPECT_FALSE(MedianShift(base, Around(0.5e6, 5000), kDefaultRegressionThreshold).regressed);
}

TEST(ChangeTest, TheFloorIsTwiceTheSketchError) {
  const trace::DDSketch base = Around(1e6, 0);
  // A 0.2% shift is inside the sketch's own error (2 x 0.54%): no regression even at a
  // threshold of 0.
  EXPECT_FALSE(MedianShift(base, Around(1.002e6, 0), 0).regressed);
  EXPECT_TRUE(MedianShift(base, Around(1.03e6, 0), 0).regressed);
}

TEST(ChangeTest, TailShiftComparesP99WithTheBaselineP999) {
  trace::DDSketch base = Around(1e6, 1000, 1000);
  trace::DDSketch cand = Around(1e6, 1000, 980);
  for (int i = 0; i < 20; ++i) cand.Add(2e6);  // 2% of runs twice as slow
  const QuantileShift tail = TailShift(base, cand, kDefaultRegressionThreshold);
  EXPECT_GT(tail.change, 0.5);
  EXPECT_TRUE(tail.regressed);
  EXPECT_FALSE(MedianShift(base, cand, kDefaultRegressionThreshold).regressed);
}

TEST(ChangeTest, AchievedTflopsIsFlopsPerPicosecond) {
  // 10 runs of 1 MFLOP and 30 of 3 MFLOP in 130 us: 100 MFLOP / 130 us = 0.769 TFLOP/s, not the
  // sum of each row's rate over a growing total.
  EXPECT_NEAR(AchievedTflops(10 * 1e6 + 30 * 3e6, 130'000'000), 0.769, 0.001);
  EXPECT_EQ(AchievedTflops(1e6, 0), 0);
}

}  // namespace
}  // namespace podprof::insight
