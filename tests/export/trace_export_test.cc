#include "export/trace_export.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/perfetto_trace.pb.h"
#include "tests/util/csv.h"
#include "tests/util/status_matchers.h"

namespace podprof::exporter {
namespace {

constexpr int64_t kBase = 1'800'000'000'000'000'000;  // ns since the epoch

// One host, one chip: a module run enclosing two ops (the second outlasts the module by 1 us),
// a step, and a counter with three samples.
trace::HostCapture Host(const std::string& name) {
  trace::HostCapture c;
  c.host.name = name;
  trace::Chip chip;
  chip.ordinal = 0;
  chip.device_type = "TPU v5p";
  c.host.chips.push_back(chip);
  c.kernels.resize(3);
  c.kernels[0].name = "jit_step";
  c.kernels[1].name = "fusion.1";
  c.kernels[1].category = "convolution fusion";
  c.kernels[1].flops = 1000;
  c.kernels[1].program_id = 7;
  c.kernels[2].name = "all-reduce.0";
  trace::EventBlock modules;
  modules.line = "XLA Modules";
  modules.base_ns = kBase;
  modules.start_ps = {0};
  modules.duration_ps = {10'000'000};  // 10 us
  modules.kernel = {0};
  modules.collective = {0};
  trace::EventBlock ops;
  ops.line = "XLA Ops";
  ops.base_ns = kBase;
  ops.start_ps = {1'000'500, 4'000'000, 6'000'000};  // 1.0005 us: sub-us precision survives
  ops.duration_ps = {2'000'000, 1'000'000, 5'000'000};
  ops.kernel = {1, 1, 2};
  ops.collective = {0, 0, 99};
  c.blocks = {modules, ops};
  trace::CounterSeries s;
  s.name = "duty_cycle_percent";
  s.time_ns = {kBase, kBase + 5'000, kBase + 10'000};
  s.value = {10, 50.5, 90};
  c.counters.push_back(s);
  return c;
}

// A Pallas kernel and its named scopes, as a capture stores them: the kernel's block and the
// scopes' block start at different ns, times in ps. Relative to kBase: kernel [3.9, 14.0) ns;
// scope a [4.0, 9.0), b [8.999, 11.0) (overlapping a by 1 ps, as clock mapping leaves
// neighbours), c [11.0, 14.0) (ending with the kernel). Rounded to ns separately (begin, then
// duration) the kernel would end at 13 and c at 14, and b would begin inside a and outlast it.
trace::HostCapture ScopedKernel() {
  trace::HostCapture c;
  c.host.name = "host-s";
  trace::Chip chip;
  chip.ordinal = 0;
  chip.device_type = "TPU v5p";
  c.host.chips.push_back(chip);
  c.kernels.resize(4);
  c.kernels[0].name = "pallas";
  c.kernels[1].name = "pallas/a";
  c.kernels[2].name = "pallas/b";
  c.kernels[3].name = "pallas/c";
  trace::EventBlock ops;
  ops.line = "XLA Ops";
  ops.base_ns = kBase + 3;
  ops.start_ps = {900};
  ops.duration_ps = {10'100};
  ops.kernel = {0};
  ops.collective = {0};
  trace::EventBlock scopes;
  scopes.line = "XLA TraceMe";
  scopes.kind = trace::LineKind::kScopes;
  scopes.base_ns = kBase + 4;
  scopes.start_ps = {0, 4'999, 7'000};
  scopes.duration_ps = {5'000, 2'001, 3'000};
  scopes.kernel = {1, 2, 3};
  scopes.collective = {0, 0, 0};
  c.blocks = {ops, scopes};
  return c;
}

// A slice as a viewer stacks it: its track, name, span (ns) and the slice it sits in.
struct Stacked {
  std::string track, name, parent;
  int64_t begin, end;
};

// Stacks each track's slices as a viewer does (start order, longer first), and fails where one
// starts inside another and ends after it.
std::vector<Stacked> StackAndCheckNesting(std::vector<Stacked> slices) {
  std::sort(slices.begin(), slices.end(), [](const Stacked& a, const Stacked& b) {
    return std::tie(a.track, a.begin, b.end) < std::tie(b.track, b.begin, a.end);
  });
  std::vector<const Stacked*> open;
  for (Stacked& s : slices) {
    while (!open.empty() && (open.back()->track != s.track || open.back()->end <= s.begin)) {
      open.pop_back();
    }
    if (!open.empty()) {
      EXPECT_LE(s.end, open.back()->end)
          << s.name << " ends after " << open.back()->name << ", in which it starts";
      s.parent = open.back()->name;
    }
    open.push_back(&s);
  }
  return slices;
}

std::map<std::string, std::string> ParentOf(const std::vector<Stacked>& slices) {
  std::map<std::string, std::string> out;
  for (const Stacked& s : slices) out[s.name] = s.parent;
  return out;
}

// The slices of a Perfetto trace, from its begin and end events.
std::vector<Stacked> PerfettoSlices(const perfetto::protos::Trace& trace) {
  std::map<uint64_t, std::string> iids;
  std::map<uint64_t, std::vector<Stacked>> open;
  std::vector<Stacked> out;
  for (const auto& p : trace.packet()) {
    for (const auto& n : p.interned_data().event_names()) iids[n.iid()] = n.name();
    if (!p.has_track_event()) continue;
    const auto& e = p.track_event();
    const int64_t t = static_cast<int64_t>(p.timestamp());
    if (e.type() == 1) {
      open[e.track_uuid()].push_back(
          {std::to_string(e.track_uuid()), iids[e.name_iid()], "", t, 0});
    } else if (e.type() == 2) {
      EXPECT_FALSE(open[e.track_uuid()].empty());
      if (open[e.track_uuid()].empty()) continue;
      out.push_back(open[e.track_uuid()].back());
      out.back().end = t;
      open[e.track_uuid()].pop_back();
    }
  }
  return out;
}

// The "X" slices of a Chrome JSON trace, in ns from its origin.
std::vector<Stacked> ChromeSlices(const nlohmann::json& j) {
  std::vector<Stacked> out;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const int64_t ts = std::llround(e["ts"].get<double>() * 1000);
    const int64_t dur = std::llround(e["dur"].get<double>() * 1000);
    out.push_back({absl::StrCat(e["pid"].get<int>(), "/", e["tid"].get<int>()),
                   e["name"].get<std::string>(), "", ts, ts + dur});
  }
  return out;
}

TEST(PerfettoWriterTest, TracksSlicesInterningFlowsAndCounters) {
  std::ostringstream out;
  PerfettoWriter w(&out);
  w.AddHost(Host("host-a"), "clock correction 5 ns");
  w.AddHost(Host("host-b"), "failed: unreachable");
  ASSERT_OK(w.Finish());
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(out.str()));
  EXPECT_EQ(w.counts().hosts, 2u);
  EXPECT_EQ(w.counts().slices, 8u);
  EXPECT_EQ(w.counts().counter_samples, 6u);
  EXPECT_EQ(w.counts().flow_events, 2u);

  std::map<uint64_t, std::string> iids;
  std::map<uint64_t, std::vector<uint64_t>> open;        // per track: begin times not yet ended
  std::vector<std::pair<uint64_t, uint64_t>> op_slices;  // (begin, end) on XLA Ops tracks
  std::map<uint64_t, std::string> track_names;
  int processes = 0, counters = 0, cleared = 0;
  for (const auto& p : trace.packet()) {
    cleared += (p.sequence_flags() & 1) != 0;
    for (const auto& n : p.interned_data().event_names()) {
      EXPECT_EQ(iids.count(n.iid()), 0u) << "interned twice: " << n.name();
      iids[n.iid()] = n.name();
    }
    if (p.has_track_descriptor()) {
      const auto& t = p.track_descriptor();
      track_names[t.uuid()] = t.name();
      processes += t.has_process();
      if (t.has_process() && t.process().process_name() == "host-b") {
        EXPECT_EQ(t.description(), "failed: unreachable");
      }
    }
    if (!p.has_track_event()) continue;
    const auto& e = p.track_event();
    if (e.type() == 1) {
      EXPECT_EQ(p.sequence_flags(), 2u);
      ASSERT_TRUE(iids.count(e.name_iid())) << "a name used before it was interned";
      open[e.track_uuid()].push_back(p.timestamp());
      if (iids[e.name_iid()] == "fusion.1") {
        bool has_flops = false;
        for (const auto& a : e.debug_annotations())
          has_flops |= a.name() == "flops" && a.int_value() == 1000;
        EXPECT_TRUE(has_flops);
      }
    } else if (e.type() == 2) {
      ASSERT_FALSE(open[e.track_uuid()].empty());
      if (track_names[e.track_uuid()] == "XLA Ops") {
        op_slices.push_back({open[e.track_uuid()].back(), p.timestamp()});
      }
      open[e.track_uuid()].pop_back();
    } else if (e.type() == 4) {
      ++counters;
    }
  }
  EXPECT_EQ(cleared, 1);
  EXPECT_EQ(processes, 2);
  EXPECT_EQ(counters, 6);
  EXPECT_EQ(iids.size(), 3u);  // jit_step, fusion.1, all-reduce.0: once for both hosts
  for (const auto& [track, begins] : open) EXPECT_TRUE(begins.empty());
  ASSERT_EQ(op_slices.size(), 6u);
  EXPECT_EQ(op_slices[0].first, static_cast<uint64_t>(kBase + 1000));  // 1.0005 us -> 1000 ns
  EXPECT_EQ(op_slices[0].second, static_cast<uint64_t>(kBase + 3000));
}

TEST(ChromeJsonWriterTest, MicrosecondsFromTheOriginNamesAndCounters) {
  std::ostringstream out;
  ChromeJsonWriter w(&out, kBase);
  w.AddHost(Host("host-a"), "");
  ASSERT_OK(w.Finish());
  nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["otherData"]["origin_unix_ns"].get<int64_t>(), kBase);
  int x = 0, c = 0;
  std::set<std::string> threads;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      ++x;
      if (e["name"] == "fusion.1" && e["ts"].get<double>() < 2) {
        EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.0);  // ns are the third decimal
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 2.0);
        EXPECT_EQ(e["args"]["category"], "convolution fusion");
        EXPECT_EQ(e["args"]["program_id"], 7);
      }
      if (e["name"] == "all-reduce.0") {
        EXPECT_EQ(e["args"]["collective_id"], 99);
      }
    }
    if (e["ph"] == "C") {
      ++c;
      // Named like the chip's threads.
      EXPECT_EQ(e["name"], "chip 0 (TPU v5p) duty_cycle_percent");
    }
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"]);
  }
  EXPECT_EQ(x, 4);
  EXPECT_EQ(c, 3);
  EXPECT_EQ(threads,
            (std::set<std::string>{"chip 0 (TPU v5p) XLA Modules", "chip 0 (TPU v5p) XLA Ops"}));
  EXPECT_FALSE(w.Large());
}

