// The Utilization Viewer's formulas over a kernel's counter increases, and the causes drawn
// from them.
#include "insight/kernel_profile.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "insight/verdict.h"
#include "trace/chip_catalog.h"

namespace podprof::insight {
namespace {

const trace::ChipGeneration* V7x() { return trace::FindGenerationByName("v7x"); }

// 1 ms of a v7x kernel: 1.9e6 cycles per die at the nominal clock.
constexpr int64_t kMs = 1'000'000'000;

std::map<std::string, double> BothDies(const std::map<std::string, double>& per_die) {
  std::map<std::string, double> out;
  for (const auto& [name, v] : per_die) {
    out["perf/die0_" + name] = v;
    out["perf/die1_" + name] = v;
  }
  return out;
}

// The value of row `name` of `rows`, as achieved / peak; -1 when absent.
double Share(const std::vector<UtilizationRow>& rows, const std::string& name) {
  for (const UtilizationRow& r : rows) {
    if (r.name == name) return r.Share();
  }
  return -1;
}

TEST(KernelProfileTest, UtilizationViewerRowsPerDieAndPooled) {
  const double cycles = 1.9e6;
  const KernelProfile p =
      ProfileFromCounters(V7x(),
                          BothDies({{"pwrmgr_cycle_count", cycles},
                                    {"tc_cycles", cycles},
                                    {"tc_scalar_alu_instruction_0", 0.5 * cycles},
                                    {"tc_scalar_alu_instruction_1", 0.1 * cycles},
                                    {"tc_vector_alu_instruction_0", cycles},
                                    {"tc_vector_alu_instruction_1", cycles},
                                    {"tc_vpu_valu_fadd_ops_0", cycles},
                                    {"tc_vpu_valu_fmac_ops_3", cycles},
                                    {"tc_vst_instruction", 0.25 * cycles},
                                    {"tc_vld_instruction_0", 0.4 * cycles},
                                    {"tc_mxu_busy_1", 0.2 * cycles},
                                    {"tc_mxu_busy_2", 0.6 * cycles},
                                    {"tc_matmul_lmr_bf16_mxu_0", 0.1 * cycles},
                                    {"tc_matmul_vreg_f8_mxu_1", 0.05 * cycles},
                                    {"tc_xlu_busy_2", 0.05 * cycles},
                                    {"tc_transpose_xlu_1", 0.3 * cycles}}),
                          kMs, 0, kMs);
  ASSERT_TRUE(p.present);
  ASSERT_EQ(p.dies.size(), 2u);
  EXPECT_NEAR(p.cycles, 2 * cycles, 1);
  EXPECT_NEAR(p.throttled, 0, 1e-9);
  EXPECT_NEAR(p.units.at("scalar_alu"), 0.3, 1e-9);  // (0.5 + 0.1) / 2
  EXPECT_NEAR(p.units.at("vector_alu"), 0.5, 1e-9);  // 2 of 4 ALUs busy
  EXPECT_NEAR(p.units.at("vpu"), 0.5, 1e-9);         // 2 of 4 slots' ops
  EXPECT_NEAR(p.units.at("vector_store"), 0.25, 1e-9);
  EXPECT_NEAR(p.units.at("vector_load"), 0.2, 1e-9);  // 0.4 / 2
  EXPECT_NEAR(p.units.at("mxu"), 0.7, 1e-9);          // 0.5 x 0.2 + 0.6
  EXPECT_NEAR(p.units.at("xlu"), 0.05, 1e-9);
  EXPECT_EQ(p.units.count("hbm_bandwidth"), 0u);
  for (const DieProfile& d : p.dies) {
    EXPECT_NEAR(Share(d.rows, "MXU0"), 0.4, 1e-9);      // 4 cycles per LMR BF16
    EXPECT_NEAR(Share(d.rows, "MXU1"), 0.4, 1e-9);      // 8 per VREG F8
    EXPECT_NEAR(Share(d.rows, "MXU BF16"), 0.2, 1e-9);  // of both MXUs' cycles
    EXPECT_NEAR(Share(d.rows, "MXU E4M3 + E5M2"), 0.2, 1e-9);
    EXPECT_NEAR(Share(d.rows, "XLU1"), 0.3, 1e-9);  // v7x: one cycle per instruction
    EXPECT_EQ(Share(d.rows, "Clocks Skipped"), -1) << "not sampled: not shown";
  }
}

// v7x's cycles are the power manager's: without them a die has no figures, even with the
// TensorCore's COUNT_CYCLES, and nothing is inferred from the nominal clock.
TEST(KernelProfileTest, ThrottlingOnlyFromThePowerManager) {
  KernelProfile p = ProfileFromCounters(
      V7x(), BothDies({{"pwrmgr_cycle_count", 1.9e6}, {"pwrmgr_clocks_skipped", 0.57e6}}), kMs, 0,
      kMs);
  EXPECT_NEAR(p.throttled, 0.3, 1e-9);
  EXPECT_EQ(CauseOf(p, false).name, "throttled");
  p = ProfileFromCounters(V7x(), BothDies({{"tc_cycles", 0.7 * 1.9e6}, {"tc_mxu_busy_2", 1e5}}),
                          kMs, 0, kMs);
  EXPECT_TRUE(p.present);
  EXPECT_NEAR(p.throttled, 0, 1e-9);
  EXPECT_TRUE(p.units.empty());
  EXPECT_EQ(p.missing, "no cycle count on any die");
  EXPECT_EQ(CauseOf(p, false).name, "");
}

TEST(KernelProfileTest, IdleMxuWithSyncWaitsIsWaitingOnHbm) {
  const double cycles = 1.9e6;
  const KernelProfile p = ProfileFromCounters(
      V7x(), BothDies({{"pwrmgr_cycle_count", cycles}, {"tc_mxu_busy_2", 0.1 * cycles}}), kMs,
      kMs / 2, kMs);
  EXPECT_NEAR(p.sync_wait, 0.5, 1e-9);
  const ProfileCause c = CauseOf(p, false);
  EXPECT_EQ(c.name, "MXU idle waiting on HBM");
  EXPECT_NE(c.text.find("MXU busy 10.0%"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("50.0% of it in sync waits"), std::string::npos) << c.text;
  // The same MXU without waits is no cause at all.
  const KernelProfile calm = ProfileFromCounters(
      V7x(), BothDies({{"pwrmgr_cycle_count", cycles}, {"tc_mxu_busy_2", 0.1 * cycles}}), kMs, 0,
      kMs);
  EXPECT_EQ(CauseOf(calm, false).name, "");
}

TEST(KernelProfileTest, ABusyUnitBoundsTheKernel) {
  const double cycles = 1.9e6;
  const KernelProfile p = ProfileFromCounters(V7x(),
                                              BothDies({{"pwrmgr_cycle_count", cycles},
                                                        {"tc_vst_instruction", 0.92 * cycles},
                                                        {"tc_mxu_busy_2", 0.4 * cycles}}),
                                              kMs, 0, kMs);
  const ProfileCause c = CauseOf(p, false);
  EXPECT_EQ(c.name, "vector-store bound");
  EXPECT_NE(c.text.find("92.0%"), std::string::npos) << c.text;
}

// HBM is measured against the TensorCore's own cycle count at the generation's clock, as
// XProf's Utilization Viewer does: a die clocked 10% below nominal moved its bytes in 90% of the
// time, so the same bytes read higher than against wall-clock time.
TEST(KernelProfileTest, HbmBandwidthAgainstTheTensorCoresCycles) {
  const trace::ChipGeneration* g = V7x();
  const double beats = 0.5 * g->hbm_bytes_per_s_per_core * 1e-3 / 32;
  const KernelProfile p =
      ProfileFromCounters(g,
                          {{"perf/die0_pwrmgr_cycle_count", 1.9e6},
                           {"perf/die0_tc_cycles", 0.9 * 1.9e6},
                           {"perf/die0_hbm_0_ss_hbmc_0_rd_resp_ps0", beats / 4},
                           {"perf/die0_hbm_1_ss_hbmc_3_wr_req_ps1", beats / 2},
                           {"perf/die0_hbm_2_ss_hbmc_9_partial_write_req_ps0", beats / 4}},
                          kMs, 0, kMs);
  EXPECT_NEAR(p.units.at("hbm_bandwidth"), 0.5 / 0.9, 1e-9);
  EXPECT_NEAR(Share(p.rows, "HBM Read Ratio"), 0.25, 1e-9);
  EXPECT_NEAR(Share(p.rows, "HBM Write Ratio"), 0.75, 1e-9);
}

TEST(KernelProfileTest, NoPerfCountersNoProfile) {
  EXPECT_FALSE(ProfileFromCounters(V7x(), {{"vdd_core_energy_nj", 5}}, kMs, 0, kMs).present);
  EXPECT_FALSE(ProfileFromCounters(V7x(), {}, kMs, 0, kMs).present);
}

// One 1 ms run of a v7x fusion of `flops`, with kernel-profiling counters `totals`.
KernelFacts V7xFusion(int64_t flops, std::map<std::string, double> totals) {
  KernelFacts f;
  f.category = "convolution fusion";
  f.flops = flops;
  f.bytes_accessed = 1'000'000;
  f.count = 1;
  f.total_ps = kMs;
  f.peak_tflops = V7x()->peak_tflops;
  f.peak_hbm_gbps = V7x()->peak_hbm_gbps;
  f.generation = V7x();
  f.totals = std::move(totals);
  f.covered_ps = kMs;
  return f;
}

TEST(KernelProfileTest, DecidePutsTheCountersCauseFirstForComputeKernels) {
  KernelFacts f =
      V7xFusion(1'000'000'000,
                BothDies({{"pwrmgr_cycle_count", 1.9e6}, {"pwrmgr_clocks_skipped", 0.4 * 1.9e6}}));
  const Verdict v = Decide(f);
  EXPECT_EQ(v.bound, Bound::kThrottled);
  EXPECT_STREQ(BoundName(v.bound), "throttled");
  EXPECT_EQ(v.cause, "throttled");
  EXPECT_TRUE(v.profile.present);
  // A collective is judged by its waiting, whatever its counters say.
  f.category = "all-reduce";
  EXPECT_EQ(Decide(f).bound, Bound::kCommunication);
}

// XProf's Utilization Viewer keeps a chip's dies apart: one die at 63% and the other at 10% is
// not a chip at 37%, and a die without a cycle count gets no figures, not guessed ones. The
// pooled figure beside them is XProf's: achieved over peak, each summed over the dies.
TEST(KernelProfileTest, EachDieHasItsOwnFiguresAndADieWithoutCyclesNone) {
  const double cycles = 1.9e6;
  const KernelProfile p = ProfileFromCounters(V7x(),
                                              {{"perf/die0_pwrmgr_cycle_count", cycles},
                                               {"perf/die0_tc_mxu_busy_2", 0.63 * cycles},
                                               {"perf/die1_pwrmgr_cycle_count", 0.5 * cycles},
                                               {"perf/die1_tc_mxu_busy_2", 0.05 * cycles},
                                               {"perf/die1_pwrmgr_clocks_skipped", 0.125 * cycles}},
                                              kMs, 0, kMs);
  ASSERT_EQ(p.dies.size(), 2u);
  EXPECT_EQ(p.dies[0].die, 0);
  EXPECT_NEAR(p.dies[0].units.at("mxu"), 0.63, 1e-9);
  EXPECT_NEAR(p.dies[0].throttled, 0, 1e-9);
  EXPECT_NEAR(p.dies[1].units.at("mxu"), 0.10, 1e-9);
  EXPECT_NEAR(p.dies[1].throttled, 0.25, 1e-9);
  EXPECT_TRUE(p.dies[1].power_manager);
  EXPECT_NEAR(p.units.at("mxu"), 0.68 / 1.5, 1e-9);
  // Die 1 is throttled, die 0 not: the verdict names the die and what the other shows.
  const ProfileCause c = CauseOf(p, false);
  EXPECT_EQ(c.name, "throttled");
  EXPECT_TRUE(absl::StrContains(c.text, "die 1 throttled: 25.0%")) << c.text;
  EXPECT_TRUE(absl::StrContains(c.text, "die 0 disagrees: no cause")) << c.text;
  const KernelProfile half = ProfileFromCounters(V7x(),
                                                 {{"perf/die0_pwrmgr_cycle_count", cycles},
                                                  {"perf/die0_tc_mxu_busy_2", 0.63 * cycles},
                                                  {"perf/die1_tc_mxu_busy_2", 0.10 * cycles}},
                                                 kMs, 0, kMs);
  ASSERT_EQ(half.dies.size(), 2u);
  EXPECT_TRUE(absl::StrContains(half.dies[1].missing, "no cycle count")) << half.dies[1].missing;
  EXPECT_TRUE(half.dies[1].units.empty());
  EXPECT_TRUE(half.dies[0].missing.empty());
  EXPECT_NEAR(half.units.at("mxu"), 0.63, 1e-9);  // the die without cycles adds nothing
}

// A compute-bound matmul whose MXU counters say `mxu` busy, with the runtime's gauge beside.
KernelFacts Matmul(double mxu) {
  KernelFacts f = V7xFusion(
      2'000'000'000, BothDies({{"pwrmgr_cycle_count", 1.9e6}, {"tc_mxu_busy_2", mxu * 1.9e6}}));
  f.gauges = {{"mxu_busy", 0.72}};
  return f;
}

// Issue #35: a gauge's 72% beside the counters' 68.3%, and a verdict flipping between compute
// bound and MXU bound at 69.9% / 70.1% without a word.
TEST(KernelProfileTest, OneMxuFigureWithItsSourceAndOnTheLineNearTheThreshold) {
  const Verdict below = Decide(Matmul(0.699));
  EXPECT_EQ(below.bound, Bound::kCompute);
  EXPECT_TRUE(absl::StrContains(below.text, "MXU busy 69.9% (performance counters)")) << below.text;
  EXPECT_FALSE(absl::StrContains(below.text, "72")) << below.text;
  EXPECT_TRUE(absl::StrContains(below.text,
                                "(on the line: mxu busy 69.9%, and 70% makes a unit "
                                "the bound; it is not counted as the bound)"))
      << below.text;
  const Verdict above = Decide(Matmul(0.701));
  EXPECT_EQ(above.bound, Bound::kUnitBound);
  EXPECT_TRUE(absl::StrContains(above.text,
                                "(on the line: mxu busy 70.1%, and 70% makes a unit "
                                "the bound)"))
      << above.text;
  const Verdict clear = Decide(Matmul(0.9));
  EXPECT_FALSE(absl::StrContains(clear.text, "on the line")) << clear.text;
  // Without counters the gauge is the figure, and says so.
  KernelFacts gauge_only = Matmul(0.9);
  gauge_only.totals.clear();
  gauge_only.covered_ps = 0;
  EXPECT_TRUE(absl::StrContains(Decide(gauge_only).text, "MXU busy 72.0% (mxu_busy gauge)"))
      << Decide(gauge_only).text;
}

// A copy has no work for the MXU: its idle MXU is not "waiting on HBM"; it is memory bound.
TEST(KernelProfileTest, AKernelWithoutFlopsIsNeverMxuIdleWaitingOnHbm) {
  KernelFacts copy = Matmul(0.01);
  copy.category = "copy";
  copy.flops = 0;
  copy.bytes_accessed = 1'000'000'000;
  copy.sync_wait_ps = kMs / 2;
  const Verdict v = Decide(copy);
  EXPECT_NE(v.cause, "MXU idle waiting on HBM") << v.text;
  EXPECT_EQ(v.bound, Bound::kMemory) << v.text;
}

}  // namespace
}  // namespace podprof::insight
