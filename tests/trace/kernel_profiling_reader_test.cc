// The reader on kernel-profiling captures (docs/INTEROP.md, "Kernel profiling data"), built
// by hand in XProf's layout with the generated protobuf classes: sampled performance counters
// (a line per sample, an event per counter), the lines inside kernels, SparseCore planes and
// dropped traces.
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "proto/xplane.pb.h"
#include "tests/util/status_matchers.h"
#include "trace/byte_source.h"
#include "trace/perf_counters.h"
#include "trace/xspace_reader.h"

namespace podprof::trace {
namespace {

namespace xp = tensorflow::profiler;

// v7x registers (XProf's tpu_counter_ids_v7x.h): die 0's TensorCore cycles and MXU_BUSY_2,
// and SparseCore 0's scalar-unit cycles.
constexpr uint64_t kTcCycles = 2791874568u;
constexpr uint64_t kMxuBusy2 = 2791875032u;
constexpr uint64_t kScsCycles = 2817921032u;
constexpr uint64_t kUnknownId = 12345;
// Die 0's power manager cycle count and skipped clocks.
constexpr uint64_t kPmCycles = 2847490056u;
constexpr uint64_t kPmSkipped = 2847490064u;
constexpr int64_t kStartNs = 1'700'000'000'000'000'000;

// Names a plane's stats and events on first use, as the profiler does.
class PlaneBuilder {
 public:
  PlaneBuilder(xp::XSpace* space, const std::string& name) : plane_(space->add_planes()) {
    plane_->set_name(name);
  }
  int64_t StatId(const std::string& name) {
    auto [it, fresh] = stats_.try_emplace(name, static_cast<int64_t>(stats_.size()) + 1);
    if (fresh) (*plane_->mutable_stat_metadata())[it->second].set_name(name);
    return it->second;
  }
  xp::XEventMetadata& Meta(const std::string& name) {
    auto [it, fresh] = metas_.try_emplace(name, static_cast<int64_t>(metas_.size()) + 1);
    xp::XEventMetadata& m = (*plane_->mutable_event_metadata())[it->second];
    if (fresh) {
      m.set_id(it->second);
      m.set_name(name);
    }
    return m;
  }
  xp::XStat* AddStat(google::protobuf::RepeatedPtrField<xp::XStat>* stats,
                     const std::string& name) {
    xp::XStat* s = stats->Add();
    s->set_metadata_id(StatId(name));
    return s;
  }
  xp::XLine* Line(const std::string& name, int64_t timestamp_ns) {
    xp::XLine* line = plane_->add_lines();
    line->set_id(plane_->lines_size());
    line->set_name(name);
    line->set_timestamp_ns(timestamp_ns);
    return line;
  }
  xp::XEvent* Event(xp::XLine* line, const std::string& meta, int64_t offset_ps,
                    int64_t duration_ps = 0) {
    xp::XEvent* ev = line->add_events();
    ev->set_metadata_id(Meta(meta).id());
    ev->set_offset_ps(offset_ps);
    ev->set_duration_ps(duration_ps);
    return ev;
  }
  // A counter sample: performance_counter_id on the event unless its metadata carries it.
  void Sample(xp::XLine* line, const std::string& counter, uint64_t id, int64_t offset_ps,
              uint64_t value) {
    xp::XEvent* ev = Event(line, counter, offset_ps);
    if (!MetaHasPerfId(counter)) {
      AddStat(ev->mutable_stats(), "performance_counter_id")->set_uint64_value(id);
    }
    AddStat(ev->mutable_stats(), "counter_value")->set_uint64_value(value);
  }
  bool MetaHasPerfId(const std::string& counter) {
    for (const xp::XStat& s : Meta(counter).stats()) {
      if (s.metadata_id() == StatId("performance_counter_id")) return true;
    }
    return false;
  }
  xp::XPlane* plane() { return plane_; }

