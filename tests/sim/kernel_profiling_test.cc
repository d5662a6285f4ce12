// Kernel profiling in the simulated host: the request, the counter samples and intra-kernel
// lines it writes (docs/INTEROP.md "Kernel profiling data"), and the injected causes.
#include "sim/kernel_profiling.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "gtest/gtest.h"
#include "sim/xspace_builder.h"
#include "tests/util/status_matchers.h"
#include "trace/perf_counters.h"

namespace podprof::sim {
namespace {

using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;

constexpr double kV7xClockHz = 1.9e9;
// The v7x TensorCore registers (trace/perf_counter_ids_v7x.inc): die 0; die 1 is + kDie.
constexpr uint64_t kCycles = 2791874568u, kPwrCycleCount = 2847490056u,
                   kPwrClocksSkipped = 2847490064u, kPwrExtSkipped = 2847490088u,
                   kPwrDroopSkipped = 2847490112u, kDie = 0x20000000;

PodConfig V7x(std::vector<Throttle> throttles = {}) {
  PodConfig c;
  c.generation = "v7x";
  c.chips = 2;
  c.hosts = 2;
  c.host_index = 1;
  c.pod_seed = 5;
  c.throttles = std::move(throttles);
  return c;
}

tensorflow::ProfileOptions Options(std::map<std::string, std::string> strings,
                                   std::map<std::string, bool> flags) {
  tensorflow::ProfileOptions o;
  for (const auto& [k, v] : strings) (*o.mutable_advanced_configuration())[k].set_string_value(v);
  for (const auto& [k, v] : flags) (*o.mutable_advanced_configuration())[k].set_bool_value(v);
  return o;
}

KernelProfilingRequest Request(const std::string& tc) {
  absl::StatusOr<KernelProfilingRequest> r =
      KernelProfilingFromOptions(Options({{kTcSamplingKey, tc}}, {{kPeriodicSamplingKey, true}}));
  EXPECT_OK(r);
  if (!r.ok()) return KernelProfilingRequest();
  return *r;
}

// A 30 ms session of `model` on an exact host clock, so device offsets are true times.
struct Session {
  FakeClock truth{1'800'000'000'000'000'000};
  SkewedClock host{truth, 0, 0};
  SessionWindow window;
  Session() {
    window.true_start_ns = truth.NowNs() + 123'456;
    window.true_end_ns = window.true_start_ns + 30'000'000;
    window.host_name = "sim-kp";
  }
  XSpace Build(const PodModel& model) { return BuildXSpace(model, host, window).space; }
};

std::string Deterministic(const XSpace& space) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  space.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

int64_t StatId(const XPlane& plane, absl::string_view name) {
  for (const auto& [id, m] : plane.stat_metadata()) {
    if (m.name() == name) return id;
  }
  return -1;
}

struct CounterSample {
  int64_t line_id;
  int64_t ps;          // since the session's start
  std::string kernel;  // the line's name
  uint64_t id;
  uint64_t value;
  int64_t duration_ps;
};

std::vector<CounterSample> Samples(const XPlane& plane) {
  const int64_t id_stat = StatId(plane, "performance_counter_id");
  const int64_t value_stat = StatId(plane, "counter_value");
  std::vector<CounterSample> out;
  for (const auto& line : plane.lines()) {
    for (const auto& ev : line.events()) {
      CounterSample s{line.id(),   line.timestamp_ns() * 1000 + ev.offset_ps(),
                      line.name(), 0,
                      0,           ev.duration_ps()};
      bool has_id = false;
      for (const auto& st : ev.stats()) {
        if (st.metadata_id() == id_stat) s.id = st.uint64_value(), has_id = true;
        if (st.metadata_id() == value_stat) s.value = st.uint64_value();
      }
      if (has_id) out.push_back(s);
    }
  }
  return out;
}

// One counter's samples, in time order.
std::vector<CounterSample> Series(const std::vector<CounterSample>& all, uint64_t id) {
  std::vector<CounterSample> out;
  for (const CounterSample& s : all) {
    if (s.id == id) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.ps < b.ps; });
  return out;
}

struct Kernel {
  std::string name;
  int64_t start_ps, end_ps;
  bool collective;
};

std::vector<Kernel> Kernels(const XPlane& plane) {
  const int64_t collective_stat = StatId(plane, "all_reduce_unique_id");
  std::vector<Kernel> out;
  for (const auto& line : plane.lines()) {
    if (line.name() != "XLA Ops") continue;
    for (const auto& ev : line.events()) {
      bool collective = false;
      for (const auto& st : ev.stats()) collective |= st.metadata_id() == collective_stat;
      out.push_back({plane.event_metadata().at(ev.metadata_id()).display_name(), ev.offset_ps(),
                     ev.offset_ps() + ev.duration_ps(), collective});
    }
  }
  return out;
}

const tensorflow::profiler::XLine* Line(const XPlane& plane, absl::string_view name) {
  for (const auto& line : plane.lines()) {
    if (line.name() == name) return &line;
  }
  return nullptr;
}

// One per-kernel line: its kernel, span and each counter's count by short name
// ("die0_tc_mxu_busy_1", "die1_pwrmgr_cycle_count").
struct KernelCounts {
  int64_t line_id;
  std::string kernel;
  int64_t start_ps, duration_ps;
  std::map<std::string, double> counts;
  double Get(int die, absl::string_view name) const {
    auto it = counts.find(absl::StrCat("die", die, "_", name));
    return it == counts.end() ? -1 : it->second;
  }
};

std::vector<KernelCounts> KernelLines(const XPlane& plane) {
  std::map<int64_t, KernelCounts> by_line;
  for (const CounterSample& s : Samples(plane)) {
    KernelCounts& k = by_line[s.line_id];
    EXPECT_TRUE(absl::StartsWith(s.kernel, "counters_")) << s.kernel;
    k.line_id = s.line_id;
    k.kernel = s.kernel.substr(9);
    k.start_ps = s.ps;
    k.duration_ps = s.duration_ps;
    k.counts[trace::PerfSeriesName("v7x", s.id).substr(5)] = static_cast<double>(s.value);
  }
  std::vector<KernelCounts> out;
  for (auto& [id, k] : by_line) out.push_back(std::move(k));
  return out;
}

// What XProf's Utilization Viewer computes for die `d` of one line (cycles: the power
// manager's CYCLE_COUNT).
struct Viewer {
  const KernelCounts& k;
  int d;
  double C() const { return k.Get(d, "pwrmgr_cycle_count"); }
  double Sum(std::initializer_list<std::string> names) const {
    double s = 0;
    for (const std::string& n : names) s += k.Get(d, "tc_" + n);
    return s;
  }
  double AvgMxu() const { return (0.5 * Sum({"mxu_busy_1"}) + Sum({"mxu_busy_2"})) / C(); }
  double Mxu(int m) const {
    const std::string u = absl::StrCat("_mxu_", m);
    return (4 * Sum({"matmul_lmr_bf16" + u}) + 8 * Sum({"matmul_vreg_bf16" + u}) +
            4 * Sum({"matmul_vreg_f32" + u}) + 8 * Sum({"matmul_vreg_f8" + u})) /
           C();
  }
  double Vpu() const {
    double s = 0;
    for (const char* op : {"fadd", "fmul", "misc", "int", "fmac"}) {
      for (int i = 0; i < 4; ++i) s += Sum({absl::StrCat("vpu_valu_", op, "_ops_", i)});
    }
    return s / (4 * C());
  }
  double Xlu(int x) const {
    const std::string u = absl::StrCat("_xlu_", x);
    return Sum({"packed" + u, "rotate_permute_instruction" + u,
                "rotate_permute_set_instruction" + u, "transpose" + u}) /
           C();
  }
};

TEST(KernelProfilingRequestTest, SwitchesOptionsDefaultsAndMalformedValues) {
  absl::StatusOr<KernelProfilingRequest> none = KernelProfilingFromOptions({});
  ASSERT_OK(none);
  EXPECT_FALSE(none->requested);

  KernelProfilingRequest r = Request("interval_us:5 scaling:2 counter_size_bits:1 indices:0");
  EXPECT_TRUE(r.requested);
  EXPECT_EQ(r.tc.interval_us, 5);
  EXPECT_EQ(r.tc.scaling, 2);
  EXPECT_EQ(r.tc.indices, std::vector<int>{0});

  EXPECT_FALSE(r.per_kernel);

  // XProf's standard kernel profiling: the per-kernel layout with the standard TC counters.
  absl::StatusOr<KernelProfilingRequest> kernel =
      KernelProfilingFromOptions(Options({}, {{kKernelProfilingKey, true}}));
  ASSERT_OK(kernel);
  EXPECT_TRUE(kernel->requested);
  EXPECT_TRUE(kernel->per_kernel);
  EXPECT_EQ(kernel->tc.indices, DefaultTcSampling().indices);
  EXPECT_TRUE(kernel->cmn.empty());
  EXPECT_FALSE(kernel->hbm_controllers);

  absl::StatusOr<KernelProfilingRequest> bad = KernelProfilingFromOptions(
      Options({{kTcSamplingKey, "interval_us:0 indices:0"}}, {{kPeriodicSamplingKey, true}}));
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), kTcSamplingKey)) << bad.status();

  tensorflow::ProfileOptions wrong_type;
  (*wrong_type.mutable_advanced_configuration())[kPeriodicSamplingKey].set_string_value("yes");
  EXPECT_EQ(KernelProfilingFromOptions(wrong_type).status().code(),
            absl::StatusCode::kInvalidArgument);

  absl::StatusOr<KernelProfilingRequest> scs = KernelProfilingFromOptions(
      Options({{"tpu_scs_perf_counter_sampling_options", "interval_us:10 indices:1"}},
              {{kPeriodicSamplingKey, true}}));
  ASSERT_OK(scs);
  EXPECT_EQ(scs->ignored_components, std::vector<std::string>{"scs"});
}

