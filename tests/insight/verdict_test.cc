// Verdicts on a simulated host whose kernels were built with known behaviour, and on the real
// TPU capture (costs, no counters).
#include "insight/verdict.h"

#include <map>

#include "common/clock.h"
#include "common/skewed_clock.h"
#include "gtest/gtest.h"
#include "insight/attribution.h"
#include "insight/host_insight.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/byte_source.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof::insight {
namespace {

// Facts per kernel name, over the host's chips, as `podprof inspect` forms them.
std::map<std::string, KernelFacts> FactsOf(const trace::HostCapture& c) {
  const std::vector<trace::KernelStats> stats = trace::RollUpByKernel(trace::ComputeKernelStats(c));
  const std::vector<KernelFacts> facts = HostFacts(c, stats);
  std::map<std::string, KernelFacts> out;
  for (size_t i = 0; i < stats.size(); ++i) out[c.kernels[stats[i].kernel].name] = facts[i];
  return out;
}

// A v5p host of 4 chips (pod seed 11) with `stragglers`.
sim::PodModel SimulatedPod(const std::vector<sim::Straggler>& stragglers) {
  sim::PodConfig pod;
  pod.generation = "v5p";
  pod.chips = 4;
  pod.hosts = 1;
  pod.pod_seed = 11;
  pod.stragglers = stragglers;
  auto m = sim::PodModel::Create(pod);
  EXPECT_OK(m);  // not void, and no default PodModel to return instead
  return *m;
}

// What the simulated host writes for a session of `window_ns`, with or without counters.
tensorflow::profiler::XSpace SimulatedSpace(const sim::PodModel& m, int64_t window_ns,
                                            bool counters) {
  FakeClock truth(1'800'000'000'000'000'000);
  SkewedClock host(truth, 0, 0);
  sim::SessionWindow w;
  w.true_start_ns = truth.NowNs();
  w.true_end_ns = w.true_start_ns + window_ns;
  w.counters = counters;
  w.host_name = "sim";
  return sim::BuildXSpace(m, host, w).space;
}

// `space` through the production reader.
trace::HostCapture Read(const tensorflow::profiler::XSpace& space) {
  const std::string bytes = space.SerializeAsString();
  trace::MemorySource src(bytes);
  auto c = trace::ReadXSpace(src);
  EXPECT_OK(c);
  return c.ok() ? std::move(*c) : trace::HostCapture();
}

TEST(VerdictTest, EachSimulatedKernelGetsTheVerdictItsModelBuiltIn) {
  const sim::PodModel model = SimulatedPod({});
  trace::HostCapture c = Read(SimulatedSpace(model, 60'000'000, true));
  auto facts = FactsOf(c);
  int checked = 0;
  for (const sim::OpTemplate& op : model.ops()) {
    auto it = facts.find(op.name);
    if (it == facts.end()) continue;  // not in the window
    const Verdict v = Decide(it->second);
    EXPECT_EQ(BoundName(v.bound), op.expected_bound) << op.name << ": " << v.text;
    EXPECT_TRUE(v.has_counters) << op.name;
    if (op.expected_bound == "stalled") {
      EXPECT_EQ(v.dominant_stall, "stall_dma") << v.text;
    }
    ++checked;
  }
  EXPECT_GE(checked, 20);
  // The Pallas kernel's named scopes are read, as scopes: not kernels with statistics.
  bool scope_line = false;
  for (const trace::EventBlock& b : c.blocks) scope_line |= b.kind == trace::LineKind::kScopes;
  EXPECT_TRUE(scope_line);
  EXPECT_EQ(facts.count("flash_attention/qk_matmul"), 0u);
  // The counters' means are the levels the model gave the units (to the ns that counter
  // sample times keep, against kernel edges kept in ps).
  EXPECT_NEAR(facts["fusion.1"].gauges["mxu_busy"], 0.72, 1e-4);
  EXPECT_NEAR(facts["gather_fusion.0"].gauges["stall_dma"], 0.52, 1e-4);
}

// A v7x host asked for kernel profiling, judged from its file alone as `podprof inspect` does:
// the injected paged_attention is the MXU waiting on HBM;
// the throttled chip's matmul fusions are throttled, the other chips' are not.
TEST(VerdictTest, KernelProfilingOfAV7xHostFindsTheInjectedCauses) {
  sim::PodConfig pod;
  pod.generation = "v7x";
  pod.chips = 2;
  pod.pod_seed = 11;
  pod.throttles = {{0, 1, 0.3}};
  auto m = sim::PodModel::Create(pod);
  ASSERT_OK(m);
  FakeClock truth(1'800'000'000'000'000'000);
  SkewedClock host(truth, 0, 0);
  sim::SessionWindow w;
  w.true_start_ns = truth.NowNs();
  w.true_end_ns = w.true_start_ns + 40'000'000;
  w.host_name = "sim";
  w.kernel_profiling.requested = true;
  w.kernel_profiling.tc = sim::DefaultTcSampling();
  w.kernel_profiling.tc.external_trigger = false;
  w.kernel_profiling.tc.interval_us = 5;
  trace::HostCapture c = Read(sim::BuildXSpace(*m, host, w).space);
  const std::map<std::string, KernelFacts> facts = FactsOf(c);
  ASSERT_TRUE(facts.count("paged_attention"));
  const Verdict pa = Decide(facts.at("paged_attention"));
  EXPECT_EQ(pa.bound, Bound::kStalled) << pa.text;
  EXPECT_NE(pa.text.find("MXU idle waiting on HBM"), std::string::npos) << pa.text;
  ASSERT_TRUE(pa.profile.present);
  EXPECT_NEAR(pa.profile.units.at("mxu"), 0.12, 0.02);
  EXPECT_NEAR(pa.profile.sync_wait, 0.55, 0.02);

  const std::vector<trace::KernelStats> per_chip = trace::ComputeKernelStats(c);
  const std::vector<KernelFacts> chip_facts = HostFacts(c, per_chip);
  int throttled = 0, fine = 0;
  for (size_t i = 0; i < per_chip.size(); ++i) {
    if (chip_facts[i].category != "convolution fusion") continue;
    const Verdict v = Decide(chip_facts[i]);
    if (per_chip[i].chip == 1) {
      EXPECT_EQ(v.bound, Bound::kThrottled) << v.text;
      EXPECT_NEAR(v.profile.throttled, 0.3, 0.01);
      ++throttled;
    } else {
      EXPECT_NE(v.bound, Bound::kThrottled) << v.text;
      ++fine;
    }
  }
  EXPECT_GT(throttled, 0);
  EXPECT_GT(fine, 0);
}

// A utilization line of its own (not `_counters_`): its counter_value events are a series
// named by line and event, attributed like any other.
TEST(VerdictTest, CountersOnAnyDeviceLineAreRead) {
  tensorflow::profiler::XSpace space = SimulatedSpace(SimulatedPod({}), 20'000'000, false);
  auto* plane = space.mutable_planes(0);
  int64_t counter_stat = 0;
  for (const auto& [id, sm] : plane->stat_metadata()) {
    if (sm.name() == "counter_value") counter_stat = id;
  }
  ASSERT_NE(counter_stat, 0);
  (*plane->mutable_event_metadata())[777].set_id(777);
  (*plane->mutable_event_metadata())[777].set_name("busy");
  auto* line = plane->add_lines();
  line->set_id(9);
  line->set_name("MXU Utilization");
  // 50% busy for the first 10 ms of the window, then 25% to its end.
  for (int64_t at_ms : {0, 10, 20}) {
    auto* ev = line->add_events();
    ev->set_metadata_id(777);
    ev->set_offset_ps(at_ms * 1'000'000'000);
    auto* st = ev->add_stats();
    st->set_metadata_id(counter_stat);
    st->set_double_value(at_ms == 0 ? 0.5 : 0.25);
  }
  const trace::HostCapture c = Read(space);
  ASSERT_EQ(c.counters.size(), 1u);
  EXPECT_EQ(c.counters[0].name, "MXU Utilization/busy");
  EXPECT_EQ(c.counters[0].value, (std::vector<double>{0.5, 0.25, 0.25}));
  // Over the whole window the kernels saw a time-weighted mean between the two levels.
  double integral = 0;
  int64_t covered = 0;
  for (const KernelCounter& k : AttributeCounters(c)) {
    integral += k.integral;
    covered += k.covered_ps;
  }
  ASSERT_GT(covered, 0);
  EXPECT_GT(integral / covered, 0.25);
  EXPECT_LT(integral / covered, 0.5);
}

TEST(VerdictTest, AStragglingChipTurnsTheOthersCollectivesIntoWaits) {
  trace::HostCapture c = Read(SimulatedSpace(SimulatedPod({{0, 2, 1.6}}), 60'000'000, true));
  auto facts = FactsOf(c);
  const Verdict v = Decide(facts["reduce-scatter.0"]);
  EXPECT_EQ(v.bound, Bound::kCollectiveWait) << v.text;
  EXPECT_NE(v.text.find("sim chip 2"), std::string::npos) << v.text;
}

TEST(VerdictTest, TheRealTpuCaptureIsJudgedByItsCostsAndSaysItHasNoCounters) {
  auto c = trace::ReadXSpaceFile(testing::FixturePath(testing::kTpuFixture));
  ASSERT_OK(c);
  auto facts = FactsOf(*c);
  int judged = 0;
  for (const auto& [name, f] : facts) {
    const Verdict v = Decide(f);
    EXPECT_FALSE(v.has_counters) << name;
    EXPECT_NE(v.bound, Bound::kStalled) << name << ": no counters, no stalls to see";
    if (f.flops > 0 || f.bytes_accessed > 0) ++judged;
    if (v.bound == Bound::kUnknown) {
      EXPECT_NE(v.text.find("no counters"), std::string::npos) << v.text;
    }
  }
  EXPECT_GT(judged, 5);
  // The all-reduces, the only collectives it has, are judged as collectives.
  int collectives = 0;
  for (const auto& [name, f] : facts) {
    if (IsCollectiveCategory(f.category)) {
      const Bound b = Decide(f).bound;
      EXPECT_TRUE(b == Bound::kCommunication || b == Bound::kCollectiveWait) << name;
      ++collectives;
    }
  }
  EXPECT_GT(collectives, 0);
  // Its host-offload copies are asynchronous pairs: judged as such, not by the roofline.
  EXPECT_EQ(Decide(facts["copy-done"]).bound, Bound::kAsyncWait);
  EXPECT_EQ(Decide(facts["copy-start"]).bound, Bound::kAsyncWait);
  EXPECT_EQ(Decide(facts["copy-done"]).bandwidth_fraction, 0);
}

TEST(VerdictTest, RulesOnHandMadeFacts) {
  KernelFacts f;
  f.category = "convolution fusion";
  f.peak_tflops = 100;
  f.peak_hbm_gbps = 1000;  // ridge 100 flop/byte
  f.flops = 200'000'000;
  f.bytes_accessed = 1'000'000;
  f.count = 10;
  f.total_ps = 40'000'000'000;  // 40 ms: 2 GFLOP at 0.05 TFLOP/s
  Verdict v = Decide(f);
  EXPECT_EQ(v.bound, Bound::kCompute);
  EXPECT_DOUBLE_EQ(v.intensity, 200);
  EXPECT_DOUBLE_EQ(v.ridge, 100);
  EXPECT_NEAR(v.compute_fraction, 0.0005, 1e-12);
  f.gauges = {{"stall_hbm", 0.2}, {"stall_dma", 0.25}, {"mxu_busy", 0.1}};
  v = Decide(f);
  EXPECT_EQ(v.bound, Bound::kStalled);
  EXPECT_EQ(v.dominant_stall, "stall_dma");
  EXPECT_NEAR(v.stall_fraction, 0.45, 1e-12);
}

}  // namespace
}  // namespace podprof::insight