// Rounding ps to ns keeps a Pallas kernel's scopes inside it and beside each other: every
// scope's parent is the kernel, none ends after it.
TEST(PerfettoWriterTest, ScopesNestInTheirKernelAfterRounding) {
  std::ostringstream out;
  PerfettoWriter w(&out);
  w.AddHost(ScopedKernel(), "");
  ASSERT_OK(w.Finish());
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(out.str()));
  const std::vector<Stacked> slices = StackAndCheckNesting(PerfettoSlices(trace));
  ASSERT_EQ(slices.size(), 4u);
  EXPECT_EQ(
      ParentOf(slices),
      (std::map<std::string, std::string>{
          {"pallas", ""}, {"pallas/a", "pallas"}, {"pallas/b", "pallas"}, {"pallas/c", "pallas"}}));
  for (const Stacked& s : slices) {
    if (s.name == "pallas") {
      EXPECT_EQ(s.begin, kBase + 3);  // 3.9 ns: instants round down
      EXPECT_EQ(s.end, kBase + 14);   // 14.0 ns, not 3 + 10
    }
    if (s.name == "pallas/b") {
      EXPECT_EQ(s.begin, kBase + 8) << "begins stay where they were";
    }
  }
}

// Counter tracks say what their values are in, from the counter's name.
TEST(PerfettoWriterTest, CounterTracksCarryUnits) {
  trace::HostCapture c = Host("host-a");
  c.counters.clear();
  for (const char* name : {"vdd_core_energy_nj", "tpu.runtime.hbm.memory.usage.bytes",
                           "tpu.runtime.tensorcore.dutycycle.percent", "stall_hbm_cycles",
                           "kernel_time_us", "mxu_busy"}) {
    trace::CounterSeries s;
    s.name = name;
    s.time_ns = {kBase};
    s.value = {1};
    c.counters.push_back(s);
  }
  std::ostringstream out;
  PerfettoWriter w(&out);
  w.AddHost(c, "");
  ASSERT_OK(w.Finish());
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(out.str()));
  // name -> (unit, unit name, multiplier)
  std::map<std::string, std::tuple<int, std::string, int64_t>> units;
  for (const auto& p : trace.packet()) {
    if (!p.has_track_descriptor() || !p.track_descriptor().has_counter()) continue;
    const auto& counter = p.track_descriptor().counter();
    units[p.track_descriptor().name()] = {counter.unit(), counter.unit_name(),
                                          counter.unit_multiplier()};
  }
  using U = std::tuple<int, std::string, int64_t>;
  EXPECT_EQ(units, (std::map<std::string, U>{
                       {"vdd_core_energy_nj", U{0, "nJ", 0}},
                       {"tpu.runtime.hbm.memory.usage.bytes", U{3, "", 0}},  // UNIT_SIZE_BYTES
                       {"tpu.runtime.tensorcore.dutycycle.percent", U{0, "%", 0}},
                       {"stall_hbm_cycles", U{2, "", 0}},   // UNIT_COUNT
                       {"kernel_time_us", U{1, "", 1000}},  // UNIT_TIME_NS, x1000
                       {"mxu_busy", U{0, "fraction", 0}},   // the share of time busy
                   }));
}

