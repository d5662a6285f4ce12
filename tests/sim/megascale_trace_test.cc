// The Megascale runtime's action graph a simulated multi-slice host writes
// (`/device:CUSTOM:Megascale Trace`, docs/MEGASCALE.md "The runtime's action graph"): read back
// from the built XSpace and held to the pod model's DCN timing.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "gtest/gtest.h"
#include "sim/dcn_program.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "tests/util/status_matchers.h"

namespace podprof::sim {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XSpace;
using tensorflow::profiler::XStat;

constexpr char kPlane[] = "/device:CUSTOM:Megascale Trace";
constexpr int64_t kUsPs = 1'000'000;
constexpr int64_t kStartNs = 1'800'000'000'000'000'000;

PodConfig Pod(int hosts, int slices, int index) {
  PodConfig c;
  c.generation = "v5e";
  c.chips = 4;
  c.hosts = hosts;
  c.slices = slices;
  c.host_index = index;
  c.pod_seed = 11;
  return c;
}

PodModel Model(const PodConfig& c) {
  auto m = PodModel::Create(c);
  EXPECT_OK(m);
  return *std::move(m);
}

// The host's XSpace over `periods` step periods from kStartNs, device planes shifted by
// `device_offset_ns`.
XSpace Build(const PodModel& m, int periods, int64_t device_offset_ns = 0) {
  FakeClock truth(kStartNs);
  const SkewedClock host(truth, 0, 0);
  SessionWindow w;
  w.true_start_ns = kStartNs;
  w.true_end_ns = kStartNs + periods * m.step_period_ns();
  w.device_offset_ns = device_offset_ns;
  w.host_name = "sim-ms";
  return BuildXSpace(m, host, w).space;
}

const XPlane* PlaneNamed(const XSpace& space, absl::string_view name) {
  for (const auto& p : space.planes()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

// An event's stats by name, from the plane's stat metadata.
std::map<std::string, XStat> StatsOf(const XPlane& plane, const XEvent& ev) {
  std::map<std::string, XStat> out;
  for (const XStat& s : ev.stats()) out[plane.stat_metadata().at(s.metadata_id()).name()] = s;
  return out;
}

// A parsed `device_<id>_gid_<rendezvous>$<program>^i<iteration>`.
struct GraphKey {
  int64_t device = -1;
  std::string rendezvous;
  uint64_t program = 0;
  int64_t iteration = -1;
};

bool ParseGraphKey(absl::string_view key, GraphKey* out) {
  if (!absl::ConsumePrefix(&key, "device_")) return false;
  const size_t gid = key.find("_gid_"), dollar = key.rfind('$'), caret = key.rfind("^i");
  if (gid == absl::string_view::npos || dollar == absl::string_view::npos ||
      caret == absl::string_view::npos || !(gid < dollar && dollar < caret)) {
    return false;
  }
  out->rendezvous = std::string(key.substr(gid + 5, dollar - gid - 5));
  return absl::SimpleAtoi(key.substr(0, gid), &out->device) &&
         absl::SimpleAtoi(key.substr(dollar + 1, caret - dollar - 1), &out->program) &&
         absl::SimpleAtoi(key.substr(caret + 2), &out->iteration) && !out->rendezvous.empty();
}

// One rendezvous instance as the plane has it: its three events by name, with their stats.
struct Instance {
  const XEvent* graph = nullptr;
  const XEvent* send = nullptr;
  const XEvent* receive = nullptr;
  std::string graph_name;
  std::map<std::string, XStat> graph_stats, send_stats, receive_stats;
};

// The plane's instances by (raw device id, rendezvous, step); every event must belong to its
// line's device and have a key that parses.
std::map<std::tuple<int64_t, std::string, int64_t>, Instance> Instances(const PodModel& m,
                                                                        const XPlane& plane) {
  std::map<std::tuple<int64_t, std::string, int64_t>, Instance> out;
  for (const auto& line : plane.lines()) {
    int64_t raw = -1;
    EXPECT_TRUE(absl::StartsWith(line.name(), "Megascale device ")) << line.name();
    EXPECT_TRUE(absl::SimpleAtoi(absl::string_view(line.name()).substr(17), &raw)) << line.name();
    for (const XEvent& ev : line.events()) {
      const std::map<std::string, XStat> stats = StatsOf(plane, ev);
      GraphKey key;
      if (stats.count("graph_key") == 0 ||
          !ParseGraphKey(stats.at("graph_key").str_value(), &key)) {
        ADD_FAILURE() << "an event of " << line.name() << " has no graph_key that parses";
        continue;
      }
      EXPECT_EQ(key.device, raw);
      EXPECT_EQ(key.program, m.program_id());
      EXPECT_TRUE(key.rendezvous == "dcn_grads.0" || key.rendezvous == "dcn_grads.1")
          << key.rendezvous;
      Instance& in = out[{raw, key.rendezvous, key.iteration}];
      const std::string& name = plane.event_metadata().at(ev.metadata_id()).name();
      if (name == "NetworkSend END") {
        EXPECT_EQ(in.send, nullptr);
        in.send = &ev;
        in.send_stats = stats;
      } else if (name == "NetworkReceive END") {
        EXPECT_EQ(in.receive, nullptr);
        in.receive = &ev;
        in.receive_stats = stats;
      } else {
        EXPECT_EQ(in.graph, nullptr);
        in.graph = &ev;
        in.graph_name = name;
        in.graph_stats = stats;
      }
    }
  }
  return out;
}

int64_t EndOf(const XEvent& e) { return e.offset_ps() + e.duration_ps(); }

// The starts (or ends) of the device plane's events of op `name` (its display name).
std::set<int64_t> OpTimes(const XPlane& tpu, const std::string& name, bool ends = false) {
  std::set<int64_t> out;
  for (const auto& line : tpu.lines()) {
    if (line.name() != "XLA Ops") continue;
    for (const XEvent& e : line.events()) {
      if (tpu.event_metadata().at(e.metadata_id()).display_name() == name) {
        out.insert(ends ? EndOf(e) : e.offset_ps());
      }
    }
  }
  return out;
}

TEST(SimMegascaleTraceTest, OneLinePerChipThreeEventsPerInstanceOnTheDeviceTimebase) {
  // 2 hosts x 4 chips per slice; host 5 is worker 1 of slice 2, chips 4..7 of its slice.
  const PodModel m = Model(Pod(8, 4, 5));
  const int64_t shift_ns = 7'000;
  const XSpace space = Build(m, 4, shift_ns);
  const XPlane* plane = PlaneNamed(space, kPlane);
  ASSERT_NE(plane, nullptr);
  std::set<int64_t> plane_ids;
  for (const auto& p : space.planes()) plane_ids.insert(p.id());
  EXPECT_EQ(plane_ids.size(), static_cast<size_t>(space.planes_size()));  // ids are fresh
  ASSERT_EQ(plane->lines_size(), 4);
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(plane->lines(c).name(), absl::StrCat("Megascale device ", 200004 + c));
    EXPECT_EQ(plane->lines(c).timestamp_ns(),
              PlaneNamed(space, "/device:TPU:0")->lines(0).timestamp_ns());
  }
  const auto instances = Instances(m, *plane);
  // Every step wholly inside the window has both rendezvous on every chip.
  const int64_t first_whole = m.StepAt(kStartNs - 1) + 1;
  const int64_t last_whole = m.StepAt(kStartNs + 4 * m.step_period_ns()) - 1;
  ASSERT_GE(last_whole, first_whole);
  for (int64_t raw = 200004; raw < 200008; ++raw) {
    for (const char* r : {"dcn_grads.0", "dcn_grads.1"}) {
      for (int64_t k = first_whole; k <= last_whole; ++k) {
        EXPECT_TRUE(instances.count({raw, r, k})) << raw << " " << r << " " << k;
      }
    }
  }
  const int64_t window_ps = 4 * m.step_period_ns() * 1000 + shift_ns * 1000;
  for (const auto& [where, in] : instances) {
    const auto& [raw, rendezvous, step] = where;
    const std::string what = absl::StrCat(raw, " ", rendezvous, " ", step);
    ASSERT_NE(in.graph, nullptr) << what;
    ASSERT_NE(in.send, nullptr) << what;
    ASSERT_NE(in.receive, nullptr) << what;
    EXPECT_EQ(in.graph_name, absl::StrCat("device_", raw, "_gid_", rendezvous, "_0"));
    for (const XEvent* e : {in.graph, in.send, in.receive}) {
      EXPECT_GE(e->offset_ps(), shift_ns * 1000) << what;
      EXPECT_LE(EndOf(*e), window_ps) << what;
    }
    // The action graph spans the chip's send start to its recv-done end, as the device plane
    // (with its device shift) has them.
    const int chip = static_cast<int>(raw - 200004);
    const XPlane* tpu = PlaneNamed(space, absl::StrCat("/device:TPU:", chip));
    ASSERT_NE(tpu, nullptr);
    const char* channel = rendezvous == "dcn_grads.0" ? "101" : "102";
    EXPECT_TRUE(OpTimes(*tpu, absl::StrCat("send.", channel)).count(in.graph->offset_ps())) << what;
    EXPECT_TRUE(OpTimes(*tpu, absl::StrCat("recv-done.", channel), true).count(EndOf(*in.graph)))
        << what;
    EXPECT_TRUE(OpTimes(*tpu, absl::StrCat("send-done.", channel), true).count(EndOf(*in.send)))
        << what;
    EXPECT_EQ(in.send->duration_ps(), kUsPs);
    EXPECT_EQ(in.receive->duration_ps(), kUsPs);
    // The data arrived before the recv-done's copy ended.
    EXPECT_LT(EndOf(*in.receive), EndOf(*in.graph)) << what;

    EXPECT_EQ(in.graph_stats.at("input_size").int64_value(), int64_t{kDcnBytes});
    EXPECT_EQ(in.graph_stats.at("transmission_budget_us").uint64_value(), 60u);
    const uint64_t delay = in.graph_stats.at("delay_budget_us").uint64_value();
    if (rendezvous == "dcn_grads.0") {
      EXPECT_GE(delay, 60u) << what;  // the optimizer's update, about 100 us
      EXPECT_LE(delay, 150u) << what;
    } else {
      EXPECT_EQ(delay, 0u) << what;
    }
    EXPECT_EQ(in.send_stats.at("action_index").int64_value(), 1);
    EXPECT_EQ(in.send_stats.at("is_last_instance").int64_value(), 1);
    const uint64_t leave_ns =
        static_cast<uint64_t>(in.send_stats.at("action_duration_ns").int64_value());
    EXPECT_GT(leave_ns, 140'000u) << what;  // 1 MiB at 50 Gbit/s: about 168 us
    EXPECT_LT(leave_ns, 200'000u) << what;
    EXPECT_EQ(in.receive_stats.at("action_index").int64_value(), 2);
    EXPECT_EQ(in.receive_stats.at("is_last_instance").int64_value(), 1);
    // From the previous slice's chip of the same index.
    EXPECT_EQ(in.receive_stats.at("buffer_sizes").str_value(),
              absl::StrCat("s", raw - 100000, "->", raw, "d|$c0=", kDcnBytes));
    const uint64_t latency = in.receive_stats.at("network_transport_latency_us").uint64_value();
    EXPECT_GE(latency, 34u) << what;
    EXPECT_LE(latency, 46u) << what;
  }
}

// network_transport_latency_us is the arrival at the receiver less the end of the sender's
// send-done (its buffer leaving) in the model, the figure dcn_metric counts; a delayed link
// adds its 300 us to its receivers' latencies and to nobody else's.
TEST(SimMegascaleTraceTest, LatencyIsArrivalLessTheSendersSendDoneAndShowsALinkDelay) {
  PodConfig delayed = Pod(4, 4, 0);  // one host per slice
  delayed.dcn_delays.push_back({1, 300'000, INT64_MIN});
  const int64_t period = Model(delayed).step_period_ns();
  std::map<std::tuple<int, int64_t, std::string, int64_t>, uint64_t> latency;  // by config
  for (int with_delay : {0, 1}) {
    for (int host = 0; host < 4; ++host) {
      PodConfig c = with_delay ? delayed : Pod(4, 4, 0);
      c.host_index = host;
      c.step_period_ns = period;  // the same steps at the same instants with and without
      const PodModel m = Model(c);
      // The sender of this host's chips: the host of the previous slice.
      PodConfig sc = c;
      sc.host_index = (host + 3) % 4;
      const PodModel sender = Model(sc);
      const XSpace space = Build(m, 3);
      const XPlane* plane = PlaneNamed(space, kPlane);
      ASSERT_NE(plane, nullptr);
      const auto instances = Instances(m, *plane);
      ASSERT_GE(instances.size(), 4u * 2);
      for (const auto& [where, in] : instances) {
        const auto& [raw, rendezvous, step] = where;
        ASSERT_NE(in.receive, nullptr);
        const int chip = static_cast<int>(raw % 100000);
        const int r = rendezvous == "dcn_grads.0" ? 0 : 1;
        const int64_t step_from_start_ps = (step * period - kStartNs) * 1000;
        const int64_t arrival_ps =
            m.Schedule(step).dcn_arrivals[static_cast<size_t>(m.GlobalChipId(chip)) * 2 + r];
        // The receive event ends at the arrival (no device shift, no drift here).
        EXPECT_EQ(EndOf(*in.receive), step_from_start_ps + arrival_ps);
        int64_t send_done_end = -1;
        const ChipStep from = sender.Step(step)[chip];
        for (const OpRun& run : from.runs) {
          if (sender.ops()[run.op].name == (r == 0 ? "send-done.101" : "send-done.102")) {
            send_done_end = run.start_ps + run.duration_ps;
          }
        }
        ASSERT_GE(send_done_end, 0);
        const uint64_t us = in.receive_stats.at("network_transport_latency_us").uint64_value();
        const double want_us = static_cast<double>(arrival_ps - send_done_end) / kUsPs;
        EXPECT_NEAR(static_cast<double>(us), want_us, 1.0) << raw << " " << rendezvous;
        latency[{with_delay, raw, rendezvous, step}] = us;
      }
    }
  }
  int delayed_link = 0, others = 0;
  for (const auto& [key, us] : latency) {
    const auto& [with_delay, raw, rendezvous, step] = key;
    if (with_delay == 0) continue;
    auto base = latency.find({0, raw, rendezvous, step});
    if (base == latency.end()) continue;  // a window edge that moved
    if (raw / 100000 == 2) {              // receives from slice 1
      EXPECT_EQ(us, base->second + 300) << raw << " " << rendezvous << " " << step;
      ++delayed_link;
    } else {
      EXPECT_EQ(us, base->second) << raw << " " << rendezvous << " " << step;
      ++others;
    }
  }
  EXPECT_GE(delayed_link, 4 * 2);
  EXPECT_GE(others, 3 * 4 * 2);
}

TEST(SimMegascaleTraceTest, OneSliceWritesNoMegascaleTrace) {
  const PodModel m = Model(Pod(2, 1, 1));
  const XSpace space = Build(m, 3);
  EXPECT_EQ(PlaneNamed(space, kPlane), nullptr);
  ASSERT_NE(PlaneNamed(space, "/device:TPU:0"), nullptr);
}

}  // namespace
}  // namespace podprof::sim
