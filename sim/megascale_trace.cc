#include "sim/megascale_trace.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace podprof::sim {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XStat;

// The plane's stat metadata, ids 1..N in this order. Names as XLA's MegaScaleStatType names
// them (docs/MEGASCALE.md 1.8); `is_last_instance` as XProf's Megascale viewer reads it.
namespace stat {
enum : int64_t {
  kGraphKey = 1,
  kInputSize,
  kTransmissionBudgetUs,
  kDelayBudgetUs,
  kActionIndex,
  kActionDurationNs,
  kIsLastInstance,
  kNetworkTransportLatencyUs,
  kBufferSizes,
};
}  // namespace stat
constexpr const char* kStatNames[] = {
    "graph_key",    "input_size",         "transmission_budget_us", "delay_budget_us",
    "action_index", "action_duration_ns", "is_last_instance",       "network_transport_latency_us",
    "buffer_sizes",
};

// Event metadata ids: the two action ends, then one action graph per chip and rendezvous.
constexpr int64_t kNetworkSendMeta = 1;
constexpr int64_t kNetworkReceiveMeta = 2;
constexpr int64_t kFirstGraphMeta = 3;
// The END events' displayed length, ps (docs/MEGASCALE.md: not the action's duration).
constexpr int64_t kEndEventPs = 1'000'000;

XStat* AddStat(XEvent* ev, int64_t id) {
  XStat* s = ev->add_stats();
  s->set_metadata_id(id);
  return s;
}

uint64_t RoundPsTo(int64_t ps, int64_t unit_ps) {
  return static_cast<uint64_t>(
      std::max<int64_t>(0, std::llround(static_cast<double>(ps) / unit_ps)));
}

// The rendezvous' names by index, from the sends of the step's program.
std::vector<std::string> RendezvousNames(const PodModel& model) {
  std::vector<std::string> names(kDcnRendezvous);
  for (const OpTemplate& op : model.ops()) {
    if (op.dcn == DcnRole::kSend && op.rendezvous >= 0 && op.rendezvous < kDcnRendezvous) {
      names[op.rendezvous] = op.rendezvous_name;
    }
  }
  return names;
}

// An event over true instants [start, end) on the device plane's timebase.
XEvent Event(const Timebase& time, int64_t meta, int64_t start_ps, int64_t end_ps) {
  XEvent ev;
  ev.set_metadata_id(meta);
  const int64_t off = time.DeviceOffsetPs(start_ps);
  ev.set_offset_ps(off);
  ev.set_duration_ps(std::max<int64_t>(0, time.DeviceOffsetPs(end_ps) - off));
  return ev;
}

}  // namespace

int64_t MegascaleDeviceId(const PodModel& model, int64_t global_chip) {
  const int64_t per_slice = model.chips_per_slice();
  return global_chip / per_slice * 100'000 + global_chip % per_slice;
}