// Sampled performance counters are counter tracks under their chip's track, counted.
TEST(PerfettoWriterTest, PerfSeriesNestUnderTheirChip) {
  trace::HostCapture c = Host("host-a");
  trace::Chip second;
  second.ordinal = 1;
  second.device_type = "TPU v7x";
  c.host.chips.push_back(second);
  for (int chip : {0, 1}) {
    trace::CounterSeries s;
    s.chip = chip;
    s.name = "perf/die0_tc_mxu_busy_2";
    s.time_ns = {kBase, kBase + 1000};
    s.value = {10, 20};
    c.counters.push_back(s);
  }
  std::ostringstream out;
  PerfettoWriter w(&out);
  w.AddHost(c, "");
  ASSERT_OK(w.Finish());
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(out.str()));
  std::map<uint64_t, const perfetto::protos::TrackDescriptor*> tracks;
  for (const auto& p : trace.packet()) {
    if (p.has_track_descriptor()) tracks[p.track_descriptor().uuid()] = &p.track_descriptor();
  }
  std::map<uint64_t, std::vector<double>> values;  // counter track -> samples
  for (const auto& p : trace.packet()) {
    if (p.has_track_event() && p.track_event().type() == 4) {
      values[p.track_event().track_uuid()].push_back(p.track_event().double_counter_value());
    }
  }
  std::set<std::string> parents;
  for (const auto& [uuid, t] : tracks) {
    if (t->name() != "perf/die0_tc_mxu_busy_2") continue;
    ASSERT_TRUE(t->has_counter());
    EXPECT_EQ(t->counter().unit(), 2) << "UNIT_COUNT: a register counts";
    ASSERT_TRUE(tracks.count(t->parent_uuid()));
    const auto* chip = tracks[t->parent_uuid()];
    parents.insert(chip->name());
    ASSERT_TRUE(tracks.count(chip->parent_uuid()));
    EXPECT_EQ(tracks[chip->parent_uuid()]->process().process_name(), "host-a");
    EXPECT_EQ(values[uuid], (std::vector<double>{10, 20}));
  }
  EXPECT_EQ(parents, (std::set<std::string>{"chip 0 (TPU v5p)", "chip 1 (TPU v7x)"}));
}

