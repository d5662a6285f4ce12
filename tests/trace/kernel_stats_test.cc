#include "trace/kernel_stats.h"

#include "gtest/gtest.h"

namespace podprof::trace {
namespace {

HostCapture TwoChipCapture() {
  HostCapture c;
  c.host.chips.resize(2);
  c.host.chips[1].ordinal = 1;
  KernelDef dot;
  dot.name = "dot.1";
  dot.flops = 2'000'000'000;       // 2 GFLOP per call
  dot.bytes_accessed = 1'000'000;  // 1 MB per call
  KernelDef copy;
  copy.name = "copy.3";
  c.kernels = {dot, copy};
  for (int chip = 0; chip < 2; ++chip) {
    EventBlock b;
    b.chip = chip;
    b.line = "XLA Ops";
    for (int i = 0; i < 4; ++i) {
      b.start_ps.push_back(i * 10'000'000);
      b.duration_ps.push_back(1'000'000 * (chip + 1));  // 1 us on chip 0, 2 us on chip 1
      b.kernel.push_back(0);
      b.collective.push_back(0);
    }
    b.start_ps.push_back(50'000'000);
    b.duration_ps.push_back(100);
    b.kernel.push_back(1);
    b.collective.push_back(0);
    c.blocks.push_back(b);
  }
  EventBlock modules;  // Not a kernel line: must not count.
  modules.kind = LineKind::kModules;
  modules.start_ps = {0};
  modules.duration_ps = {999'999'999};
  modules.kernel = {0};
  modules.collective = {0};
  c.blocks.push_back(modules);
  return c;
}

TEST(KernelStatsTest, PerChipCountsTotalsAndOrder) {
  HostCapture c = TwoChipCapture();
  std::vector<KernelStats> stats = ComputeKernelStats(c);
  ASSERT_EQ(stats.size(), 4u);
  EXPECT_EQ(stats[0].chip, 1);  // 8 us total, the longest
  EXPECT_EQ(stats[0].kernel, 0u);
  EXPECT_EQ(stats[0].count, 4);
  EXPECT_EQ(stats[0].total_ps, 8'000'000);
  EXPECT_EQ(stats[0].min_ps, 2'000'000);
  EXPECT_EQ(stats[0].max_ps, 2'000'000);
  EXPECT_EQ(stats[0].QuantilePs(0.5), 2'000'000);  // Clamped to [min, max].
  EXPECT_EQ(stats[1].chip, 0);
  EXPECT_EQ(stats[1].total_ps, 4'000'000);
}

TEST(KernelStatsTest, RollUpMergesChips) {
  HostCapture c = TwoChipCapture();
  std::vector<KernelStats> rolled = RollUpByKernel(ComputeKernelStats(c));
  ASSERT_EQ(rolled.size(), 2u);
  EXPECT_EQ(rolled[0].chip, KernelStats::kAllChips);
  EXPECT_EQ(rolled[0].kernel, 0u);
  EXPECT_EQ(rolled[0].count, 8);
  EXPECT_EQ(rolled[0].total_ps, 12'000'000);
  EXPECT_EQ(rolled[0].min_ps, 1'000'000);
  EXPECT_EQ(rolled[0].max_ps, 2'000'000);
  EXPECT_DOUBLE_EQ(rolled[0].mean_ps(), 1'500'000);
  EXPECT_EQ(rolled[0].sketch.count(), 8u);
  EXPECT_EQ(rolled[1].count, 2);
}

TEST(KernelStatsTest, RatesAgainstPeaks) {
  KernelStats s;
  s.count = 4;
  s.total_ps = 4'000'000;  // 1 us per call
  KernelDef def;
  def.flops = 2'000'000'000;
  def.bytes_accessed = 1'000'000;
  KernelRates r = ComputeRates(s, def, /*peak_tflops=*/918, /*peak_hbm_gbps=*/1640);
  EXPECT_DOUBLE_EQ(r.achieved_tflops, 2000);       // 2 GFLOP in 1 us = 2 PFLOP/s
  EXPECT_NEAR(r.achieved_hbm_gbps, 1000.0, 1e-9);  // 1 MB in 1 us = 1 TB/s
  EXPECT_NEAR(r.fraction_of_peak_hbm, 1000.0 / 1640, 1e-12);
  def.category = "copy-start";  // Async pairs: no rates for either half.
  EXPECT_EQ(ComputeRates(s, def, 918, 1640).achieved_hbm_gbps, 0);
  def.category = "copy-done";
  EXPECT_EQ(ComputeRates(s, def, 918, 1640).fraction_of_peak_hbm, 0);
  def.category = "convolution fusion";
  KernelRates unknown = ComputeRates(s, def, 0, 0);
  // 2 PFLOP/s on a 918 TFLOP/s chip is not a measurement (a wrong cost or peak): refused as
  // 0, not shown as 218% (the verdict names the inputs, insight::Decide).
  EXPECT_EQ(r.fraction_of_peak_flops, 0);
  EXPECT_EQ(unknown.fraction_of_peak_flops, 0);
}

}  // namespace
}  // namespace podprof::trace