void AddMegascaleTracePlane(const PodModel& model, const Timebase& time,
                            const std::vector<std::vector<ChipStep>>& steps, int64_t plane_id,
                            tensorflow::profiler::XSpace& space) {
  if (model.slices() <= 1) return;
  XPlane* plane = space.add_planes();
  plane->set_id(plane_id);
  plane->set_name(std::string(kMegascaleTracePlane));
  for (int64_t i = 0; i < static_cast<int64_t>(std::size(kStatNames)); ++i) {
    auto& m = (*plane->mutable_stat_metadata())[i + 1];
    m.set_id(i + 1);
    m.set_name(kStatNames[i]);
  }
  auto& metas = *plane->mutable_event_metadata();
  metas[kNetworkSendMeta].set_id(kNetworkSendMeta);
  metas[kNetworkSendMeta].set_name("NetworkSend END");
  metas[kNetworkReceiveMeta].set_id(kNetworkReceiveMeta);
  metas[kNetworkReceiveMeta].set_name("NetworkReceive END");
  const std::vector<std::string> rendezvous = RendezvousNames(model);
  for (int chip = 0; chip < model.chips(); ++chip) {
    const int64_t global = model.GlobalChipId(chip);
    const int64_t raw = MegascaleDeviceId(model, global);
    const std::string source = absl::StrCat(MegascaleDeviceId(model, model.DcnSource(global)));
    const std::string destination =
        absl::StrCat(MegascaleDeviceId(model, model.DcnDestination(global)));
    for (int r = 0; r < kDcnRendezvous; ++r) {
      const int64_t id = kFirstGraphMeta + int64_t{chip} * kDcnRendezvous + r;
      metas[id].set_id(id);
      metas[id].set_name(absl::StrCat("device_", raw, "_gid_", rendezvous[r], "_0"));
    }
    XLine* line = plane->add_lines();
    line->set_id(raw);
    line->set_name(absl::StrCat("Megascale device ", raw));
    std::vector<XEvent> events;
    for (const auto& pod_step : steps) {
      const ChipStep& cs = pod_step[chip];
      const int64_t base = cs.start_ns * 1000;
      for (const DcnTransfer& d : cs.dcn) {
        const int64_t start = base + d.send_start_ps, end = base + d.recv_done_end_ps;
        const int64_t left = base + d.left_ps, arrival = base + d.arrival_ps;
        const int64_t first = std::min({start, left - kEndEventPs, arrival - kEndEventPs});
        const int64_t last = std::max({end, left, arrival});
        if (!time.Inside(first) || last > time.true_end_ps) continue;
        const std::string key = absl::StrCat("device_", raw, "_gid_", rendezvous[d.rendezvous], "$",
                                             model.program_id(), "^i", cs.step);
        XEvent graph = Event(time, kFirstGraphMeta + int64_t{chip} * kDcnRendezvous + d.rendezvous,
                             start, end);
        AddStat(&graph, stat::kGraphKey)->set_str_value(key);
        // int64, as XProf's Megascale viewer reads input_size and action_duration_ns.
        AddStat(&graph, stat::kInputSize)->set_int64_value(d.bytes);
        AddStat(&graph, stat::kTransmissionBudgetUs)->set_uint64_value(kTransmissionBudgetUs);
        AddStat(&graph, stat::kDelayBudgetUs)->set_uint64_value(RoundPsTo(d.overlap_ps, 1'000'000));
        events.push_back(std::move(graph));

        XEvent send = Event(time, kNetworkSendMeta, left - kEndEventPs, left);
        AddStat(&send, stat::kGraphKey)->set_str_value(key);
        AddStat(&send, stat::kActionIndex)->set_int64_value(1);
        AddStat(&send, stat::kActionDurationNs)
            ->set_int64_value(static_cast<int64_t>(RoundPsTo(d.left_ps - d.send_end_ps, 1000)));
        AddStat(&send, stat::kBufferSizes)
            ->set_str_value(absl::StrCat("s", raw, "->", destination, "d|$c0=", d.bytes));
        AddStat(&send, stat::kIsLastInstance)->set_int64_value(1);
        events.push_back(std::move(send));

        XEvent receive = Event(time, kNetworkReceiveMeta, arrival - kEndEventPs, arrival);
        AddStat(&receive, stat::kGraphKey)->set_str_value(key);
        AddStat(&receive, stat::kActionIndex)->set_int64_value(2);
        AddStat(&receive, stat::kNetworkTransportLatencyUs)
            ->set_uint64_value(RoundPsTo(d.transit_ps, 1'000'000));
        AddStat(&receive, stat::kBufferSizes)
            ->set_str_value(absl::StrCat("s", source, "->", raw, "d|$c0=", d.bytes));
        AddStat(&receive, stat::kIsLastInstance)->set_int64_value(1);
        events.push_back(std::move(receive));
      }
    }
    // In time order, an enclosing event before what it encloses (a reader nests by order).
    std::stable_sort(events.begin(), events.end(), [](const XEvent& a, const XEvent& b) {
      if (a.offset_ps() != b.offset_ps()) return a.offset_ps() < b.offset_ps();
      return a.duration_ps() > b.duration_ps();
    });
    for (XEvent& ev : events) *line->add_events() = std::move(ev);
  }
}

}  // namespace podprof::sim