// `tpu_perf_counter_sets` as XProf documents it: a comma-separated list whose sets add their
// indices to the components' own.
TEST(KernelProfilingRequestTest, CounterSetsAddTheirCounters) {
  absl::StatusOr<KernelProfilingRequest> r = KernelProfilingFromOptions(
      Options({{kTcSamplingKey, "interval_us:1 scaling:0 counter_size_bits:1 indices:2"},
               {kCounterSetsKey, "TC_MEMORY, HBM,SC_ACTIVITY"}},
              {{kPeriodicSamplingKey, true}}));
  ASSERT_OK(r);
  EXPECT_FALSE(r->per_kernel);
  EXPECT_EQ(r->tc.interval_us, 1);
  EXPECT_EQ(r->tc.indices, (std::vector<int>{0, 2, 35, 37, 38}));  // cycles, VST, VLD 0/1
  EXPECT_EQ(r->cmn, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(r->hbm_controllers);
  EXPECT_EQ(r->ignored_sets, std::vector<std::string>{"SC_ACTIVITY"});

  absl::StatusOr<KernelProfilingRequest> bad = KernelProfilingFromOptions(
      Options({{kCounterSetsKey, "TC_MEMORY,BOGUS"}}, {{kPeriodicSamplingKey, true}}));
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "unknown counter set \"BOGUS\""))
      << bad.status();

  // TC_COMPUTATION is every TensorCore counter the Utilization Viewer's compute rows read, on
  // its register offsets: 51 of them.
  const auto sets = CounterSetIndices("v7x", "TC_COMPUTATION");
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0].first, "tc");
  std::set<std::string> names;
  for (int i : sets[0].second) {
    names.insert(trace::PerfSeriesName("v7x", *trace::ComponentCounterId("v7x", "tc", 0, i)));
  }
  EXPECT_EQ(names.size(), 51u);
  for (const char* n :
       {"perf/die0_tc_cycles", "perf/die0_tc_scalar_alu_instruction_1",
        "perf/die0_tc_vector_alu_instruction_3", "perf/die0_tc_vpu_valu_fmac_ops_3",
        "perf/die0_tc_mxu_busy_2", "perf/die0_tc_matmul_lmr_bf16_mxu_1",
        "perf/die0_tc_matmul_vreg_f8_mxu_0", "perf/die0_tc_matpush_cycles_mxu_1",
        "perf/die0_tc_xlu_busy_0", "perf/die0_tc_packed_xlu_1",
        "perf/die0_tc_rotate_permute_set_instruction_xlu_0", "perf/die0_tc_transpose_xlu_1"}) {
    EXPECT_EQ(names.count(n), 1u) << n;
  }
  EXPECT_EQ(names.count("perf/die0_tc_vst_instruction"), 0u);  // TC_MEMORY's
  EXPECT_TRUE(CounterSetIndices("v7x", "SC_MEMORY").empty());
}

