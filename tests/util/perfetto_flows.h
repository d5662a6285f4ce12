// The flows of a Perfetto trace as podprof's writer lays them out (export/trace_export.h), read
// back for tests: each flow id's slices where it starts (TrackEvent.flow_ids on a slice's
// begin) and where it ends (terminating_flow_ids on a slice's end), each named by its host
// (process track), chip and line tracks and the slice's name and span.
#ifndef PODPROF_TESTS_UTIL_PERFETTO_FLOWS_H_
#define PODPROF_TESTS_UTIL_PERFETTO_FLOWS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/perfetto_trace.pb.h"

namespace podprof::testing {

struct PerfettoFlowEnd {
  std::string host;   // the process track's name
  std::string chip;   // the chip track's name, "chip 0 (TPU v5p)"
  std::string line;   // the slice's own track's name, "XLA Ops"
  std::string slice;  // the slice's name
  int64_t begin = 0, end = 0;
};

struct PerfettoFlow {
  std::vector<PerfettoFlowEnd> from, to;  // every slice that starts it, and that ends it
};

inline std::map<uint64_t, PerfettoFlow> PerfettoFlows(const perfetto::protos::Trace& trace) {
  struct Track {
    std::string name;
    uint64_t parent = 0;
    std::string process;
  };
  std::map<uint64_t, Track> tracks;
  std::map<uint64_t, std::string> names;
  struct Open {
    PerfettoFlowEnd end;
    std::vector<uint64_t> from;
  };
  std::map<uint64_t, std::vector<Open>> open;
  std::map<uint64_t, PerfettoFlow> out;
  auto describe = [&](uint64_t uuid, PerfettoFlowEnd* e) {
    const Track& line = tracks[uuid];
    const Track& chip = tracks[line.parent];
    e->line = line.name;
    e->chip = chip.name;
    e->host = tracks[chip.parent].process;
  };
  for (const auto& p : trace.packet()) {
    for (const auto& n : p.interned_data().event_names()) names[n.iid()] = n.name();
    if (p.has_track_descriptor()) {
      const auto& d = p.track_descriptor();
      tracks[d.uuid()] = {d.name(), d.parent_uuid(), d.process().process_name()};
    }
    if (!p.has_track_event()) continue;
    const auto& e = p.track_event();
    const int64_t t = static_cast<int64_t>(p.timestamp());
    if (e.type() == 1) {
      Open& o = open[e.track_uuid()].emplace_back();
      describe(e.track_uuid(), &o.end);
      o.end.slice = names[e.name_iid()];
      o.end.begin = t;
      o.from.assign(e.flow_ids().begin(), e.flow_ids().end());
    } else if (e.type() == 2 && !open[e.track_uuid()].empty()) {
      Open o = open[e.track_uuid()].back();
      open[e.track_uuid()].pop_back();
      o.end.end = t;
      for (uint64_t id : o.from) out[id].from.push_back(o.end);
      for (uint64_t id : e.terminating_flow_ids()) out[id].to.push_back(o.end);
    }
  }
  return out;
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_PERFETTO_FLOWS_H_