 private:
  xp::XPlane* plane_;
  std::map<std::string, int64_t> stats_, metas_;
};

// Chip 0 of a v7x host, in the layout of XProf's kernel-profiling captures: its SparseCore 1
// plane first (the TPU plane may come before or after), then the TPU plane, then a SparseCore
// plane with a word before its number, one of a chip with no TPU plane, and the Task
// Environment. Sample times: 10 us apart from 1 us into the profile.
xp::XSpace KernelProfilingCapture() {
  xp::XSpace space;
  space.add_hostnames("v7x-host");
  {
    PlaneBuilder sc(&space, "/device:TPU:0 SparseCore 1");
    sc.AddStat(sc.plane()->mutable_stats(), "dropped_traces")->set_uint64_value(3);
    xp::XLine* ops = sc.Line("Sparse Core Ops", 1000);
    sc.Event(ops, "sc_gather", 0, 4'000'000);
    for (int i = 0; i < 3; ++i) {
      sc.Sample(sc.Line("sc_gather", 1000 + 10'000 * i), "SCS_CYCLES", kScsCycles, 0,
                100 * (i + 1));
    }
  }
  PlaneBuilder tpu(&space, "/device:TPU:0");
  tpu.AddStat(tpu.plane()->mutable_stats(), "device_type_string")->set_str_value("TPU v7x");
  tpu.AddStat(tpu.plane()->mutable_stats(), "global_chip_id")->set_uint64_value(12);
  tpu.AddStat(tpu.plane()->mutable_stats(), "dropped_traces")->set_int64_value(5);
  // The cycle counter names its register on its metadata, with the descriptive stats.
  xp::XEventMetadata& cycles = tpu.Meta("CYCLES");
  tpu.AddStat(cycles.mutable_stats(), "performance_counter_id")->set_uint64_value(kTcCycles);
  tpu.AddStat(cycles.mutable_stats(), "performance_counter_description")
      ->set_str_value("TensorCore cycles");
  tpu.AddStat(cycles.mutable_stats(), "performance_counter_sets")->set_str_value("issue");
  tpu.Event(tpu.Line("XLA Ops", 0), "fusion.1", 500'000, 50'000'000);
  // Samples 0, 1 and 3 in order, then 2: out of time order. CYCLES runs in 16 bits and wraps
  // between samples 1 and 2.
  const uint64_t raw_cycles[] = {60000, 65000, 4000, 9000};
  for (int i : {0, 1, 3, 2}) {
    xp::XLine* line = tpu.Line("fusion.1", 1000 + 10'000 * i);
    tpu.Sample(line, "CYCLES", kTcCycles, 0, raw_cycles[i]);
    tpu.Sample(line, "MXU_BUSY_2", kMxuBusy2, 0, 10 * (i + 1));
    tpu.Sample(line, "NOT_IN_THE_TABLE", kUnknownId, 0, 7);
  }
  // A counter without its value.
  xp::XEvent* bare = tpu.Event(tpu.Line("fusion.1", 50'000), "MXU_BUSY_2", 0);
  tpu.AddStat(bare->mutable_stats(), "performance_counter_id")->set_uint64_value(kMxuBusy2);
  // Inside the kernel.
  tpu.Event(tpu.Line("Pallas Primitives", 1000), "dot_general", 0, 2'000'000);
  tpu.Event(tpu.Line("Source Lines", 1000), "kernel.py:10", 0, 2'000'000);
  tpu.Event(tpu.Line("LLO Instructions", 1000), "vmatmul", 10'000, 1'000);
  tpu.Event(tpu.Line("VALU Instructions", 1000), "vadd", 20'000, 1'000);
  xp::XEvent* wait = tpu.Event(tpu.Line("Tensor Core Sync Flag", 1000), "SyncWait", 0, 300'000);
  tpu.AddStat(wait->mutable_stats(), "Raw Value")->set_uint64_value(1);
  // An older-style counter: its series is named after its event, as before.
  xp::XEvent* util = tpu.Event(tpu.Line("_counters_", 1000), "mxu_busy", 0);
  tpu.AddStat(util->mutable_stats(), "counter_value")->set_double_value(0.5);
  {
    PlaneBuilder sc(&space, "/device:TPU:0 SparseCore Vector 0");
    sc.Event(sc.Line("Sparse Core Syncs", 1000), "sync", 0, 1'000'000);
  }
  {
    PlaneBuilder orphan(&space, "/device:TPU:5 SparseCore 0");
    orphan.Sample(orphan.Line("k", 0), "SCS_CYCLES", kScsCycles, 0, 1);
  }
  PlaneBuilder env(&space, "Task Environment");
  env.AddStat(env.plane()->mutable_stats(), "profile_start_time")->set_uint64_value(kStartNs);
  env.AddStat(env.plane()->mutable_stats(), "profile_stop_time")
      ->set_uint64_value(kStartNs + 1'000'000);
  return space;
}

absl::StatusOr<HostCapture> Read(const xp::XSpace& space, int scaling = 0) {
  const std::string bytes = space.SerializeAsString();
  MemorySource source(bytes);
  ReadOptions options;
  options.perf_counter_scaling = scaling;
  return ReadXSpace(source, options);
}

const CounterSeries* FindSeries(const HostCapture& c, const std::string& name) {
  for (const CounterSeries& s : c.counters) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool HasWarning(const HostCapture& c, const std::string& part) {
  for (const std::string& w : c.warnings) {
    if (absl::StrContains(w, part)) return true;
  }
  return false;
}

TEST(KernelProfilingReaderTest, SamplesBecomePerfSeriesOfTheirChip) {
  auto c = Read(KernelProfilingCapture());
  ASSERT_OK(c);
  ASSERT_EQ(c->host.chips.size(), 1u) << "SparseCore planes are no chips of their own";
  EXPECT_EQ(c->host.chips[0].generation, "v7x");
  EXPECT_EQ(c->host.chips[0].global_id, 12);

  std::set<std::string> names;
  for (const CounterSeries& s : c->counters) {
    names.insert(s.name);
    EXPECT_EQ(s.chip, 0) << s.name;
  }
  EXPECT_EQ(names,
            (std::set<std::string>{"perf/die0_tc_cycles", "perf/die0_tc_mxu_busy_2",
                                   "perf/id_12345", PerfSeriesName("v7x", kScsCycles), "mxu_busy"}))
      << "no <line>/<event> series of the samples: " << absl::StrJoin(names, ", ");
  EXPECT_EQ(PerfSeriesName("v7x", kScsCycles), "perf/die0_sc_0_scs_cycles");

  const CounterSeries* cycles = FindSeries(*c, "perf/die0_tc_cycles");
  ASSERT_NE(cycles, nullptr);
  // Sorted by time, and unwrapped at 16 bits: 4000 after 65000 is 65536 + 4000.
  EXPECT_EQ(cycles->time_ns, (std::vector<int64_t>{kStartNs + 1000, kStartNs + 11'000,
                                                   kStartNs + 21'000, kStartNs + 31'000}));
  EXPECT_EQ(cycles->value, (std::vector<double>{60000, 65000, 69536, 74536}));
  EXPECT_EQ(cycles->kind(), CounterKind::kCumulative);
  const CounterSeries* mxu = FindSeries(*c, "perf/die0_tc_mxu_busy_2");
  ASSERT_NE(mxu, nullptr);
  EXPECT_EQ(mxu->value, (std::vector<double>{10, 20, 30, 40})) << "the bare sample is dropped";
  const CounterSeries* sc = FindSeries(*c, "perf/die0_sc_0_scs_cycles");
  ASSERT_NE(sc, nullptr);
  EXPECT_EQ(sc->value, (std::vector<double>{100, 200, 300}));
  EXPECT_EQ(sc->time_ns[2], kStartNs + 21'000);
  const CounterSeries* old_style = FindSeries(*c, "mxu_busy");
  ASSERT_NE(old_style, nullptr);
  EXPECT_EQ(old_style->value, (std::vector<double>{0.5}));
  EXPECT_EQ(old_style->time_ns, (std::vector<int64_t>{kStartNs + 1000}));
}

TEST(KernelProfilingReaderTest, ScalingShiftsValuesBack) {
  auto c = Read(KernelProfilingCapture(), /*scaling=*/3);
  ASSERT_OK(c);
  const CounterSeries* cycles = FindSeries(*c, "perf/die0_tc_cycles");
  ASSERT_NE(cycles, nullptr);
  EXPECT_EQ(cycles->value, (std::vector<double>{60000 * 8, 65000 * 8, 69536 * 8, 74536 * 8}));
  const CounterSeries* old_style = FindSeries(*c, "mxu_busy");
  ASSERT_NE(old_style, nullptr);
  EXPECT_EQ(old_style->value, (std::vector<double>{0.5})) << "only perf series are scaled";
}

TEST(KernelProfilingReaderTest, WarningsNameTheChip) {
  auto c = Read(KernelProfilingCapture());
  ASSERT_OK(c);
  const std::string all = absl::StrJoin(c->warnings, "\n");
  EXPECT_TRUE(HasWarning(*c, "chip 0: the profiler dropped 8 trace events (dropped_traces)"))
      << all;
  EXPECT_TRUE(HasWarning(*c, "chip 0: 1 performance counter samples without a counter_value"))
      << all;
  EXPECT_TRUE(HasWarning(*c, "chip 0: 3 performance counter series had samples out of time order"))
      << all;
  EXPECT_TRUE(HasWarning(*c, "chip 0: 1 performance counter ids not in the v7x counter table"))
      << all;
  EXPECT_TRUE(HasWarning(*c, "\"/device:TPU:5 SparseCore 0\": no /device:TPU:5 plane")) << all;
  EXPECT_EQ(c->warnings.size(), 5u) << all;
}

TEST(KernelProfilingReaderTest, KernelDetailLinesAndSparseCoreLinesAreScopes) {
  auto c = Read(KernelProfilingCapture());
  ASSERT_OK(c);
  std::map<std::string, const EventBlock*> blocks;
  for (const EventBlock& b : c->blocks) blocks[b.line] = &b;
  const std::set<std::string> scopes = {"Pallas Primitives",
                                        "Source Lines",
                                        "LLO Instructions",
                                        "VALU Instructions",
                                        "Tensor Core Sync Flag",
                                        "SparseCore 1/Sparse Core Ops",
                                        "SparseCore 0/Sparse Core Syncs"};
  std::set<std::string> lines;
  for (const auto& [name, b] : blocks) lines.insert(name);
  std::set<std::string> want = scopes;
  want.insert("XLA Ops");
  EXPECT_EQ(lines, want) << "sample lines make no blocks: " << absl::StrJoin(lines, ", ");
  for (const std::string& name : scopes) {
    const EventBlock* b = blocks[name];
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(b->kind, LineKind::kScopes) << name;
    EXPECT_EQ(b->chip, 0) << name;
    EXPECT_EQ(b->size(), 1u) << name;
    EXPECT_EQ(c->kernels[b->kernel[0]].category, "scope") << name;
    // Stored or streamed without their plane, they stay scopes.
    EXPECT_EQ(LineKindOfName(name), LineKind::kScopes) << name;
  }
  EXPECT_EQ(c->kernels[blocks["Tensor Core Sync Flag"]->kernel[0]].name, "SyncWait");
  EXPECT_EQ(blocks["SparseCore 1/Sparse Core Ops"]->base_ns, kStartNs + 1000);
  EXPECT_EQ(blocks["XLA Ops"]->kind, LineKind::kOps);
}

TEST(KernelProfilingReaderTest, LineKindsByName) {
  EXPECT_EQ(LineKindOfName("Source code"), LineKind::kScopes);
  EXPECT_EQ(LineKindOfName("MXU0 Instructions"), LineKind::kScopes);
  EXPECT_EQ(LineKindOfName("XLA TraceMe"), LineKind::kScopes);
  EXPECT_EQ(LineKindOfName("SparseCore 3/Sparse Core Steps"), LineKind::kScopes);
  EXPECT_EQ(LineKindOfName("XLA Ops"), LineKind::kOps);
  EXPECT_EQ(LineKindOfName("SparseCore"), LineKind::kOps);
  EXPECT_EQ(LineKindOfName("Stream #3(Compute Instructions)"), LineKind::kGpuStream);
}

// Read in pieces, as the agent streams it: the same series and blocks, each piece one chip's.
TEST(KernelProfilingReaderTest, PiecesGiveTheSameSeries) {
  auto whole = Read(KernelProfilingCapture());
  ASSERT_OK(whole);
  class Collect final : public PieceSink {
   public:
    absl::Status OnHost(const Host&) override { return absl::OkStatus(); }
    absl::Status OnPlane(const HostCapture& piece, size_t) override {
      blocks.insert(blocks.end(), piece.blocks.begin(), piece.blocks.end());
      counters.insert(counters.end(), piece.counters.begin(), piece.counters.end());
      return absl::OkStatus();
    }
    std::vector<EventBlock> blocks;
    std::vector<CounterSeries> counters;
  } sink;
  const std::string bytes = KernelProfilingCapture().SerializeAsString();
  MemorySource source(bytes);
  auto rest = ReadXSpaceInPieces(source, ReadOptions(), &sink);
  ASSERT_OK(rest);
  EXPECT_EQ(rest->warnings, whole->warnings);
  ASSERT_EQ(sink.counters.size(), whole->counters.size());
  for (size_t i = 0; i < sink.counters.size(); ++i) {
    EXPECT_EQ(sink.counters[i].name, whole->counters[i].name);
    EXPECT_EQ(sink.counters[i].chip, whole->counters[i].chip);
    EXPECT_EQ(sink.counters[i].time_ns, whole->counters[i].time_ns) << sink.counters[i].name;
    EXPECT_EQ(sink.counters[i].value, whole->counters[i].value) << sink.counters[i].name;
  }
  ASSERT_EQ(sink.blocks.size(), whole->blocks.size());
  for (size_t i = 0; i < sink.blocks.size(); ++i) {
    EXPECT_EQ(sink.blocks[i].line, whole->blocks[i].line);
    EXPECT_EQ(sink.blocks[i].base_ns, whole->blocks[i].base_ns);
    EXPECT_EQ(sink.blocks[i].start_ps, whole->blocks[i].start_ps);
  }
}

// A plane's performance counter samples only make sense together, so they are not split like
// its timelines: past the piece budget the read fails naming the chip, rather than hold
// whatever the workload sent.
TEST(KernelProfilingReaderTest, PerfSamplesPastThePieceBudgetFailNamingTheChip) {
  class Drop final : public PieceSink {
   public:
    absl::Status OnHost(const Host&) override { return absl::OkStatus(); }
    absl::Status OnPlane(const HostCapture&, size_t) override { return absl::OkStatus(); }
  } sink;
  const std::string bytes = KernelProfilingCapture().SerializeAsString();
  MemorySource source(bytes);
  ReadOptions options;
  ASSERT_OK(ReadXSpaceInPieces(source, options, &sink).status());
  options.max_piece_bytes = 64;
  absl::StatusOr<HostCapture> small = ReadXSpaceInPieces(source, options, &sink);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(small.status().message(),
              ::testing::HasSubstr("chip 0's performance counter samples take"));
}

// The pod-wide id: core_details first, then global_chip_id, then device_id.
TEST(KernelProfilingReaderTest, GlobalChipIdFallbacks) {
  xp::XSpace space;
  PlaneBuilder a(&space, "/device:TPU:0");
  a.AddStat(a.plane()->mutable_stats(), "device_id")->set_int64_value(7);
  PlaneBuilder b(&space, "/device:TPU:1");
  b.AddStat(b.plane()->mutable_stats(), "device_id")->set_int64_value(8);
  b.AddStat(b.plane()->mutable_stats(), "global_chip_id")->set_uint64_value(9);
  PlaneBuilder d(&space, "/device:TPU:2");
  // CoreDetails { global_chip_id (field 5): 4 }.
  d.AddStat(d.plane()->mutable_stats(), "core_details")->set_bytes_value(std::string("\x28\x04"));
  d.AddStat(d.plane()->mutable_stats(), "global_chip_id")->set_uint64_value(9);
  PlaneBuilder e(&space, "/device:TPU:3");
  auto c = Read(space);
  ASSERT_OK(c);
  ASSERT_EQ(c->host.chips.size(), 4u);
  EXPECT_EQ(c->host.chips[0].global_id, 7);
  EXPECT_EQ(c->host.chips[1].global_id, 9);
  EXPECT_EQ(c->host.chips[2].global_id, 4);
  EXPECT_EQ(c->host.chips[3].global_id, -1);
}

// A perf counter on a chip whose generation podprof has no table for: kept by id.
TEST(KernelProfilingReaderTest, UnknownGenerationKeepsIds) {
  xp::XSpace space;
  PlaneBuilder tpu(&space, "/device:TPU:1");
  tpu.Sample(tpu.Line("k", 0), "C", kTcCycles, 0, 5);
  auto c = Read(space);
  ASSERT_OK(c);
  ASSERT_EQ(c->counters.size(), 1u);
  EXPECT_EQ(c->counters[0].name, absl::StrCat("perf/id_", kTcCycles));
  EXPECT_TRUE(HasWarning(*c, "chip 1: 1 performance counter ids not in any counter table"))
      << absl::StrJoin(c->warnings, "\n");
}

// Where a `counters_<kernel>` line's events sit against its execution: from the execution's
// start plus `shift_ps`, `duration_ps` wide (-1: the execution's).
struct LineLayout {
  int64_t shift_ps = 0;
  int64_t duration_ps = -1;
};

// A v7x chip with two executions of fusion.1 (at 0-10 us and 20-30 us), each with a
// `counters_fusion.1` line of its own counts at the execution's time (or as `layout` puts it),
// and the Task Environment.
xp::XSpace PerKernelCapture(const std::vector<std::map<uint64_t, double>>& executions,
                            LineLayout layout = {}) {
  xp::XSpace space;
  PlaneBuilder tpu(&space, "/device:TPU:0");
  tpu.AddStat(tpu.plane()->mutable_stats(), "device_type_string")->set_str_value("TPU v7x");
  xp::XLine* ops = tpu.Line("XLA Ops", 0);
  for (size_t k = 0; k < executions.size(); ++k) {
    const int64_t start_ps = static_cast<int64_t>(k) * 20'000'000;
    tpu.Event(ops, "fusion.1", start_ps, 10'000'000);
    xp::XLine* line = tpu.Line("counters_fusion.1", 0);
    for (const auto& [id, value] : executions[k]) {
      xp::XEvent* ev = tpu.Event(line, absl::StrCat("c", id), start_ps + layout.shift_ps,
                                 layout.duration_ps < 0 ? 10'000'000 : layout.duration_ps);
      tpu.AddStat(ev->mutable_stats(), "performance_counter_id")->set_uint64_value(id);
      tpu.AddStat(ev->mutable_stats(), "counter_value")->set_double_value(value);
    }
  }
  PlaneBuilder env(&space, "Task Environment");
  env.AddStat(env.plane()->mutable_stats(), "profile_start_time")->set_uint64_value(kStartNs);
  env.AddStat(env.plane()->mutable_stats(), "profile_stop_time")
      ->set_uint64_value(kStartNs + 1'000'000);
  return space;
}

// A `counters_<kernel>` line holds one execution's own counts (XProf's per-kernel layout): the
// series is a running total that steps by each execution's counts across that execution, so
// that attribution gives each execution exactly its counts, with no invented throttling.
TEST(KernelProfilingReaderTest, PerKernelLinesAreOneExecutionsCounts) {
  // 10 us at 1.9 GHz is 19000 cycles: these fit, so they are taken as they are.
  auto c = Read(PerKernelCapture(
      {{{kPmCycles, 19000}, {kMxuBusy2, 10070}}, {{kPmCycles, 15000}, {kMxuBusy2, 3150}}}));
  ASSERT_OK(c);
  const CounterSeries* mxu = FindSeries(*c, "perf/die0_tc_mxu_busy_2");
  ASSERT_NE(mxu, nullptr);
  EXPECT_EQ(mxu->kind(), CounterKind::kCumulative);
  EXPECT_EQ(mxu->time_ns, (std::vector<int64_t>{kStartNs, kStartNs + 10'000, kStartNs + 20'000,
                                                kStartNs + 30'000}));
  EXPECT_EQ(mxu->value, (std::vector<double>{0, 10070, 10070, 13220}));
  const CounterSeries* cycles = FindSeries(*c, "perf/die0_pwrmgr_cycle_count");
  ASSERT_NE(cycles, nullptr);
  EXPECT_EQ(cycles->value, (std::vector<double>{0, 19000, 19000, 34000}));
  EXPECT_FALSE(HasWarning(*c, "running totals")) << absl::StrJoin(c->warnings, "\n");
  // Not a kernel line, not a block of scopes.
  for (const EventBlock& b : c->blocks) EXPECT_NE(b.line, "counters_fusion.1");
}

// XProf's per-kernel tool gives a `counters_<kernel>` line to its kernel by name, whatever its
// time: captures put the line at the execution's end with no width (XProf's converter tests),
// or elsewhere. Each line still steps across its own execution. (The lines at the end touch
// nothing of the execution by time: they attached to no kernel before.)
TEST(KernelProfilingReaderTest, PerKernelLinesGoToTheirKernelByNameWhateverTheirTime) {
  const std::vector<std::map<uint64_t, double>> runs = {{{kPmCycles, 19000}, {kMxuBusy2, 10070}},
                                                        {{kPmCycles, 15000}, {kMxuBusy2, 3150}}};
  for (LineLayout layout : {LineLayout{10'000'000, 0}, LineLayout{15'000'000, 0},
                            LineLayout{-5'000'000, 2'000'000}, LineLayout{3'000'000, 0}}) {
    SCOPED_TRACE(absl::StrCat("shift ", layout.shift_ps, " ps, width ", layout.duration_ps));
    auto c = Read(PerKernelCapture(runs, layout));
    ASSERT_OK(c);
    const CounterSeries* mxu = FindSeries(*c, "perf/die0_tc_mxu_busy_2");
    ASSERT_NE(mxu, nullptr);
    EXPECT_EQ(mxu->time_ns, (std::vector<int64_t>{kStartNs, kStartNs + 10'000, kStartNs + 20'000,
                                                  kStartNs + 30'000}));
    EXPECT_EQ(mxu->value, (std::vector<double>{0, 10070, 10070, 13220}));
  }
}

// More lines than executions: each goes to the execution nearest it.
TEST(KernelProfilingReaderTest, ALineWithoutAnExecutionOfItsOwnGoesToTheNearest) {
  xp::XSpace space = PerKernelCapture(
      {{{kPmCycles, 19000}, {kMxuBusy2, 1000}}, {{kPmCycles, 15000}, {kMxuBusy2, 2000}}},
      LineLayout{10'000'000, 0});
  // The second execution (20-30 us) is not on the timeline: both lines go to the first.
  xp::XLine* ops = nullptr;
  for (xp::XLine& l : *space.mutable_planes(0)->mutable_lines()) {
    if (l.name() == "XLA Ops") ops = &l;
  }
  ASSERT_NE(ops, nullptr);
  ops->mutable_events()->RemoveLast();
  auto c = Read(space);
  ASSERT_OK(c);
  const CounterSeries* mxu = FindSeries(*c, "perf/die0_tc_mxu_busy_2");
  ASSERT_NE(mxu, nullptr);
  ASSERT_FALSE(mxu->time_ns.empty());
  EXPECT_EQ(mxu->time_ns.front(), kStartNs);
  EXPECT_LE(mxu->time_ns.back(), kStartNs + 10'000);
  EXPECT_EQ(mxu->value.back(), 3000);
}

// The same lines holding running totals: the second line counted 40000 cycles in 10 us, more
// than the clock allows. Each execution is then the increase over the line before, and the
// first, whose increase is unknown, is left out.
TEST(KernelProfilingReaderTest, PerKernelRunningTotalsAreDifferenced) {
  auto c = Read(PerKernelCapture({{{kPmCycles, 19000}, {kMxuBusy2, 10000}},
                                  {{kPmCycles, 40000}, {kMxuBusy2, 14000}},
                                  {{kPmCycles, 30000}, {kMxuBusy2, 20000}}}));
  ASSERT_OK(c);
  const CounterSeries* mxu = FindSeries(*c, "perf/die0_tc_mxu_busy_2");
  ASSERT_NE(mxu, nullptr);
  EXPECT_EQ(mxu->value, (std::vector<double>{0, 4000, 4000, 10000}));
  const CounterSeries* cycles = FindSeries(*c, "perf/die0_pwrmgr_cycle_count");
  ASSERT_NE(cycles, nullptr);
  EXPECT_EQ(cycles->value, (std::vector<double>{0, 21000, 21000, 21000})) << "a reset reads as 0";
  EXPECT_TRUE(HasWarning(*c, "chip 0: its counters_<kernel> lines hold running totals"))
      << absl::StrJoin(c->warnings, "\n");
  EXPECT_TRUE(HasWarning(*c, "1 running-total counters went down"))
      << absl::StrJoin(c->warnings, "\n");
}

// As XProf's tools read a counter: the id from the event, else its metadata, else the
// metadata's own id (a register address); the value from the event, else its metadata;
// negative and NaN as 0, beyond 2^64 as its maximum; any of the stat's value types.
TEST(KernelProfilingReaderTest, IdsAndValuesFromEventOrMetadataWithClamps) {
  xp::XSpace space;
  PlaneBuilder tpu(&space, "/device:TPU:0");
  tpu.AddStat(tpu.plane()->mutable_stats(), "device_type_string")->set_str_value("TPU v7x");
  tpu.Event(tpu.Line("XLA Ops", 0), "k", 0, 10'000'000);
  xp::XLine* line = tpu.Line("counters_k", 0);
  // The id on the metadata, the value on the event, as an int64.
  xp::XEventMetadata& cyc = tpu.Meta("CYCLES");
  tpu.AddStat(cyc.mutable_stats(), "performance_counter_id")->set_uint64_value(kPmCycles);
  tpu.AddStat(tpu.Event(line, "CYCLES", 0, 10'000'000)->mutable_stats(), "counter_value")
      ->set_int64_value(19000);
  // No id anywhere: the metadata's id is the register's address; the value on the metadata.
  xp::XEventMetadata& mxu = (*tpu.plane()->mutable_event_metadata())[kMxuBusy2];
  mxu.set_id(kMxuBusy2);
  mxu.set_name("MXU_BUSY_2");
  tpu.AddStat(mxu.mutable_stats(), "counter_value")->set_uint64_value(5000);
  xp::XEvent* ev = line->add_events();
  ev->set_metadata_id(kMxuBusy2);
  ev->set_duration_ps(10'000'000);
  // Clamped: a negative double, a negative int64, NaN and 2e19.
  const std::pair<uint64_t, double> clamped[] = {
      {kPmSkipped, -500}, {kTcCycles, std::nan("")}, {kMxuBusy2 - 8, 2e19}};
  for (const auto& [id, v] : clamped) {
    xp::XEvent* e = tpu.Event(line, absl::StrCat("c", id), 0, 10'000'000);
    tpu.AddStat(e->mutable_stats(), "performance_counter_id")->set_uint64_value(id);
    tpu.AddStat(e->mutable_stats(), "counter_value")->set_double_value(v);
  }
  xp::XEvent* neg = tpu.Event(line, "neg", 0, 10'000'000);
  tpu.AddStat(neg->mutable_stats(), "performance_counter_id")->set_uint64_value(kMxuBusy2 + 8);
  tpu.AddStat(neg->mutable_stats(), "counter_value")->set_int64_value(-7);
  auto c = Read(space);
  ASSERT_OK(c);
  auto last = [&](const std::string& name) {
    const CounterSeries* s = FindSeries(*c, name);
    return s == nullptr || s->value.empty() ? -1.0 : s->value.back();
  };
  EXPECT_EQ(last("perf/die0_pwrmgr_cycle_count"), 19000);
  EXPECT_EQ(last("perf/die0_tc_mxu_busy_2"), 5000);
  EXPECT_EQ(last("perf/die0_pwrmgr_clocks_skipped"), 0);
  EXPECT_EQ(last("perf/die0_tc_cycles"), 0);
  // Read as 2^64 - 1, as XProf clamps it, but no counter counts past 2^53 in one execution:
  // damage, left out (it would round every later count of the series away), and said.
  EXPECT_EQ(last(PerfSeriesName("v7x", kMxuBusy2 - 8)), -1);
  EXPECT_TRUE(HasWarning(*c, "chip 0: 1 counts of one kernel execution past 2^53"))
      << absl::StrJoin(c->warnings, "\n");
  EXPECT_EQ(last(PerfSeriesName("v7x", kMxuBusy2 + 8)), 0);
}

// Periodic samples that are counts per sample (the cycle counter's fit the time between
// samples) are summed into the running total; running totals stay as they are (above).
TEST(KernelProfilingReaderTest, PeriodicCountsPerSampleAreSummed) {
  xp::XSpace space;
  PlaneBuilder tpu(&space, "/device:TPU:0");
  tpu.AddStat(tpu.plane()->mutable_stats(), "device_type_string")->set_str_value("TPU v7x");
  for (int i = 0; i < 4; ++i) {
    xp::XLine* line = tpu.Line("counters", 10'000 * i);  // 10 us apart: at most 19000 cycles
    tpu.Sample(line, "CYCLES", kTcCycles, 0, 18000 + 100 * i);
    tpu.Sample(line, "MXU_BUSY_2", kMxuBusy2, 0, 1000);
  }
  auto c = Read(space);
  ASSERT_OK(c);
  const CounterSeries* cycles = FindSeries(*c, "perf/die0_tc_cycles");
  ASSERT_NE(cycles, nullptr);
  EXPECT_EQ(cycles->value, (std::vector<double>{18000, 36100, 54300, 72600}));
  const CounterSeries* mxu = FindSeries(*c, "perf/die0_tc_mxu_busy_2");
  ASSERT_NE(mxu, nullptr);
  EXPECT_EQ(mxu->value, (std::vector<double>{1000, 2000, 3000, 4000}));
}

// Kernels on the lines XProf treats as kernel lines besides XLA Ops.
TEST(KernelProfilingReaderTest, PallasAndLloOpsLinesHoldKernels) {
  xp::XSpace space;
  PlaneBuilder tpu(&space, "/device:TPU:0");
  tpu.AddStat(tpu.plane()->mutable_stats(), "device_type_string")->set_str_value("TPU v7x");
  tpu.Event(tpu.Line("PALLAS Kernels", 0), "flash_attention", 0, 1'000'000);
  tpu.Event(tpu.Line("Pallas Calls", 0), "matmul_kernel", 0, 1'000'000);
  tpu.Event(tpu.Line("LLO Ops", 0), "llo.fusion", 0, 1'000'000);
  tpu.Event(tpu.Line("Pallas Primitives", 0), "dot_general", 0, 1'000);
  auto c = Read(space);
  ASSERT_OK(c);
  std::map<std::string, LineKind> kinds;
  for (const EventBlock& b : c->blocks) kinds[b.line] = b.kind;
  EXPECT_EQ(kinds.at("PALLAS Kernels"), LineKind::kOps);
  EXPECT_EQ(kinds.at("Pallas Calls"), LineKind::kOps);
  EXPECT_EQ(kinds.at("LLO Ops"), LineKind::kOps);
  EXPECT_EQ(kinds.at("Pallas Primitives"), LineKind::kScopes);
  std::set<std::string> kernels;
  for (const KernelDef& k : c->kernels) kernels.insert(k.name);
  EXPECT_TRUE(kernels.count("flash_attention") && kernels.count("llo.fusion"));
}

}  // namespace
}  // namespace podprof::trace