// The shares give back the profile through XProf's Utilization Viewer formulas.
TEST(KernelProfilingRequestTest, CounterSharesMatchTheUtilizationViewer) {
  const UnitProfile u{0.6, 0.4, 0.1, 0.2, 0, 0};
  auto share = [&](const char* c) { return TcCounterShare(c, u, 1); };
  EXPECT_DOUBLE_EQ(share("MXU_BUSY_0") + share("MXU_BUSY_1") + share("MXU_BUSY_2"), 1);
  EXPECT_DOUBLE_EQ(0.5 * share("MXU_BUSY_1") + share("MXU_BUSY_2"), 0.6);
  EXPECT_DOUBLE_EQ((share("SCALAR_ALU_INSTRUCTION_0") + share("SCALAR_ALU_INSTRUCTION_1")) / 2,
                   0.1);
  EXPECT_DOUBLE_EQ(share("VECTOR_ALU_INSTRUCTION_3"), 0.4);
  double valu = 0;
  for (const char* op : {"FADD", "FMUL", "MISC", "INT", "FMAC"}) {
    valu += share(absl::StrCat("VPU_VALU_", op, "_OPS_2").c_str());
  }
  EXPECT_DOUBLE_EQ(valu, 0.4);  // VPU Utilization, one ALU of four
  EXPECT_DOUBLE_EQ(4 * share("MATMUL_LMR_BF16_MXU_1") + 8 * share("MATMUL_VREG_BF16_MXU_1"), 0.6);
  EXPECT_DOUBLE_EQ(share("PACKED_XLU_0") + share("ROTATE_PERMUTE_INSTRUCTION_XLU_0") +
                       share("ROTATE_PERMUTE_SET_INSTRUCTION_XLU_0") + share("TRANSPOSE_XLU_0"),
                   0.1);
  EXPECT_DOUBLE_EQ(0.5 * share("XLU_BUSY_1") + share("XLU_BUSY_2"), 0.1);
  EXPECT_DOUBLE_EQ(share("CYCLES"), 1);
  EXPECT_EQ(share("SOMETHING_ELSE"), 0);
}

