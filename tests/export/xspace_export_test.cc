// The XProf exporter against podprof's own reader: a capture built here, written as an XSpace
// and read back, keeps its host, chips, timelines, kernels, collectives and counters; and the
// file is laid out as XProf expects (plane, line and stat names).
#include "export/xspace_export.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
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
  ASSERT_TRUE(out.ok()) << out.status();
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
  ASSERT_TRUE(out.ok()) << out.status();
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
  ASSERT_TRUE(out.ok()) << out.status();
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
        "counter_value"}) {
    EXPECT_EQ(stat_names.count(name), 1u) << name;
  }
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
  ASSERT_TRUE(out.ok()) << out.status();
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
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->host.name, "idle");
  EXPECT_TRUE(out->host.chips.empty());
  EXPECT_EQ(out->host.profile_start_ns, kStartNs);
  EXPECT_EQ(out->host.profile_stop_ns, kStartNs + 5);
}

TEST(XSpaceExportTest, RunNameIsTheUtcStartTime) {
  EXPECT_EQ(XprofRunName(kStartNs), "2023_11_14_22_13_20");
  EXPECT_EQ(XprofRunName(0), "1970_01_01_00_00_00");
}

}  // namespace
}  // namespace podprof::exporter
