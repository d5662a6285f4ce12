#include "trace/perf_counters.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"
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

TEST(PerfCountersTest, TablesHoldEveryEntryOfXProfsHeaders) {
  EXPECT_EQ(PerfCounterTable("v6e").size(), 900u);
  EXPECT_EQ(PerfCounterTable("v7x").size(), 2933u);
  EXPECT_TRUE(PerfCounterTable("v5p").empty());
}

// The table and the die-stride rule agree: every die-1 register the table names sits one
// stride above its die-0 twin, and a die-1 register it does not name is named after that twin.
TEST(PerfCountersTest, Die1RegistersAreDie0sPlusTheStride) {
  constexpr uint64_t kStride = 0x20000000;
  absl::Span<const PerfCounterId> t = PerfCounterTable("v7x");
  std::map<std::string, uint64_t> by_name;
  for (const PerfCounterId& c : t) by_name[c.name] = c.id;
  int twins = 0, derived = 0;
  for (const PerfCounterId& c : t) {
    std::string name = c.name;
    if (const size_t at = name.find("_DIE1_"); at != std::string::npos) {
      auto twin = by_name.find(name.replace(at, 6, "_DIE0_"));
      if (twin == by_name.end()) continue;
      ++twins;
      EXPECT_EQ(c.id, twin->second + kStride) << c.name;
      EXPECT_EQ(PerfCounterName("v7x", c.id), absl::string_view(c.name));
    } else if (const size_t at0 = name.find("_DIE0_"); at0 != std::string::npos) {
      std::string die1 = name;
      die1.replace(at0, 6, "_DIE1_");
      EXPECT_EQ(PerfCounterName("v7x", c.id + kStride), die1) << c.name;
      derived += by_name.count(die1) == 0;
    }
  }
  EXPECT_GT(twins, 800);
  EXPECT_GT(derived, 1000);  // the table names fewer than half of die 1's registers
  // A derived name makes a series like any other, and back.
  const uint64_t valu = *ComponentCounterId("v7x", "tc", 1, 31);
  EXPECT_EQ(PerfCounterName("v7x", valu),
            "VF_CHIP_DIE1_TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_UNPRIVILEGED_COUNT_"
            "VECTOR_ALU_INSTRUCTION_0");
  EXPECT_EQ(PerfSeriesName("v7x", valu), "perf/die1_tc_vector_alu_instruction_0");
  EXPECT_EQ(PerfSeriesId("v7x", "perf/die1_tc_vector_alu_instruction_0"), valu);
  // Only v7x has dies; an id with no twin stays unnamed.
  EXPECT_EQ(PerfCounterName("v6e", 3257466888u + kStride), std::nullopt);
  EXPECT_EQ(PerfCounterName("v7x", 2791874568u + 2 * kStride), std::nullopt);
}