// Without a request, and with one on a generation that lacks kernel profiling, nothing of it
// is written (a warning aside): the capture is what it always was.
TEST(KernelProfilingTest, WithoutARequestNothingChanges) {
  for (const char* gen : {"v6e", "v7x"}) {
    PodConfig c = V7x();
    c.generation = gen;
    absl::StatusOr<PodModel> m = PodModel::Create(c);
    ASSERT_OK(m);
    Session plain, unasked, asked;
    absl::StatusOr<KernelProfilingRequest> empty = KernelProfilingFromOptions({});
    ASSERT_OK(empty);
    unasked.window.kernel_profiling = *empty;
    asked.window.kernel_profiling = Request("interval_us:1 indices:0 indices:56");
    const XSpace a = plain.Build(*m), b = unasked.Build(*m);
    EXPECT_EQ(Deterministic(a), Deterministic(b)) << gen;
    EXPECT_TRUE(a.warnings().empty());
    for (const XPlane& p : a.planes()) {
      EXPECT_TRUE(Samples(p).empty());
      EXPECT_EQ(Line(p, "Pallas Primitives"), nullptr);
    }
    XSpace with = asked.Build(*m);
    if (std::string(gen) == "v6e") {
      ASSERT_EQ(with.warnings_size(), 1);
      EXPECT_TRUE(absl::StrContains(with.warnings(0), "not supported on TPU v6 Lite"));
      with.clear_warnings();
      EXPECT_EQ(Deterministic(with), Deterministic(a));
    } else {
      EXPECT_TRUE(with.warnings().empty());
      EXPECT_FALSE(Samples(with.planes(0)).empty());
    }
  }
}

TEST(KernelProfilingTest, V7xPlanesNameTheirChipAndGeneration) {
  absl::StatusOr<PodModel> m = PodModel::Create(V7x());
  ASSERT_OK(m);
  EXPECT_EQ(PodModel::Create([] {
              PodConfig c = V7x();
              c.chips = 0;
              return c;
            }())
                ->chips(),
            4);
  Session s;
  const XSpace space = s.Build(*m);
  const XPlane& chip1 = space.planes(1);
  bool type = false, global = false;
  for (const auto& st : chip1.stats()) {
    const std::string& name = chip1.stat_metadata().at(st.metadata_id()).name();
    if (name == "device_type_string") type = st.str_value() == "TPU v7x";
    if (name == "global_chip_id") global = st.int64_value() == 3;  // host 1 of 2, chip 1
  }
  EXPECT_TRUE(type);
  EXPECT_TRUE(global);
}

// Timer sampling: a line per instant on the interval's grid, only inside compute kernels, one
// event per counter and die with the table's ids, values cut to the packed width.
TEST(KernelProfilingTest, SamplesAtTheIntervalInsideComputeKernels) {
  absl::StatusOr<PodModel> m = PodModel::Create(V7x());
  ASSERT_OK(m);
  Session s;
  s.window.kernel_profiling = Request(
      "interval_us:5 scaling:0 counter_size_bits:1 indices:0 indices:10 indices:56 "
      "indices:57 indices:58 indices:3");
  const XSpace space = s.Build(*m);
  const XPlane& plane = space.planes(0);
  const std::vector<CounterSample> all = Samples(plane);
  ASSERT_GT(all.size(), 1000u);
  std::set<uint64_t> ids;
  for (int die : {0, 1}) {
    for (int index : {0, 10, 56, 57, 58, 3}) {
      ids.insert(*trace::ComponentCounterId("v7x", "tc", die, index));
    }
    for (uint64_t pwr : {kPwrCycleCount, kPwrClocksSkipped, kPwrExtSkipped, kPwrDroopSkipped}) {
      ids.insert(pwr + die * kDie);
    }
  }
  const std::vector<Kernel> kernels = Kernels(plane);
  std::map<int64_t, int> per_line;
  for (const CounterSample& c : all) {
    EXPECT_EQ(ids.count(c.id), 1u) << c.id;
    EXPECT_LT(c.value, 1u << 16);
    EXPECT_EQ(c.ps % 5'000'000, 0) << "off the 5 us grid: " << c.ps;
    ++per_line[c.line_id];
    bool in_compute = false;
    for (const Kernel& k : kernels) {
      in_compute |= !k.collective && k.start_ps <= c.ps && c.ps < k.end_ps && k.name == c.kernel;
    }
    EXPECT_TRUE(in_compute) << c.kernel << " at " << c.ps;
  }
  for (const auto& [line, n] : per_line) EXPECT_EQ(n, static_cast<int>(ids.size())) << line;
  // Index 3 is not in the table: it is sampled, and counts nothing.
  for (const CounterSample& c : Series(all, *trace::ComponentCounterId("v7x", "tc", 0, 3))) {
    EXPECT_EQ(c.value, 0u);
  }
  // 16-bit cycle counts wrap every ~34 us; unwrapped, they advance with the clock.
  std::vector<CounterSample> cycles = Series(all, kCycles);
  std::vector<double> v;
  int wraps = 0;
  for (size_t i = 0; i < cycles.size(); ++i) {
    v.push_back(static_cast<double>(cycles[i].value));
    if (i > 0 && cycles[i].value < cycles[i - 1].value) ++wraps;
  }
  EXPECT_GT(wraps, 10);
  trace::UnwrapCounterSamples(0, v.data(), v.size());
  for (size_t i = 1; i < v.size(); ++i) {
    const double dt_s = static_cast<double>(cycles[i].ps - cycles[i - 1].ps) * 1e-12;
    if (dt_s > 30e-6) continue;  // a gap longer than a wrap cannot be unwrapped
    EXPECT_NEAR(v[i] - v[i - 1], kV7xClockHz * dt_s, 2) << i;
  }
}

