// The XProf exporter against podprof's own reader: a capture built here, written as an XSpace
// and read back, keeps its host, chips, timelines, kernels, collectives and counters; and the
// file is laid out as XProf expects (plane, line and stat names).
#include "export/xspace_export.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "export/plane_stats.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/util/export_checker.h"
#include "tests/util/status_matchers.h"
#include "trace/byte_source.h"
#include "trace/xspace_reader.h"

namespace podprof::exporter {
namespace {

using trace::EventBlock;
using trace::HostCapture;
using trace::KernelDef;
using trace::LineKind;

constexpr int64_t kStartNs = 1'700'000'000'000'000'000;  // 2023-11-14 22:13:20 UTC

KernelDef Kernel(std::string name, std::string category, uint64_t program_id, int64_t flops = 0,
                 int64_t bytes = 0, std::string source = "") {
  KernelDef k;
  k.name = std::move(name);
  k.category = std::move(category);
  k.program_id = program_id;
  k.flops = flops;
  k.bytes_accessed = bytes;
  k.source = std::move(source);
  return k;
}

EventBlock Block(int chip, std::string line, LineKind kind, int64_t base_ns,
                 std::vector<std::pair<int64_t, int64_t>> start_duration_ps,
                 std::vector<uint32_t> kernels, std::vector<uint64_t> collectives) {
  EventBlock b;
  b.chip = chip;
  b.line = std::move(line);
  b.kind = kind;
  b.base_ns = base_ns;
  for (const auto& [start, duration] : start_duration_ps) {
    b.start_ps.push_back(start);
    b.duration_ps.push_back(duration);
  }
  b.kernel = std::move(kernels);
  b.collective = std::move(collectives);
  return b;
}

// Two v6e chips: kernels, a collective on both, module and step lines on chip 0, counters.
HostCapture TpuCapture() {
  HostCapture c;
  c.host.name = "host-a";
  c.host.profile_start_ns = kStartNs;
  c.host.profile_stop_ns = kStartNs + 2'000'000'000;
  for (int i = 0; i < 2; ++i) {
    trace::Chip chip;
    chip.ordinal = i;
    chip.device_type = "TPU v6 lite";
    chip.peak_tflops = 900;
    chip.peak_hbm_gbps = 1600;
    c.host.chips.push_back(chip);
  }
  c.kernels = {
      Kernel("fusion.1", "convolution fusion", 7, 1000, 2000, "model.py:10"),
      Kernel("all-reduce.2", "all-reduce", 7, 0, 512),
      Kernel("jit_step(7)", "xla module", 7),
      Kernel("12", "step", 0),
  };
  c.blocks.push_back(Block(0, "XLA Ops", LineKind::kOps, kStartNs + 1000, {{0, 500}, {1'000, 300}},
                           {0, 1}, {0, 99}));
  c.blocks.push_back(
      Block(0, "XLA Modules", LineKind::kModules, kStartNs + 1000, {{0, 5'000}}, {2}, {0}));
  c.blocks.push_back(Block(0, "Steps", LineKind::kSteps, kStartNs + 1000, {{0, 6'000}}, {3}, {0}));
  c.blocks.push_back(Block(1, "XLA Ops", LineKind::kOps, kStartNs + 2000, {{0, 700}, {2'000, 300}},
                           {0, 1}, {0, 99}));
  trace::CounterSeries mxu;
  mxu.chip = 0;
  mxu.name = "mxu_busy";
  mxu.time_ns = {kStartNs + 1'500, kStartNs + 2'500};
  mxu.value = {0.5, 0.25};
  c.counters.push_back(mxu);
  trace::CounterSeries energy;
  energy.chip = 1;
  energy.name = "hbm_energy_nj";
  energy.time_ns = {kStartNs + 1'700};
  energy.value = {12.5};
  c.counters.push_back(energy);
  return c;
}

absl::StatusOr<HostCapture> RoundTrip(const HostCapture& capture, std::string* bytes = nullptr) {
  std::string file;
  if (!ToXSpace(capture).SerializeToString(&file)) return absl::InternalError("serialize");
  trace::MemorySource source(file);
  absl::StatusOr<HostCapture> read = trace::ReadXSpace(source);
  if (bytes != nullptr) *bytes = std::move(file);
  return read;
}

const EventBlock* FindBlock(const HostCapture& c, int chip, const std::string& line) {
  for (const EventBlock& b : c.blocks) {
    if (b.chip == chip && b.line == line) return &b;
  }
  return nullptr;
}

TEST(XSpaceExportTest, HostAndChipsRoundTrip) {
  const HostCapture in = TpuCapture();
  absl::StatusOr<HostCapture> out = RoundTrip(in);
  ASSERT_OK(out);
  EXPECT_EQ(out->host.name, "host-a");
  EXPECT_EQ(out->host.profile_start_ns, in.host.profile_start_ns);
  EXPECT_EQ(out->host.profile_stop_ns, in.host.profile_stop_ns);
  ASSERT_EQ(out->host.chips.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const trace::Chip& chip = out->host.chips[i];
    EXPECT_EQ(chip.kind, trace::DeviceKind::kTpu);
    EXPECT_EQ(chip.ordinal, i);
    EXPECT_EQ(chip.device_type, "TPU v6 lite");
    EXPECT_EQ(chip.generation, "v6e") << "known from the device type";
    EXPECT_DOUBLE_EQ(chip.peak_tflops, 900);
    EXPECT_DOUBLE_EQ(chip.peak_hbm_gbps, 1600);
  }
  EXPECT_TRUE(out->warnings.empty());
}

TEST(XSpaceExportTest, TimelinesAndKernelsRoundTrip) {
  const HostCapture in = TpuCapture();
  absl::StatusOr<HostCapture> out = RoundTrip(in);
  ASSERT_OK(out);
  ASSERT_EQ(out->blocks.size(), in.blocks.size());
  EXPECT_EQ(out->EventCount(), in.EventCount());
  for (const EventBlock& want : in.blocks) {
    SCOPED_TRACE(want.line + " of chip " + std::to_string(want.chip));
    const EventBlock* got = FindBlock(*out, want.chip, want.line);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->kind, want.kind);
    EXPECT_EQ(got->base_ns, want.base_ns);
    EXPECT_EQ(got->start_ps, want.start_ps);
    EXPECT_EQ(got->duration_ps, want.duration_ps);
    EXPECT_EQ(got->collective, want.collective);
    ASSERT_EQ(got->kernel.size(), want.kernel.size());
    for (size_t i = 0; i < want.kernel.size(); ++i) {
      const KernelDef& w = in.kernels[want.kernel[i]];
      const KernelDef& g = out->kernels.at(got->kernel[i]);
      EXPECT_EQ(g.name, w.name);
      EXPECT_EQ(g.category, w.category);
      EXPECT_EQ(g.program_id, w.program_id);
      EXPECT_EQ(g.flops, w.flops);
      EXPECT_EQ(g.bytes_accessed, w.bytes_accessed);
      EXPECT_EQ(g.source, w.source);
    }
  }
  // The same kernel on both chips is one definition; the module line names the program's
  // module, which the reader gives every kernel of that program.
  std::map<std::string, const KernelDef*> by_name;
  for (const KernelDef& k : out->kernels) {
    EXPECT_TRUE(by_name.emplace(k.name, &k).second) << "one definition of " << k.name;
  }
  ASSERT_EQ(by_name.size(), in.kernels.size());
  EXPECT_EQ(by_name.at("jit_step(7)")->module, "jit_step");
  EXPECT_EQ(by_name.at("fusion.1")->module, "jit_step");
  EXPECT_EQ(by_name.at("all-reduce.2")->module, "jit_step");
}

TEST(XSpaceExportTest, CountersRoundTrip) {
  const HostCapture in = TpuCapture();
  absl::StatusOr<HostCapture> out = RoundTrip(in);
  ASSERT_OK(out);
  ASSERT_EQ(out->counters.size(), in.counters.size());
  for (const trace::CounterSeries& want : in.counters) {
    const trace::CounterSeries* got = nullptr;
    for (const trace::CounterSeries& s : out->counters) {
      if (s.chip == want.chip && s.name == want.name) got = &s;
    }
    ASSERT_NE(got, nullptr) << want.name;
    EXPECT_EQ(got->time_ns, want.time_ns) << want.name;
    EXPECT_EQ(got->value, want.value) << want.name;
  }
}

TEST(XSpaceExportTest, LaidOutAsXprofExpects) {
  const tensorflow::profiler::XSpace space = ToXSpace(TpuCapture());
  ASSERT_EQ(space.hostnames_size(), 1);
  EXPECT_EQ(space.hostnames(0), "host-a");
  std::vector<std::string> planes;
  for (const auto& p : space.planes()) planes.push_back(p.name());
  EXPECT_EQ(planes,
            (std::vector<std::string>{"/device:TPU:0", "/device:TPU:1", "Task Environment"}));
  const auto& chip0 = space.planes(0);
  std::set<std::string> lines, stat_names;
  for (const auto& l : chip0.lines()) {
    lines.insert(l.name());
    EXPECT_GE(l.timestamp_ns(), 0) << "line times are relative to the profile start";
    EXPECT_LT(l.timestamp_ns(), 2'000'000'000) << l.name();
  }
  EXPECT_EQ(lines, (std::set<std::string>{"Steps", "XLA Modules", "XLA Ops", "_counters_"}));
  for (const auto& [id, sm] : chip0.stat_metadata()) {
    EXPECT_EQ(sm.id(), id);
    stat_names.insert(sm.name());
  }
  for (const char* name :
       {"device_type_string", "peak_teraflops_per_second", "peak_hbm_bw_gigabytes_per_second",
        "hlo_category", "flops", "bytes_accessed", "source", "program_id", "all_reduce_unique_id",
        "counter_value", "symbol_id"}) {
    EXPECT_EQ(stat_names.count(name), 1u) << name;
  }
  // XProf's op statistics skip an op without (program_id, symbol_id): every op of a program has
  // both, its symbol id its own and never 0; a module run has no symbol id.
  std::map<std::string, int64_t> stat_id;
  for (const auto& [id, sm] : chip0.stat_metadata()) stat_id[sm.name()] = id;
  std::map<std::string, uint64_t> symbol_of;
  for (const auto& [id, m] : chip0.event_metadata()) {
    uint64_t program = 0, symbol = 0;
    for (const auto& s : m.stats()) {
      if (s.metadata_id() == stat_id["program_id"]) program = s.uint64_value();
      if (s.metadata_id() == stat_id["symbol_id"]) symbol = s.uint64_value();
    }
    if (program != 0) symbol_of[m.name()] = symbol;
  }
  EXPECT_EQ(symbol_of.size(), 3u);
  EXPECT_EQ(symbol_of["jit_step(7)"], 0u);
  EXPECT_NE(symbol_of["fusion.1"], 0u);
  EXPECT_NE(symbol_of["all-reduce.2"], 0u);
  EXPECT_NE(symbol_of["fusion.1"], symbol_of["all-reduce.2"]);
  const auto& env = space.planes(2);
  std::map<std::string, uint64_t> env_stats;
  for (const auto& s : env.stats()) {
    env_stats[env.stat_metadata().at(s.metadata_id()).name()] = s.uint64_value();
  }
  EXPECT_EQ(env_stats,
            (std::map<std::string, uint64_t>{{"profile_start_time", kStartNs},
                                             {"profile_stop_time", kStartNs + 2'000'000'000}}));
}

TEST(XSpaceExportTest, GpuCapturesGetGpuPlanes) {
  HostCapture in;
  in.host.name = "gpu-host";
  in.host.profile_start_ns = kStartNs;
  in.host.profile_stop_ns = kStartNs + 1'000'000;
  trace::Chip chip;
  chip.kind = trace::DeviceKind::kGpu;
  chip.ordinal = 3;
  in.host.chips.push_back(chip);
  in.kernels = {Kernel("volta_sgemm", "gpu kernel", 0)};
  in.blocks.push_back(Block(0, "Stream #7(Compute)", LineKind::kGpuStream, kStartNs + 10,
                            {{0, 100}, {500, 100}}, {0, 0}, {0, 0}));
  std::string bytes;
  absl::StatusOr<HostCapture> out = RoundTrip(in, &bytes);
  ASSERT_OK(out);
  ASSERT_EQ(out->host.chips.size(), 1u);
  EXPECT_EQ(out->host.chips[0].kind, trace::DeviceKind::kGpu);
  EXPECT_EQ(out->host.chips[0].ordinal, 3);
  const EventBlock* b = FindBlock(*out, 0, "Stream #7(Compute)");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->kind, LineKind::kGpuStream);
  EXPECT_EQ(b->base_ns, kStartNs + 10);
  EXPECT_EQ(b->start_ps, (std::vector<int64_t>{0, 500}));
  EXPECT_EQ(out->kernels.at(b->kernel[0]).name, "volta_sgemm");
  EXPECT_EQ(out->kernels.at(b->kernel[0]).category, "gpu kernel");
}

TEST(XSpaceExportTest, AnEmptyCaptureStillHasItsWindow) {
  HostCapture in;
  in.host.name = "idle";
  in.host.profile_start_ns = kStartNs;
  in.host.profile_stop_ns = kStartNs + 5;
  absl::StatusOr<HostCapture> out = RoundTrip(in);
  ASSERT_OK(out);
  EXPECT_EQ(out->host.name, "idle");
  EXPECT_TRUE(out->host.chips.empty());
  EXPECT_EQ(out->host.profile_start_ns, kStartNs);
  EXPECT_EQ(out->host.profile_stop_ns, kStartNs + 5);
}

// Starts (ps from kStartNs) of every event of a capture, with durations, per (chip, line).
std::map<std::pair<int, std::string>, std::vector<std::pair<int64_t, int64_t>>> Events(
    const HostCapture& c) {
  std::map<std::pair<int, std::string>, std::vector<std::pair<int64_t, int64_t>>> out;
  for (const EventBlock& b : c.blocks) {
    auto& v = out[{b.chip, b.line}];
    for (size_t i = 0; i < b.size(); ++i) {
      v.push_back({(b.base_ns - kStartNs) * 1000 + b.start_ps[i], b.duration_ps[i]});
    }
    std::sort(v.begin(), v.end());
  }
  return out;
}

// A Pallas kernel with named scopes on chip 0, as the simulator's clock mapping leaves them:
// scope b begins 1 ps before scope a ends.
HostCapture ScopedCapture() {
  HostCapture c = TpuCapture();
  c.kernels.push_back(Kernel("pallas/a", "", 0));
  c.kernels.push_back(Kernel("pallas/b", "", 0));
  c.blocks.push_back(Block(0, "XLA TraceMe", LineKind::kScopes, kStartNs + 1000,
                           {{0, 200}, {199, 250}}, {4, 5}, {0, 0}));
  return c;
}

// Every line starts at its first event, relative to the profile start the Task Environment
// plane gives (counters too), and lasts to its last event's end; an XProf loader turning the
// start into ps does not overflow, and its normalisation (which subtracts the profile start
// from starts at or past it) leaves the file as it is.
TEST(XSpaceExportTest, LinesStartRelativeToTheProfileAndLastToTheirLastEvent) {
  const tensorflow::profiler::XSpace space = ToXSpace(ScopedCapture());
  // (plane, line) -> (timestamp_ns, duration_ps)
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> got;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      got[{plane.name(), line.name()}] = {line.timestamp_ns(), line.duration_ps()};
      EXPECT_LT(line.timestamp_ns(), kStartNs) << "XProf would take it for an absolute time";
      EXPECT_LT(std::abs(line.timestamp_ns()), INT64_MAX / 1000) << "ps would overflow";
      int64_t last_end = 0;
      for (const auto& e : line.events()) {
        last_end = std::max(last_end, e.offset_ps() + e.duration_ps());
      }
      EXPECT_EQ(line.duration_ps(), last_end) << plane.name() << " " << line.name();
    }
  }
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(got.at({"/device:TPU:0", "XLA Ops"}), P(1000, 1300));
  EXPECT_EQ(got.at({"/device:TPU:0", "XLA Modules"}), P(1000, 5000));
  EXPECT_EQ(got.at({"/device:TPU:0", "XLA TraceMe"}), P(1000, 449));
  EXPECT_EQ(got.at({"/device:TPU:0", "_counters_"}), P(1500, 1'000'000))
      << "counters start at their first sample, 1.5 us after the profile start";
  EXPECT_EQ(got.at({"/device:TPU:1", "XLA Ops"}), P(2000, 2300));
  EXPECT_EQ(got.at({"/device:TPU:1", "_counters_"}), P(1700, 0));
}

// Events on one line nest: scope a, which b overlapped by 1 ps, ends where b begins; starts
// are kept, and the line is in XProf's order.
TEST(XSpaceExportTest, ScopesOnALineNest) {
  const tensorflow::profiler::XSpace space = ToXSpace(ScopedCapture());
  const tensorflow::profiler::XLine* scopes = nullptr;
  for (const auto& l : space.planes(0).lines()) {
    if (l.name() == "XLA TraceMe") scopes = &l;
  }
  ASSERT_NE(scopes, nullptr);
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto& e : scopes->events()) spans.push_back({e.offset_ps(), e.duration_ps()});
  EXPECT_EQ(spans, (std::vector<std::pair<int64_t, int64_t>>{{0, 199}, {199, 250}}));
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      std::vector<int64_t> open_ends;
      int64_t last_begin = INT64_MIN;
      for (const auto& e : line.events()) {
        EXPECT_GE(e.offset_ps(), last_begin) << line.name() << ": sorted by start";
        last_begin = e.offset_ps();
        while (!open_ends.empty() && open_ends.back() <= e.offset_ps()) open_ends.pop_back();
        if (!open_ends.empty()) {
          EXPECT_LE(e.offset_ps() + e.duration_ps(), open_ends.back())
              << line.name() << ": an event ends after the one it starts in";
        }
        open_ends.push_back(e.offset_ps() + e.duration_ps());
      }
    }
  }
}

// Every line of a file as a viewer sees it: (plane, line) -> start, duration, and each event's
// offset, duration and name.
using EventView = std::tuple<int64_t, int64_t, std::string>;
std::map<std::pair<std::string, std::string>, std::tuple<int64_t, int64_t, std::vector<EventView>>>
Lines(const tensorflow::profiler::XSpace& space) {
  std::map<std::pair<std::string, std::string>,
           std::tuple<int64_t, int64_t, std::vector<EventView>>>
      out;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      std::vector<EventView> events;
      for (const auto& e : line.events()) {
        events.emplace_back(e.offset_ps(), e.duration_ps(),
                            plane.event_metadata().at(e.metadata_id()).name());
      }
      out[{plane.name(), line.name()}] = {line.timestamp_ns(), line.duration_ps(), events};
    }
  }
  return out;
}

// Export, read back, export again: every event keeps its start to the ps (the reader adds the
// profile start back), durations are the nested ones, and the second file shows what the first
// did.
TEST(XSpaceExportTest, ExportReadExportKeepsEveryEventsTime) {
  const HostCapture in = ScopedCapture();
  std::string first;
  absl::StatusOr<HostCapture> read = RoundTrip(in, &first);
  ASSERT_OK(read);
  auto want = Events(in);
  want[{0, "XLA TraceMe"}][0].second = 199;  // scope a, cut where b begins
  EXPECT_EQ(Events(*read), want);
  ASSERT_EQ(read->counters.size(), in.counters.size());
  EXPECT_EQ(read->counters[0].time_ns, in.counters[0].time_ns);
  tensorflow::profiler::XSpace first_space;
  ASSERT_TRUE(first_space.ParseFromString(first));
  EXPECT_EQ(Lines(ToXSpace(*read)), Lines(first_space));
}

// A v7x chip of a kernel-profiling capture: a Pallas kernel with the lines inside it, a
// SparseCore's scopes, and sampled performance counters (two at each instant, one the v7x
// table lacks) beside an older-style counter.
HostCapture KernelProfilingCapture() {
  HostCapture c;
  c.host.name = "v7x-host";
  c.host.profile_start_ns = kStartNs;
  c.host.profile_stop_ns = kStartNs + 1'000'000;
  trace::Chip chip;
  chip.device_type = "TPU v7x";
  chip.generation = "v7x";
  chip.global_id = 12;
  c.host.chips.push_back(chip);
  c.kernels = {Kernel("pallas_call", "custom-call", 0), Kernel("dot_general", "scope", 0),
               Kernel("kernel.py:10", "scope", 0),      Kernel("vmatmul", "scope", 0),
               Kernel("SyncWait", "scope", 0),          Kernel("sc_gather", "scope", 0)};
  c.blocks.push_back(Block(0, "XLA Ops", LineKind::kOps, kStartNs, {{0, 50'000'000}}, {0}, {0}));
  const std::pair<const char*, uint32_t> scopes[] = {
      {"Pallas Primitives", 1}, {"Source Lines", 2},          {"LLO Instructions", 3},
      {"MXU0 Instructions", 3}, {"Tensor Core Sync Flag", 4}, {"SparseCore 1/Sparse Core Ops", 5}};
  for (const auto& [line, kernel] : scopes) {
    c.blocks.push_back(
        Block(0, line, LineKind::kScopes, kStartNs + 1000, {{0, 2'000'000}}, {kernel}, {0}));
  }
  for (const char* name : {"perf/die0_tc_cycles", "perf/die0_tc_mxu_busy_2", "perf/id_12345"}) {
    trace::CounterSeries s;
    s.name = name;
    s.time_ns = {kStartNs + 1000, kStartNs + 11'000, kStartNs + 21'000};
    s.value = {60000, 65000, 69536};  // unwrapped: past 16 bits
    c.counters.push_back(s);
  }
  c.counters[1].value = {10, 20, 30};
  trace::CounterSeries util;
  util.name = "mxu_busy";
  util.time_ns = {kStartNs + 5000};
  util.value = {0.5};
  c.counters.push_back(util);
  return c;
}

// Perf series are written as XProf's Perf Counters tool reads them, and podprof reads back the
// same series; the lines inside kernels keep their names and stay scopes.
TEST(XSpaceExportTest, KernelProfilingDataRoundTrips) {
  const HostCapture in = KernelProfilingCapture();
  absl::StatusOr<HostCapture> out = RoundTrip(in);
  ASSERT_OK(out);
  ASSERT_EQ(out->host.chips.size(), 1u);
  EXPECT_EQ(out->host.chips[0].global_id, 12);
  EXPECT_EQ(out->host.chips[0].generation, "v7x");
  std::map<std::string, const trace::CounterSeries*> series;
  for (const trace::CounterSeries& s : out->counters) series[s.name] = &s;
  ASSERT_EQ(series.size(), in.counters.size());
  for (const trace::CounterSeries& want : in.counters) {
    ASSERT_TRUE(series.count(want.name)) << want.name;
    EXPECT_EQ(series[want.name]->chip, 0);
    EXPECT_EQ(series[want.name]->time_ns, want.time_ns) << want.name;
    EXPECT_EQ(series[want.name]->value, want.value) << want.name;
  }
  for (const EventBlock& want : in.blocks) {
    const EventBlock* got = FindBlock(*out, 0, want.line);
    ASSERT_NE(got, nullptr) << want.line;
    EXPECT_EQ(got->kind, want.kind) << want.line;
    EXPECT_EQ(got->base_ns, want.base_ns) << want.line;
    EXPECT_EQ(out->kernels.at(got->kernel[0]).name, in.kernels[want.kernel[0]].name);
  }
  // The unknown id is the only note: the sampled values need no sorting or unwrapping.
  ASSERT_EQ(out->warnings.size(), 1u);
  EXPECT_NE(out->warnings[0].find("1 performance counter ids not in the v7x"), std::string::npos)
      << out->warnings[0];
}

TEST(XSpaceExportTest, PerfSamplesInXprofsLayout) {
  const tensorflow::profiler::XSpace space = ToXSpace(KernelProfilingCapture());
  const auto& plane = space.planes(0);
  std::map<std::string, int64_t> stat_id;
  for (const auto& [id, sm] : plane.stat_metadata()) stat_id[sm.name()] = id;
  bool chip_id = false;
  for (const auto& s : plane.stats()) {
    chip_id |= s.metadata_id() == stat_id["global_chip_id"] && s.uint64_value() == 12;
  }
  EXPECT_TRUE(chip_id) << "XProf's Perf Counters tool skips a plane without global_chip_id";
  std::set<int64_t> line_ids;
  std::vector<int64_t> sample_ids;
  std::map<std::string, std::vector<uint64_t>> values;  // counter name -> values
  for (const auto& line : plane.lines()) {
    EXPECT_TRUE(line_ids.insert(line.id()).second) << "line ids are unique: " << line.id();
    if (line.name() != "Performance Counters") continue;
    sample_ids.push_back(line.id());
    EXPECT_EQ(line.events_size(), 3) << "one event per counter sampled at the instant";
    for (const auto& e : line.events()) {
      uint64_t id = 0, value = 0;
      for (const auto& s : e.stats()) {
        if (s.metadata_id() == stat_id["performance_counter_id"]) id = s.uint64_value();
        if (s.metadata_id() == stat_id["counter_value"]) value = s.uint64_value();
      }
      const std::string& name = plane.event_metadata().at(e.metadata_id()).name();
      EXPECT_NE(id, 0u) << name;
      values[name].push_back(value);
    }
  }
  EXPECT_EQ(sample_ids, (std::vector<int64_t>{0, 1, 2})) << "the line id is the sample number";
  EXPECT_EQ(values, (std::map<std::string, std::vector<uint64_t>>{
                        {"vf_chip_die0_tc_tcs_tc_misc_tcs_stats_tcs_stats_counters_unprivileged_"
                         "count_cycles",
                         {60000, 65000, 69536}},
                        {"vf_chip_die0_tc_tcs_tc_misc_tcs_stats_tcs_stats_counters_unprivileged_"
                         "count_mxu_busy_2",
                         {10, 20, 30}},
                        {"id_12345", {60000, 65000, 69536}}}));
}

// The export checker, which reads the file with the published schema only, finds the session
// clean: perf samples carry their values, sample lines and the others have distinct ids.
TEST(XSpaceExportTest, KernelProfilingSessionPassesTheChecker) {
  const HostCapture in = KernelProfilingCapture();
  const std::filesystem::path root =
      std::filesystem::path(::testing::TempDir()) / "kernel-profiling-xprof";
  const std::filesystem::path run =
      root / "plugins" / "profile" / XprofRunName(in.host.profile_start_ns);
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(run);
  {
    std::ofstream file(run / "v7x-host.xplane.pb", std::ios::binary);
    ASSERT_TRUE(ToXSpace(in).SerializeToOstream(&file));
  }
  const testing::ExportCheck check = testing::CheckXprofSession(root);
  EXPECT_TRUE(check.ok()) << check.Summary();
  EXPECT_EQ(check.counter_samples, 10u) << "3 instants x 3 counters, and mxu_busy";
  std::filesystem::remove_all(root);
}

// A real TPU capture (post-processed: device lines at 0, host lines a little after the profile
// start) read and exported keeps its lines' start times and its profile window.
TEST(XSpaceExportTest, ARealCaptureKeepsItsLineTimestamps) {
  const std::string path =
      std::string(PODPROF_FIXTURES_DIR) + "/tpu_v6e_4chip_host_offload.xplane.pb";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no fixture at " << path;
  auto source = trace::FileSource::Open(path);
  ASSERT_OK(source);
  absl::StatusOr<HostCapture> capture = trace::ReadXSpace(**source);
  ASSERT_OK(capture);
  tensorflow::profiler::XSpace original;
  {
    std::string raw((*source)->size(), '\0');
    ASSERT_OK((*source)->ReadAt(0, raw.size(), raw.data()));
    ASSERT_TRUE(original.ParseFromString(raw));
  }
  std::map<std::pair<std::string, std::string>, int64_t> original_start;
  for (const auto& plane : original.planes()) {
    for (const auto& line : plane.lines()) {
      if (line.events_size() > 0) original_start[{plane.name(), line.name()}] = line.timestamp_ns();
    }
  }
  const tensorflow::profiler::XSpace exported = ToXSpace(*capture);
  int compared = 0;
  for (const auto& plane : exported.planes()) {
    for (const auto& line : plane.lines()) {
      auto it = original_start.find({plane.name(), line.name()});
      if (it == original_start.end()) continue;
      EXPECT_EQ(line.timestamp_ns(), it->second) << plane.name() << " " << line.name();
      ++compared;
    }
  }
  EXPECT_GT(compared, 4);
  absl::StatusOr<HostCapture> reread = RoundTrip(*capture);
  ASSERT_OK(reread);
  EXPECT_EQ(reread->host.profile_start_ns, capture->host.profile_start_ns);
  EXPECT_EQ(reread->host.profile_stop_ns, capture->host.profile_stop_ns);
}

// WriteXSpace's bytes, a plane at a time, parse to exactly the XSpace ToXSpace builds whole.
void ExpectStreamedEqualsWhole(const HostCapture& capture) {
  std::ostringstream out;
  ASSERT_TRUE(WriteXSpace(capture, &out));
  tensorflow::profiler::XSpace streamed;
  ASSERT_TRUE(streamed.ParseFromString(out.str()));
  const tensorflow::profiler::XSpace whole = ToXSpace(capture);
  std::string diff;
  google::protobuf::util::MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(whole, streamed)) << diff;
  EXPECT_EQ(out.str().size(), whole.ByteSizeLong());
  EXPECT_EQ(XSpaceByteSize(capture), out.str().size());  // told before a tar member's bytes
  // Planes in ToXSpace's order (a repeated field compares in order above too).
  ASSERT_EQ(streamed.planes_size(), whole.planes_size());
  EXPECT_EQ(streamed.hostnames_size(), 1);
}

TEST(XSpaceExportTest, StreamedPlaneByPlaneParsesToTheWholeXSpace) {
  ExpectStreamedEqualsWhole(TpuCapture());
  ExpectStreamedEqualsWhole(KernelProfilingCapture());
  ExpectStreamedEqualsWhole(ScopedCapture());
  HostCapture empty;
  empty.host.name = "no-chips";
  ExpectStreamedEqualsWhole(empty);
  for (const char* name :
       {"tpu_v6e_4chip_host_offload.xplane.pb", "gpu_8xv100_34.83.195.179_6003.xplane.pb"}) {
    const std::string path = std::string(PODPROF_FIXTURES_DIR) + "/" + name;
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "no fixture at " << path;
    auto source = trace::FileSource::Open(path);
    ASSERT_OK(source);
    absl::StatusOr<HostCapture> real = trace::ReadXSpace(**source);
    ASSERT_OK(real);
    ExpectStreamedEqualsWhole(*real);
  }
}

TEST(XSpaceExportTest, StreamingIntoAFailedStreamSaysSo) {
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  EXPECT_FALSE(WriteXSpace(TpuCapture(), &out));
}

TEST(XSpaceExportTest, RunNameIsTheUtcStartTime) {
  EXPECT_EQ(XprofRunName(kStartNs), "2023_11_14_22_13_20");
  EXPECT_EQ(XprofRunName(0), "1970_01_01_00_00_00");
}

// The device plane's stat ids as the exporter has always numbered them (its list is made of
// parts it shares with the simulated host; the order of the parts is the order of the ids).
TEST(XSpaceExportTest, DevicePlaneStatIdsKeepTheirOrder) {
  const tensorflow::profiler::XSpace space = ToXSpace(TpuCapture());
  std::vector<std::string> by_id;
  for (int64_t id = 1; space.planes(0).stat_metadata().count(id) > 0; ++id) {
    by_id.push_back(space.planes(0).stat_metadata().at(id).name());
  }
  EXPECT_EQ(by_id, (std::vector<std::string>{
                       "device_type_string", "peak_teraflops_per_second",
                       "peak_hbm_bw_gigabytes_per_second", "hlo_category", "flops",
                       "bytes_accessed", "source", "program_id", "all_reduce_unique_id",
                       "counter_value", "performance_counter_id", "global_chip_id", "symbol_id"}));
  EXPECT_EQ(static_cast<int64_t>(by_id.size()), space.planes(0).stat_metadata_size());
}

// A list made of parts numbers their stats 1..N in the order of the parts, and Add and IdOf
// agree with what Declare wrote.
TEST(PlaneStatsTest, PartsAreNumberedInOrder) {
  using Stat = trace::xspace::Stat;
  static constexpr Stat kFirst[] = {Stat::kPeakTeraflops, Stat::kFlops};
  static constexpr Stat kSecond[] = {Stat::kSource};
  constexpr PlaneStats kStats(kFirst, kSecond, kTaskEnvironmentStats);
  tensorflow::profiler::XPlane plane;
  kStats.Declare(&plane);
  ASSERT_EQ(plane.stat_metadata_size(), 5);
  EXPECT_EQ(plane.stat_metadata().at(1).name(), "peak_teraflops_per_second");
  EXPECT_EQ(plane.stat_metadata().at(3).name(), "source");
  EXPECT_EQ(plane.stat_metadata().at(5).name(), "profile_stop_time");
  EXPECT_EQ(kStats.IdOf(Stat::kSource), 3);
  EXPECT_EQ(kStats.IdOf(Stat::kProfileStartTime), 4);
  EXPECT_EQ(kStats.IdOf(Stat::kSymbolId), 0) << "not in the list";
  EXPECT_EQ(kStats.Add(plane.mutable_stats(), Stat::kFlops)->metadata_id(), 2);
}

}  // namespace
}  // namespace podprof::exporter