// Each component's indices count in the block XProf's docs/kernel-profiling.md names for it,
// from its first register (the lowest id the table gives the block), on each die it has.
TEST(PerfCountersTest, EveryDocumentedComponentIndexesItsBlock) {
  struct Block {
    const char* generation;
    const char* component;
    int die;
    const char* prefix;
    uint64_t first;
    const char* counter0;
  };
  const Block blocks[] = {
      {"v6e", "tc", 0, "VF_CHIP_TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_", 3257466888u,
       "_COUNT_CYCLES"},
      {"v6e", "scs", 0, "VF_CHIP_SC_0_SCS_SC_STATS_COUNTERS_", 3532193800u, "_COUNT_CYCLES"},
      {"v7x", "tc", 0, "VF_CHIP_DIE0_TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_", 2791874568u,
       "_COUNT_CYCLES"},
      {"v7x", "tc", 1, "VF_CHIP_DIE1_TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_",
       2791874568u + 0x20000000u, "_COUNT_CYCLES"},
      {"v7x", "scs", 0, "VF_CHIP_DIE0_SC_0_SCS_SC_STATS_COUNTERS_", 2817921032u, "_COUNT_CYCLES"},
      {"v7x", "scs", 1, "VF_CHIP_DIE1_SC_0_SCS_SC_STATS_COUNTERS_", 2817921032u + 0x20000000u,
       "_COUNT_CYCLES"},
      {"v7x", "sctc", 0, "VF_CHIP_DIE0_SC_0_SCTC_0_SC_STATS_COUNTERS_", 2809282568u,
       "_COUNT_CYCLES"},
      {"v7x", "sctd", 0, "VF_CHIP_DIE0_SC_0_SCTD_0_SC_STATS_COUNTERS_", 2792513544u,
       "_COUNT_CYCLES"},
      {"v7x", "cmn", 0, "VF_CHIP_DIE0_CMN_CMNUR_0_CMN_STATS_DEBUG_FIXED_STATS_COUNTERS_",
       2772841480u, "_CYCLE_COUNTER_WINDOW"},
      {"v7x", "cmn", 1, "VF_CHIP_DIE1_CMN_CMNUR_0_CMN_STATS_DEBUG_FIXED_STATS_COUNTERS_",
       2772841480u + 0x20000000u, "_CYCLE_COUNTER_WINDOW"},
      {"v7x", "icr", 0,
       "VF_CHIP_CHIPLET_ICR_ICR_DATA_0_DEBUG_DOMAIN_ICR_DATA_STATS_PACKET_COUNTERS_", 3594750984u,
       "_LINK0_EGRESS_CONTROL_PACKET_SENT"},
  };
  for (const Block& b : blocks) {
    SCOPED_TRACE(absl::StrCat(b.generation, " ", b.component, " die ", b.die));
    ASSERT_EQ(ComponentCounterId(b.generation, b.component, b.die, 0), b.first);
    std::optional<absl::string_view> first = PerfCounterName(b.generation, b.first);
    ASSERT_TRUE(first.has_value());
    EXPECT_TRUE(absl::StartsWith(*first, b.prefix)) << *first;
    EXPECT_TRUE(absl::EndsWith(*first, b.counter0)) << *first;
    // Every register the table names in the block (die 1: in die 0's, one stride up) is an
    // index of the component, named as the block's.
    std::string die0_prefix = b.prefix;
    if (b.die == 1) die0_prefix.replace(die0_prefix.find("_DIE1_"), 6, "_DIE0_");
    const uint64_t shift = b.die == 1 ? 0x20000000u : 0;
    int named = 0;
    for (const PerfCounterId& c : PerfCounterTable(b.generation)) {
      if (!absl::StartsWith(c.name, die0_prefix)) continue;
      const uint64_t id = c.id + shift;
      ASSERT_EQ((id - b.first) % 8, 0u) << c.name;
      const int index = static_cast<int>((id - b.first) / 8);
      EXPECT_EQ(ComponentCounterId(b.generation, b.component, b.die, index), id);
      std::optional<absl::string_view> n = PerfCounterName(b.generation, id);
      ASSERT_TRUE(n.has_value());
      EXPECT_TRUE(absl::StartsWith(*n, b.prefix)) << *n;
      ++named;
    }
    EXPECT_GT(named, 2);
  }
  EXPECT_EQ(ComponentCounterId("v7x", "icr", 1, 0), std::nullopt);  // the chiplet's, no die
  EXPECT_EQ(ComponentCounterId("v7x", "tc", 0, -1), std::nullopt);
  for (const char* c : {"sctc", "sctd", "cmn", "icr"}) {
    EXPECT_EQ(ComponentCounterId("v6e", c, 0, 0), std::nullopt) << c;
  }
  EXPECT_EQ(ComponentCounterId("v6e", "tc", 1, 0), std::nullopt);
  EXPECT_EQ(ComponentCounterId("v5p", "tc", 0, 0), std::nullopt);
  EXPECT_EQ(ComponentCounterId("v7x", "hbm", 0, 0), std::nullopt);
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
  EXPECT_EQ(name(0, 31), "perf/die0_tc_vector_alu_instruction_0");
  EXPECT_EQ(ComponentCounterId("v7x", "tc", 2, 1), std::nullopt);
}

TEST(PerfCountersTest, SamplingOptionsRoundTripInXProfsSpelling) {
  absl::StatusOr<SamplingOptions> o = ParseSamplingOptions(
      "interval_us:1 scaling:0 counter_size_bits:1 indices:10 indices:11 indices:56");
  ASSERT_OK(o);
  EXPECT_EQ(o->interval_us, 1);
  EXPECT_EQ(o->counter_size_bits, 1);
  EXPECT_EQ(o->indices, (std::vector<int>{10, 11, 56}));
  EXPECT_EQ(FormatSamplingOptions(*o),
            "interval_us:1 scaling:0 counter_size_bits:1 indices:10 indices:11 indices:56");
  o = ParseSamplingOptions("is_external_trigger:true scaling:2 counter_size_bits:0 indices:3");
  ASSERT_OK(o);
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