// `--throttle 1:1:0.3`: the chip clocks 70% of the nominal cycles, which its TensorCore's
// CYCLES counts; the power manager's CYCLE_COUNT counts them all and CLOCKS_SKIPPED the skipped
// 30%; its compute kernels take 1/0.7 as long.
TEST(KernelProfilingTest, ThrottledChipCountsFewerCyclesAndRunsLonger) {
  absl::StatusOr<PodModel> m = PodModel::Create(V7x({{1, 1, 0.3}}));
  absl::StatusOr<PodModel> healthy = PodModel::Create(V7x());
  ASSERT_OK(m);
  ASSERT_OK(healthy);
  EXPECT_DOUBLE_EQ(m->ThrottleFraction(1, 1), 0.3);
  const int64_t step = 77;
  const ChipStep slow = m->Step(step)[1], fast = healthy->Step(step)[1];
  for (size_t i = 0; i < slow.runs.size(); ++i) {
    if (slow.runs[i].collective_id != 0) continue;
    EXPECT_NEAR(static_cast<double>(slow.runs[i].duration_ps) * 0.7,
                static_cast<double>(fast.runs[i].duration_ps), 2)
        << m->ops()[slow.runs[i].op].name;
  }
  EXPECT_FALSE(PodModel::Create(V7x({{1, 1, 1.0}})).ok());
  EXPECT_FALSE(PodModel::Create(V7x({{2, 0, 0.1}})).ok());

  Session s;
  s.window.kernel_profiling = Request("interval_us:20 indices:0");
  const XSpace space = s.Build(*m);
  for (int chip : {0, 1}) {
    const double kept = chip == 1 ? 0.7 : 1.0;
    const std::vector<CounterSample> all = Samples(space.planes(chip));
    for (uint64_t die : {0, 1}) {
      const auto cycles = Series(all, kCycles + die * kDie);
      const auto clocked = Series(all, kPwrCycleCount + die * kDie);
      const auto skipped = Series(all, kPwrClocksSkipped + die * kDie);
      ASSERT_GT(cycles.size(), 100u);
      ASSERT_EQ(cycles.size(), clocked.size());
      const double dt_s = static_cast<double>(cycles.back().ps - cycles.front().ps) * 1e-12;
      const auto delta = [](const std::vector<CounterSample>& x) {
        return static_cast<double>(x.back().value - x.front().value);
      };
      EXPECT_NEAR(delta(cycles), kept * kV7xClockHz * dt_s, 2) << chip;
      EXPECT_NEAR(delta(clocked), kV7xClockHz * dt_s, 2) << chip;
      for (uint64_t cause : {kPwrExtSkipped, kPwrDroopSkipped}) {
        for (const CounterSample& c : Series(all, cause + die * kDie)) EXPECT_EQ(c.value, 0u);
      }
      EXPECT_NEAR(delta(skipped), (1 - kept) * kV7xClockHz * dt_s, 2) << chip;
    }
  }
}