// In a Chrome trace a chip's perf series are counters of its host named after the chip.
TEST(ChromeJsonWriterTest, PerfSeriesAreNamedAfterTheirChip) {
  trace::HostCapture c = Host("host-a");
  c.counters.clear();
  trace::CounterSeries s;
  s.name = "perf/die0_tc_cycles";
  s.time_ns = {kBase + 1000};
  s.value = {65536};
  c.counters.push_back(s);
  std::ostringstream out;
  ChromeJsonWriter w(&out, kBase);
  w.AddHost(c, "");
  ASSERT_OK(w.Finish());
  nlohmann::json j = nlohmann::json::parse(out.str());
  int counters = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "C") continue;
    ++counters;
    EXPECT_EQ(e["name"], "chip 0 (TPU v5p) perf/die0_tc_cycles");
    EXPECT_EQ(e["pid"], 1);
    EXPECT_EQ(e["args"]["value"].get<double>(), 65536);
  }
  EXPECT_EQ(counters, 1);
}

// The trace says its timestamps are wall-clock time: its first packet clears the sequence's
// state, makes REALTIME the clock of every later packet, and snapshots REALTIME and BOOTTIME
// (Perfetto's default trace clock) at the same reading.
TEST(PerfettoWriterTest, ClockSnapshotMakesTimestampsRealtime) {
  trace::HostCapture c = Host("host-a");
  c.host.profile_start_ns = kBase - 5;
  std::ostringstream out;
  PerfettoWriter w(&out);
  w.AddHost(c, "");
  w.AddHost(Host("host-b"), "");
  ASSERT_OK(w.Finish());
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(out.str()));
  ASSERT_GT(trace.packet_size(), 0);
  const auto& first = trace.packet(0);
  EXPECT_EQ(first.sequence_flags(), 1u);
  EXPECT_EQ(first.trusted_packet_sequence_id(), 1u);
  ASSERT_TRUE(first.has_trace_packet_defaults());
  EXPECT_EQ(first.trace_packet_defaults().timestamp_clock_id(), 1u);  // BUILTIN_CLOCK_REALTIME
  ASSERT_TRUE(first.has_clock_snapshot());
  std::map<uint32_t, uint64_t> clocks;
  for (const auto& clock : first.clock_snapshot().clocks())
    clocks[clock.clock_id()] = clock.timestamp();
  EXPECT_EQ(clocks, (std::map<uint32_t, uint64_t>{{1, kBase - 5}, {6, kBase - 5}}));
  int snapshots = 0;
  for (const auto& p : trace.packet()) {
    snapshots += p.has_clock_snapshot();
    EXPECT_EQ(p.trusted_packet_sequence_id(), 1u) << "the defaults hold on their sequence";
    if (p.has_timestamp()) {
      EXPECT_EQ(p.sequence_flags(), 2u) << "a timed packet uses the sequence's defaults";
      EXPECT_FALSE(p.has_timestamp_clock_id());
    }
  }
  EXPECT_EQ(snapshots, 1);
}

