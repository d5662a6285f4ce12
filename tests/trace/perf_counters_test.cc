#include "trace/perf_counters.h"

#include <vector>

#include "gtest/gtest.h"
#include "trace/chip_catalog.h"
#include "trace/model.h"

namespace podprof::trace {
namespace {

TEST(PerfCountersTest, NamesComeFromTheGenerationsTable) {
  EXPECT_EQ(PerfSeriesName("v6e", 3257466888u), "perf/tc_cycles");
  EXPECT_EQ(PerfSeriesName("v7x", 2791875032u), "perf/die0_tc_mxu_busy_2");
  EXPECT_EQ(PerfSeriesName("v7x", 2791875032u + 0x20000000u), "perf/die1_tc_mxu_busy_2");
  EXPECT_EQ(PerfSeriesName("v7x", 2847490064u), "perf/die0_pwrmgr_clocks_skipped");
  EXPECT_EQ(PerfSeriesName("v7x", 42), "perf/id_42");
  EXPECT_EQ(PerfSeriesName("v5p", 3257466888u), "perf/id_3257466888");
  EXPECT_EQ(PerfSeriesId("v7x", "perf/die0_tc_mxu_busy_2"), 2791875032u);
  EXPECT_EQ(PerfSeriesId("v7x", "perf/id_42"), 42u);
  EXPECT_EQ(PerfSeriesId("v7x", "mxu_busy"), std::nullopt);
  EXPECT_TRUE(IsPerfSeries("perf/tc_cycles"));
  EXPECT_EQ(CounterKindOfName("perf/tc_cycles"), CounterKind::kCumulative);
}

TEST(PerfCountersTest, TablesAreSortedAndUnique) {
  for (const char* g : {"v6e", "v7x"}) {
    absl::Span<const PerfCounterId> t = PerfCounterTable(g);
    ASSERT_GT(t.size(), 800u) << g;
    for (size_t i = 1; i < t.size(); ++i) EXPECT_LT(t[i - 1].id, t[i].id) << g << " " << i;
  }
}

// XProf's kernel-profiling example asks v7x's TensorCore for indices 10, 11, 56, 57, 58: the
// two scalar ALUs and the three MXU-busy counters.
TEST(PerfCountersTest, ComponentIndicesAreRegisterOffsets) {
  auto name = [](int die, int index) {
    return PerfSeriesName("v7x", *ComponentCounterId("v7x", "tc", die, index));
  };
  EXPECT_EQ(name(0, 0), "perf/die0_tc_cycles");
  EXPECT_EQ(name(0, 10), "perf/die0_tc_scalar_alu_instruction_0");
  EXPECT_EQ(name(0, 11), "perf/die0_tc_scalar_alu_instruction_1");
  EXPECT_EQ(name(1, 56), "perf/die1_tc_mxu_busy_0");
  EXPECT_EQ(name(1, 58), "perf/die1_tc_mxu_busy_2");
  EXPECT_EQ(ComponentCounterId("v7x", "icr", 0, 1), std::nullopt);
  EXPECT_EQ(ComponentCounterId("v7x", "tc", 2, 1), std::nullopt);
}

TEST(PerfCountersTest, SamplingOptionsRoundTripInXProfsSpelling) {
  absl::StatusOr<SamplingOptions> o = ParseSamplingOptions(
      "interval_us:1 scaling:0 counter_size_bits:1 indices:10 indices:11 indices:56");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->interval_us, 1);
  EXPECT_EQ(o->counter_size_bits, 1);
  EXPECT_EQ(o->indices, (std::vector<int>{10, 11, 56}));
  EXPECT_EQ(FormatSamplingOptions(*o),
            "interval_us:1 scaling:0 counter_size_bits:1 indices:10 indices:11 indices:56");
  o = ParseSamplingOptions("is_external_trigger:true scaling:2 counter_size_bits:0 indices:3");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(FormatSamplingOptions(*o),
            "is_external_trigger:true scaling:2 counter_size_bits:0 indices:3");
  for (const char* bad :
       {"interval_us:0", "interval_us:x", "scaling:64", "counter_size_bits:4", "bogus:1",
        "is_external_trigger:yes", "interval_us:5 is_external_trigger:true"}) {
    EXPECT_EQ(ParseSamplingOptions(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(PerfCountersTest, UnwrapUndoesThePackedWidthAndScaling) {
  // A 16-bit counter counting 30000 per sample wraps at 65536.
  std::vector<double> v = {0, 30000, 60000, 24464, 54464};
  UnwrapCounterSamples(0, v.data(), v.size());
  EXPECT_EQ(v, (std::vector<double>{0, 30000, 60000, 90000, 120000}));
  // Scaled by 2 bits: values were shifted right by 2.
  std::vector<double> s = {1, 2, 3};
  UnwrapCounterSamples(2, s.data(), s.size());
  EXPECT_EQ(s, (std::vector<double>{4, 8, 12}));
}

TEST(ChipCatalogTest, V7xIsKnownWithItsKernelProfilingConstants) {
  const ChipGeneration* g = FindGenerationByDeviceType("TPU v7x");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->name, "v7x");
  EXPECT_TRUE(g->kernel_profiling);
  EXPECT_EQ(g->tc_clock_hz, 1.9e9);
  EXPECT_EQ(g->tensor_cores, 2);
  EXPECT_FALSE(FindGenerationByName("v6e")->kernel_profiling);
  EXPECT_EQ(FindGenerationByDeviceType("TPU v6 Lite")->name, "v6e");
}

}  // namespace
}  // namespace podprof::trace