// The injected "MXU waits on HBM" kernel: paged_attention (v7x only) keeps its MXU 12% busy
// and waits on DMAs (SyncWait) 55% of its time while moving HBM bytes near the roofline;
// flash_attention, for contrast, keeps its MXU 60% busy.
TEST(KernelProfilingTest, PagedAttentionsMxuWaitsOnHbm) {
  absl::StatusOr<PodModel> m = PodModel::Create(V7x());
  absl::StatusOr<PodModel> v6e = PodModel::Create([] {
    PodConfig c = V7x();
    c.generation = "v6e";
    return c;
  }());
  ASSERT_OK(m);
  ASSERT_OK(v6e);
  auto find = [](const PodModel& model, absl::string_view name) -> const OpTemplate* {
    for (const OpTemplate& op : model.ops()) {
      if (op.name == name) return &op;
    }
    return nullptr;
  };
  EXPECT_EQ(find(*v6e, "paged_attention"), nullptr);
  const OpTemplate* pa = find(*m, "paged_attention");
  ASSERT_NE(pa, nullptr);
  EXPECT_DOUBLE_EQ(pa->units.mxu, 0.12);
  EXPECT_DOUBLE_EQ(pa->units.stall_hbm, 0.5);
  EXPECT_EQ(pa->expected_bound, "stalled");

  Session s;
  absl::StatusOr<KernelProfilingRequest> r =
      KernelProfilingFromOptions(Options({}, {{kKernelProfilingKey, true}}));
  ASSERT_OK(r);
  s.window.kernel_profiling = *r;  // a line of counts per kernel execution
  const XSpace space = s.Build(*m);
  const XPlane& plane = space.planes(0);
  // Avg MXU busy per kernel execution and die, from its line.
  std::map<std::string, std::vector<double>> mxu;
  for (const KernelCounts& k : KernelLines(plane)) {
    for (int die : {0, 1}) mxu[k.kernel].push_back(Viewer{k, die}.AvgMxu());
  }
  ASSERT_FALSE(mxu["paged_attention"].empty());
  for (double v : mxu["paged_attention"]) EXPECT_NEAR(v, 0.12, 0.001);
  ASSERT_FALSE(mxu["flash_attention"].empty());
  for (double v : mxu["flash_attention"]) EXPECT_NEAR(v, 0.6, 0.001);

  // SyncWait share inside each paged_attention, and its HBM traffic.
  const tensorflow::profiler::XLine* sync = Line(plane, "Tensor Core Sync Flag");
  ASSERT_NE(sync, nullptr);
  int kernels = 0;
  for (const Kernel& k : Kernels(plane)) {
    if (k.name != "paged_attention") continue;
    ++kernels;
    int64_t waited = 0;
    for (const auto& ev : sync->events()) {
      EXPECT_EQ(plane.event_metadata().at(ev.metadata_id()).name(), "SyncWait");
      if (ev.offset_ps() >= k.start_ps && ev.offset_ps() + ev.duration_ps() <= k.end_ps)
        waited += ev.duration_ps();
    }
    const double d = static_cast<double>(k.end_ps - k.start_ps);
    EXPECT_NEAR(static_cast<double>(waited) / d, 0.55, 0.001);
    const double hbm_share =
        static_cast<double>(pa->bytes) / (d * 1e-12) / (m->generation().peak_hbm_gbps * 1e9);
    EXPECT_GT(hbm_share, 0.6);
  }
  EXPECT_GT(kernels, 3);
}

