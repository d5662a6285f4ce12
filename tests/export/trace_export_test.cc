#include "export/trace_export.h"

#include <map>
#include <set>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/perfetto_trace.pb.h"

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

TEST(PerfettoWriterTest, TracksSlicesInterningFlowsAndCounters) {
  std::ostringstream out;
  PerfettoWriter w(&out);
  w.AddHost(Host("host-a"), "clock correction 5 ns");
  w.AddHost(Host("host-b"), "failed: unreachable");
  ASSERT_TRUE(w.Finish().ok());
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
  ASSERT_TRUE(w.Finish().ok());
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
    if (e["ph"] == "C") ++c;
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"]);
  }
  EXPECT_EQ(x, 4);
  EXPECT_EQ(c, 3);
  EXPECT_EQ(threads,
            (std::set<std::string>{"chip 0 (TPU v5p) XLA Modules", "chip 0 (TPU v5p) XLA Ops"}));
  EXPECT_FALSE(w.Large());
}

}  // namespace
}  // namespace podprof::exporter