// After rounding to whole ns no slice ends after the slice it starts in, on any thread: a
// kernel's scopes are its children, neighbours that overlapped by 1 ps are siblings.
TEST(ChromeJsonWriterTest, NoChildEndsAfterItsParentAfterRounding) {
  std::ostringstream out;
  ChromeJsonWriter w(&out, kBase);
  w.AddHost(ScopedKernel(), "");
  w.AddHost(Host("host-a"), "");
  ASSERT_OK(w.Finish());
  const nlohmann::json j = nlohmann::json::parse(out.str());
  const std::vector<Stacked> slices = StackAndCheckNesting(ChromeSlices(j));
  const auto parent = ParentOf(slices);
  for (const char* scope : {"pallas/a", "pallas/b", "pallas/c"}) {
    EXPECT_EQ(parent.at(scope), "pallas") << scope;
  }
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "pallas") {
      EXPECT_EQ(e["ts"].get<double>(), 0.003);
      EXPECT_EQ(e["dur"].get<double>(), 0.011);  // 3 ns to 14 ns
    }
  }
}

// A collective's slices on different hosts are joined by one flow: a start on the earlier
// slice, an end bound to the enclosing slice on the later, both inside their slice.
TEST(ChromeJsonWriterTest, FlowsJoinACollectiveAcrossHosts) {
  std::ostringstream out;
  ChromeJsonWriter w(&out, kBase);
  trace::HostCapture late = Host("host-b");
  for (auto& b : late.blocks) b.base_ns += 2'000;  // its all-reduce starts 2 us later
  w.AddHost(Host("host-a"), "");
  w.AddHost(late, "");
  ASSERT_OK(w.Finish());
  EXPECT_EQ(w.counts().flow_events, 2u);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  std::map<std::string, std::pair<int64_t, int64_t>> collective_slice;  // "pid/tid" -> span
  std::vector<nlohmann::json> flows;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X" && e["args"].contains("collective_id")) {
      const int64_t ts = std::llround(e["ts"].get<double>() * 1000);
      collective_slice[absl::StrCat(e["pid"].get<int>(), "/", e["tid"].get<int>())] = {
          ts, ts + std::llround(e["dur"].get<double>() * 1000)};
    }
    if (e["ph"] == "s" || e["ph"] == "t" || e["ph"] == "f") flows.push_back(e);
  }
  ASSERT_EQ(flows.size(), 2u);
  std::sort(flows.begin(), flows.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  EXPECT_EQ(flows[0]["ph"], "s");
  EXPECT_EQ(flows[1]["ph"], "f");
  EXPECT_EQ(flows[1]["bp"], "e");
  EXPECT_FALSE(flows[0].contains("bp"));
  EXPECT_EQ(flows[0]["pid"], 1);
  EXPECT_EQ(flows[1]["pid"], 2);
  for (const auto& f : flows) {
    EXPECT_EQ(f["id"], "0x63");  // collective 99
    EXPECT_EQ(f["cat"], flows[0]["cat"]);
    EXPECT_EQ(f["name"], flows[0]["name"]);
    const auto span =
        collective_slice.at(absl::StrCat(f["pid"].get<int>(), "/", f["tid"].get<int>()));
    const int64_t ts = std::llround(f["ts"].get<double>() * 1000);
    EXPECT_GT(ts, span.first) << "inside its slice, not on an edge a neighbour shares";
    EXPECT_LT(ts, span.second);
  }
}