// XProf's standard kernel profiling: one `counters_<kernel>` line per compute kernel
// execution, numbered from 1, its events spanning the execution, each counting what its
// counter counted during that execution; XProf's Utilization Viewer formulas give back the
// model's unit profile, also on a throttled chip.
TEST(KernelProfilingTest, StandardKernelProfilingWritesALineOfCountsPerExecution) {
  absl::StatusOr<PodModel> m = PodModel::Create(V7x({{1, 1, 0.3}}));
  ASSERT_OK(m);
  Session s;
  absl::StatusOr<KernelProfilingRequest> r =
      KernelProfilingFromOptions(Options({}, {{kKernelProfilingKey, true}}));
  ASSERT_OK(r);
  s.window.kernel_profiling = *r;
  const XSpace space = s.Build(*m);
  EXPECT_TRUE(space.warnings().empty());
  std::map<std::string, const OpTemplate*> ops;
  for (const OpTemplate& op : m->ops()) ops[op.name] = &op;
  for (int chip : {0, 1}) {
    SCOPED_TRACE(absl::StrCat("chip ", chip));
    const XPlane& plane = space.planes(chip);
    const double kept = chip == 1 ? 0.7 : 1.0;
    std::vector<Kernel> compute;
    for (const Kernel& k : Kernels(plane)) {
      if (!k.collective) compute.push_back(k);
    }
    const std::vector<KernelCounts> lines = KernelLines(plane);
    ASSERT_EQ(lines.size(), compute.size());
    ASSERT_GT(lines.size(), 100u);
    for (size_t i = 0; i < lines.size(); ++i) {
      const KernelCounts& k = lines[i];
      ASSERT_EQ(k.line_id, static_cast<int64_t>(i) + 1);
      ASSERT_EQ(k.kernel, compute[i].name);
      ASSERT_EQ(k.start_ps, compute[i].start_ps);
      ASSERT_EQ(k.start_ps + k.duration_ps, compute[i].end_ps);
      // Both dies' standard TC counters (TC_COMPUTATION, TC_MEMORY) and power manager's four.
      ASSERT_EQ(k.counts.size(), 2 * (DefaultTcSampling().indices.size() + 4)) << k.kernel;
      const UnitProfile& u = ops.at(k.kernel)->units;
      const double cycles = kV7xClockHz * static_cast<double>(k.duration_ps) * 1e-12;
      for (int die : {0, 1}) {
        const Viewer v{k, die};
        // The power manager counts every cycle; the TensorCore only those it clocked, and its
        // units are busy for the clocked share of the cycles.
        EXPECT_NEAR(v.C(), cycles, 1);
        EXPECT_NEAR(k.Get(die, "tc_cycles"), kept * cycles, 1);
        EXPECT_NEAR(k.Get(die, "pwrmgr_clocks_skipped"), (1 - kept) * cycles, 1);
        EXPECT_EQ(k.Get(die, "pwrmgr_ext_throttle_clocks_skipped"), 0);
        EXPECT_EQ(k.Get(die, "pwrmgr_ldidt_droop_clocks_skipped"), 0);
        if (v.C() < 10000) continue;  // too short for the shares to be exact to 1e-3
        EXPECT_NEAR(v.AvgMxu(), kept * u.mxu, 1e-3) << k.kernel;
        EXPECT_NEAR(v.Mxu(0), kept * u.mxu, 1e-3) << k.kernel;
        EXPECT_NEAR(v.Mxu(1), kept * u.mxu, 1e-3) << k.kernel;
        EXPECT_NEAR(v.Vpu(), kept * u.vpu, 1e-3) << k.kernel;
        EXPECT_NEAR(v.Sum({"vector_alu_instruction_0", "vector_alu_instruction_1",
                           "vector_alu_instruction_2", "vector_alu_instruction_3"}) /
                        (4 * v.C()),
                    kept * u.vpu, 1e-3);
        EXPECT_NEAR(v.Sum({"scalar_alu_instruction_0", "scalar_alu_instruction_1"}) / (2 * v.C()),
                    kept * u.scalar, 1e-3);
        EXPECT_NEAR(v.Xlu(0), kept * u.vpu / 4, 1e-3) << k.kernel;
        EXPECT_NEAR(v.Xlu(1), kept * u.vpu / 4, 1e-3) << k.kernel;
      }
    }
  }
}

// The HBM set: the CMN's beat counters and every HBM controller's, on both dies, whose beats
// of 32 bytes add up to the kernel's HBM bytes.
TEST(KernelProfilingTest, HbmSetCountsTheKernelsHbmBytesInBeats) {
  absl::StatusOr<PodModel> m = PodModel::Create(V7x());
  ASSERT_OK(m);
  std::map<std::string, const OpTemplate*> ops;
  for (const OpTemplate& op : m->ops()) ops[op.name] = &op;
  Session s;
  absl::StatusOr<KernelProfilingRequest> r = KernelProfilingFromOptions(
      Options({{kCounterSetsKey, "HBM"}}, {{kKernelProfilingKey, true}}));
  ASSERT_OK(r);
  ASSERT_TRUE(r->per_kernel);
  s.window.kernel_profiling = *r;
  const XSpace space = s.Build(*m);
  const std::vector<KernelCounts> lines = KernelLines(space.planes(0));
  ASSERT_FALSE(lines.empty());
  for (const KernelCounts& k : lines) {
    double cmn = 0, controllers = 0, read = 0;
    int controller_counters = 0;
    for (const auto& [name, n] : k.counts) {
      if (absl::StrContains(name, "_cmn_cmnur_0_") && absl::StrContains(name, "_beat_")) cmn += n;
      if (absl::StrContains(name, "_ss_hbmc_")) {
        ++controller_counters;
        controllers += n;
        if (absl::StrContains(name, "rd_resp")) read += n;
      }
    }
    EXPECT_EQ(controller_counters, 2 * 64 * 6);
    const double beats = static_cast<double>(ops.at(k.kernel)->bytes) / 32;
    EXPECT_NEAR(cmn, beats, 3) << k.kernel;
    EXPECT_NEAR(controllers, beats, 2 * 64 * 4) << k.kernel;
    // Each of the 256 pseudo-channel counters rounds down on its own: exact for big kernels.
    if (beats > 1e6) {
      EXPECT_NEAR(read / controllers, 0.75, 1e-3) << k.kernel;
    }
    EXPECT_NEAR(k.Get(0,
                      "cmn_cmnur_0_cmn_stats_debug_fixed_stats_counters_unprivileged_"
                      "cycle_counter_window"),
                kV7xClockHz * static_cast<double>(k.duration_ps) * 1e-12, 1);
  }
  // SparseCore sets are validated and, with no SparseCore to count, said to be skipped.
  Session sc;
  absl::StatusOr<KernelProfilingRequest> scr = KernelProfilingFromOptions(
      Options({{kCounterSetsKey, "SC_MEMORY"}}, {{kKernelProfilingKey, true}}));
  ASSERT_OK(scr);
  sc.window.kernel_profiling = *scr;
  const XSpace warned = sc.Build(*m);
  ASSERT_EQ(warned.warnings_size(), 1);
  EXPECT_TRUE(absl::StrContains(warned.warnings(0), "SC_MEMORY counts SparseCore counters"))
      << warned.warnings(0);
}

