// Each kernel execution's figures as XProf's per-kernel tool lists them, from the perf series
// a capture holds (peers.kernel_utilization holds them against XProf itself).
#include "insight/kernel_utilization.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trace/model.h"

namespace podprof::insight {
namespace {

// A v7x chip's two executions of fusion.1 (10 us each, 20 us apart) and perf series that step
// by each execution's counts across it: die 0 counts 19000 cycles and `busy2` MXU_BUSY_2
// cycles per execution; die 1 counts only when `die1` says so.
trace::HostCapture TwoExecutions(const std::vector<double>& busy2, bool die1) {
  trace::HostCapture c;
  trace::Chip chip;
  chip.generation = "v7x";
  c.host.chips.push_back(chip);
  trace::KernelDef k;
  k.name = "fusion.1";
  c.kernels.push_back(k);
  trace::EventBlock b;
  b.line = "XLA Ops";
  b.kind = trace::LineKind::kOps;
  b.base_ns = 1'000'000;
  for (int64_t start_ps : {0LL, 30'000'000LL}) {
    b.start_ps.push_back(start_ps);
    b.duration_ps.push_back(10'000'000);
    b.kernel.push_back(0);
    b.collective.push_back(0);
  }
  c.blocks.push_back(b);
  auto series = [&](const std::string& name, const std::vector<double>& per_execution) {
    trace::CounterSeries s;
    s.name = name;
    double total = 0;
    for (size_t i = 0; i < per_execution.size(); ++i) {
      const int64_t begin = 1'000'000 + static_cast<int64_t>(i) * 30'000;
      s.time_ns.push_back(begin);
      s.value.push_back(total);
      total += per_execution[i];
      s.time_ns.push_back(begin + 10'000);
      s.value.push_back(total);
    }
    c.counters.push_back(s);
  };
  series("perf/die0_pwrmgr_cycle_count", {19000, 19000});
  series("perf/die0_tc_mxu_busy_2", busy2);
  if (die1) {
    series("perf/die1_pwrmgr_cycle_count", {19000, 19000});
    series("perf/die1_tc_mxu_busy_2", {0, 0});
  }
  return c;
}

TEST(KernelUtilizationTest, EachExecutionHasItsOwnFigures) {
  const std::vector<ExecutionUtilization> runs =
      ExecutionUtilizations(TwoExecutions({9500, 3800}, /*die1=*/true));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].begin_ns, 1'000'000);
  EXPECT_EQ(runs[1].begin_ns, 1'030'000);
  EXPECT_EQ(runs[0].duration_ps, 10'000'000);
  // Pooled over both dies, as XProf pools: (9500 + 0) / (19000 + 19000).
  EXPECT_DOUBLE_EQ(XprofFiguresOf(runs[0].profile.rows).mxu_utilization, 25.0);
  EXPECT_DOUBLE_EQ(XprofFiguresOf(runs[1].profile.rows).mxu_utilization, 10.0);
  ASSERT_EQ(runs[0].profile.dies.size(), 2u);
  EXPECT_DOUBLE_EQ(XprofFiguresOf(runs[0].profile.dies[0].rows).mxu_utilization, 50.0);
  // Every die counted its cycles: XProf shows the same figures.
  EXPECT_TRUE(runs[0].xprof_differs.empty());
}

// A die not sampled: podprof's figure is the measured die's; XProf counts the other idle for
// the execution's nominal cycles (10 us at 1.9 GHz), halving it, and the execution says so.
TEST(KernelUtilizationTest, ADieNotSampledIsIdleAtNominalCyclesInXprofsView) {
  const std::vector<ExecutionUtilization> runs =
      ExecutionUtilizations(TwoExecutions({9500, 3800}, /*die1=*/false));
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_DOUBLE_EQ(XprofFiguresOf(runs[0].profile.rows).mxu_utilization, 50.0);
  EXPECT_DOUBLE_EQ(XprofFiguresOf(runs[1].profile.rows).mxu_utilization, 20.0);
  EXPECT_DOUBLE_EQ(XprofFiguresOf(runs[0].xprof_rows).mxu_utilization, 25.0);
  EXPECT_DOUBLE_EQ(XprofFiguresOf(runs[1].xprof_rows).mxu_utilization, 10.0);
  EXPECT_NE(runs[0].xprof_differs.find("counts die 1"), std::string::npos) << runs[0].xprof_differs;
  EXPECT_NE(runs[0].xprof_differs.find("19000 nominal cycles"), std::string::npos)
      << runs[0].xprof_differs;
}

// XProf's names: HBM Rd+Wr is "HBM Bandwidth Utilization"; the MXU precision rows are the
// breakdown, shares of their sum; Avg MXU Busy is mxu_utilization, not another metric.
TEST(KernelUtilizationTest, XprofFieldsFromRows) {
  const XprofFigures f = XprofFiguresOf({{"Avg MXU Busy", 30, 100, "cycles"},
                                         {"MXU BF16", 60, 200, "cycles"},
                                         {"MXU E4M3 + E5M2", 20, 200, "cycles"},
                                         {"HBM Rd+Wr", 5, 100, "bytes"},
                                         {"Vmem Stores", 1, 4, "instructions"}});
  EXPECT_DOUBLE_EQ(f.mxu_utilization, 30);
  EXPECT_DOUBLE_EQ(f.mxu_cycles_breakdown.at("BF16"), 75);
  EXPECT_DOUBLE_EQ(f.mxu_cycles_breakdown.at("FP8"), 25);
  EXPECT_DOUBLE_EQ(f.other_metrics.at("HBM Bandwidth Utilization"), 5);
  EXPECT_DOUBLE_EQ(f.other_metrics.at("Vmem Stores"), 25);
  EXPECT_EQ(f.other_metrics.count("Avg MXU Busy"), 0u);
}

TEST(KernelUtilizationTest, NoPerfSeriesNoExecutions) {
  trace::HostCapture c = TwoExecutions({1, 1}, true);
  c.counters.clear();
  EXPECT_TRUE(ExecutionUtilizations(c).empty());
}

}  // namespace
}  // namespace podprof::insight