// Host("host-a") with a step, an op of chip 2 (listed before chip 0) and a second XLA Ops block
// whose op, named with a comma and quotes, starts at the same ps instant as the first fusion.1
// (from another base) and lasts longer.
trace::HostCapture CsvHost() {
  trace::HostCapture c = Host("host-a");
  trace::Chip chip;
  chip.ordinal = 2;
  c.host.chips.insert(c.host.chips.begin(), chip);  // index 0 is now chip 2
  for (auto& b : c.blocks) b.chip = 1;
  c.kernels.push_back({});
  c.kernels.back().name = "fusion,\"q\"";
  c.kernels.back().module = "jit_step";
  c.kernels.push_back({});
  c.kernels.back().name = "12";
  c.kernels.back().category = "step";
  trace::EventBlock more;
  more.chip = 1;
  more.line = "XLA Ops";
  more.base_ns = kBase + 1;
  more.start_ps = {999'500};  // kBase + 1000.5 ns, as fusion.1's
  more.duration_ps = {3'000'000};
  more.kernel = {3};
  more.collective = {0};
  trace::EventBlock steps = more;
  steps.line = "Steps";
  steps.kind = trace::LineKind::kSteps;
  steps.start_ps = {-1};  // kBase + 1 ns - 1 ps: kBase ns, rounded down
  steps.duration_ps = {20'000'000};
  steps.kernel = {4};
  trace::EventBlock other = more;
  other.chip = 0;
  other.start_ps = {0};
  other.duration_ps = {500};
  other.kernel = {2};
  other.collective = {18'446'744'073'709'551'615u};  // all 64 bits, as a decimal
  c.blocks.push_back(more);
  c.blocks.push_back(steps);
  c.blocks.push_back(other);
  return c;
}

TEST(CsvWriterTest, ARowPerEventByChipLineAndStart) {
  std::ostringstream out;
  CsvWriter w(&out);
  w.AddHost(CsvHost());
  ASSERT_OK(w.Finish());
  const std::string b = absl::StrCat(kBase);
  auto at = [](int64_t ns) { return absl::StrCat(kBase + ns); };
  EXPECT_EQ(out.str(),
            absl::StrCat(
                "host,chip,line,kernel,module,start_ns,duration_ps,collective_id,category,"
                "program_id,flops,bytes_accessed\n",
                "host-a,0,Steps,12,,", b, ",20000000,,step,,,\n", "host-a,0,XLA Modules,jit_step,,",
                b, ",10000000,,,,,\n",
                // Equal starts: the longer first.
                "host-a,0,XLA Ops,\"fusion,\"\"q\"\"\",jit_step,", at(1000), ",3000000,,,,,\n",
                "host-a,0,XLA Ops,fusion.1,,", at(1000), ",2000000,,convolution fusion,7,1000,\n",
                "host-a,0,XLA Ops,fusion.1,,", at(4000), ",1000000,,convolution fusion,7,1000,\n",
                "host-a,0,XLA Ops,all-reduce.0,,", at(6000), ",5000000,99,,,,\n",
                // Chips by ordinal, not by their place in the host's list.
                "host-a,2,XLA Ops,all-reduce.0,,", at(1), ",500,18446744073709551615,,,,\n"));
  EXPECT_EQ(w.counts().hosts, 1u);
  EXPECT_EQ(w.counts().slices, 7u);
  EXPECT_EQ(w.counts().counter_samples, 0u);
}

// Every Perfetto slice is a row starting where the slice begins, scopes included (they keep
// their own line), however the viewers' tracks trimmed the slices' ends.
TEST(CsvWriterTest, StartsAreThePerfettoSlicesBegins) {
  std::ostringstream csv, pftrace;
  CsvWriter w(&csv);
  PerfettoWriter p(&pftrace);
  for (const trace::HostCapture& c : {CsvHost(), ScopedKernel()}) {
    w.AddHost(c);
    p.AddHost(c, "");
  }
  ASSERT_OK(w.Finish());
  ASSERT_OK(p.Finish());
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(pftrace.str()));
  std::vector<int64_t> begins, starts;
  for (const Stacked& s : PerfettoSlices(trace)) begins.push_back(s.begin);
  std::set<std::string> lines;
  std::istringstream rows(csv.str());
  std::string row;
  std::getline(rows, row);  // the header
  while (std::getline(rows, row)) {
    const std::vector<std::string> f = testing::CsvFields(row);
    ASSERT_EQ(f.size(), 12u) << row;
    starts.push_back(std::stoll(f[5]));
    lines.insert(f[2]);
  }
  std::sort(begins.begin(), begins.end());
  std::sort(starts.begin(), starts.end());
  EXPECT_EQ(starts, begins);
  EXPECT_EQ(w.counts().slices, p.counts().slices);
  EXPECT_EQ(lines, (std::set<std::string>{"Steps", "XLA Modules", "XLA Ops", "XLA TraceMe"}));
}

}  // namespace
}  // namespace podprof::exporter