// The Pallas kernels' inside: primitives, source lines and sparse LLO instructions nest in
// the kernel that runs them.
TEST(KernelProfilingTest, PallasKernelsShowPrimitivesSourceLinesAndLlo) {
  absl::StatusOr<PodModel> m = PodModel::Create(V7x());
  ASSERT_OK(m);
  Session s;
  s.window.kernel_profiling = Request("interval_us:100 indices:0");
  const XSpace space = s.Build(*m);
  const XPlane& plane = space.planes(1);
  const std::vector<Kernel> kernels = Kernels(plane);
  auto nested = [&](int64_t a, int64_t b) {
    for (const Kernel& k : kernels) {
      if (absl::EndsWith(k.name, "attention") && k.start_ps <= a && b <= k.end_ps) return true;
    }
    return false;
  };
  std::set<std::string> names;
  for (const char* line_name : {"Pallas Primitives", "Source Lines", "LLO Instructions"}) {
    const tensorflow::profiler::XLine* line = Line(plane, line_name);
    ASSERT_NE(line, nullptr) << line_name;
    ASSERT_FALSE(line->events().empty()) << line_name;
    for (const auto& ev : line->events()) {
      names.insert(plane.event_metadata().at(ev.metadata_id()).name());
      EXPECT_TRUE(nested(ev.offset_ps(), ev.offset_ps() + ev.duration_ps())) << line_name;
    }
  }
  for (const char* n : {"dma_start", "dma_wait", "matmul", "store", "paged_attention.py:21",
                        "flash_attention.py:35", "vmatmul.bf16", "vwait.sflag"}) {
    EXPECT_EQ(names.count(n), 1u) << n;
  }
  // Sparse: at most 16 LLO instructions per primitive.
  int pallas_runs = 0;
  for (const Kernel& k : kernels) pallas_runs += absl::EndsWith(k.name, "attention");
  EXPECT_LE(Line(plane, "LLO Instructions")->events_size(), pallas_runs * 8 * 16);
}

// The samples are streamed into the file, never held; what bounds a chip's share of the file
// is its sample buffer: past it later samples are dropped, and the XSpace says so.
TEST(KernelProfilingTest, AFullSampleBufferDropsLaterSamplesWithAWarning) {
  absl::StatusOr<PodModel> m = PodModel::Create(V7x());
  ASSERT_OK(m);
  Session s;
  s.window.kernel_profiling = Request("interval_us:5 scaling:0 counter_size_bits:3 indices:0");
  s.window.max_samples_per_chip = 40;
  const XSpace space = s.Build(*m);
  int warned = 0;
  for (const std::string& w : space.warnings()) {
    warned += absl::StrContains(w, "kept its first 40 counter samples");
  }
  EXPECT_EQ(warned, m->chips()) << space.DebugString().substr(0, 2000);
  for (int chip = 0; chip < m->chips(); ++chip) {
    std::set<int64_t> lines;
    for (const CounterSample& c : Samples(space.planes(chip))) lines.insert(c.line_id);
    EXPECT_EQ(lines.size(), 40u) << "chip " << chip;
    // The kernels are all there: only the counters stop.
    EXPECT_GT(Kernels(space.planes(chip)).size(), 100u);
  }
}

// What the host writes to its file is what BuildXSpace gives tests: the same bytes.
TEST(KernelProfilingTest, TheStreamedFileIsTheBuiltXSpace) {
  absl::StatusOr<PodModel> m = PodModel::Create(V7x({{1, 0, 0.3}}));
  ASSERT_OK(m);
  Session s;
  s.window.counters = true;
  s.window.kernel_profiling = Request("interval_us:10 scaling:0 counter_size_bits:3 indices:0");
  std::stringstream streamed;
  absl::StatusOr<WriteResult> w = WriteXSpace(*m, s.host, s.window, streamed);
  ASSERT_OK(w);
  EXPECT_EQ(w->bytes, static_cast<int64_t>(streamed.str().size()));
  EXPECT_GT(w->samples, 1000);
  XSpace parsed;
  ASSERT_TRUE(parsed.ParseFromString(streamed.str()));
  EXPECT_EQ(Deterministic(parsed), Deterministic(s.Build(*m)));
  // A client gone before the first plane: nothing is generated.
  std::stringstream abandoned;
  absl::StatusOr<WriteResult> c = WriteXSpace(*m, s.host, s.window, abandoned, [] { return true; });
  EXPECT_TRUE(absl::IsCancelled(c.status())) << c.status();
}

}  // namespace
}  // namespace podprof::sim
