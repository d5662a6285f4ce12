#include "tests/util/export_checker.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/unknown_field_set.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "proto/perfetto_trace.pb.h"
#include "proto/xplane.pb.h"

namespace podprof::testing {

void ExportCheck::Add(const std::string& rule, const std::string& example) {
  const uint64_t n = ++per_rule[rule];
  if (n <= kExamplesPerRule) problems.push_back(absl::StrCat(rule, ": ", example));
}

std::string ExportCheck::Summary() const {
  std::string out;
  for (const std::string& p : problems) absl::StrAppend(&out, p, "\n");
  for (const auto& [rule, n] : per_rule) {
    if (n > kExamplesPerRule) absl::StrAppend(&out, rule, ": ", n - kExamplesPerRule, " more\n");
  }
  return out;
}

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// Fields the schema does not know, anywhere in `m`: the viewer would drop them.
void FindUnknownFields(const Message& m, const std::string& path, ExportCheck* check) {
  const auto* r = m.GetReflection();
  if (!r->GetUnknownFields(m).empty()) check->Add("unknown fields", path);
  std::vector<const FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i) {
        FindUnknownFields(r->GetRepeatedMessage(m, f, i), path + "." + f->name(), check);
      }
    } else {
      FindUnknownFields(r->GetMessage(m, f), path + "." + f->name(), check);
    }
  }
}

// Perfetto's TrackEvent types and sequence flags (track_event.proto, trace_packet.proto).
constexpr int kSliceBegin = 1, kSliceEnd = 2, kCounter = 4;
constexpr uint32_t kIncrementalStateCleared = 1, kNeedsIncrementalState = 2;
constexpr uint32_t kRealtimeClock = 1;

struct PerfettoTrack {
  bool counter = false;
  std::vector<uint64_t> open;  // begin times of the open slices
  uint64_t last_ts = 0;
};

void CheckTrackEvent(const perfetto::protos::TracePacket& p, size_t i,
                     std::map<uint64_t, PerfettoTrack>& tracks, const std::set<uint64_t>& iids,
                     std::map<uint64_t, int>& flow_slices, ExportCheck* c) {
  const auto& ev = p.track_event();
  const std::string at = absl::StrCat("packet ", i, " at ", p.timestamp());
  auto t = tracks.find(ev.track_uuid());
  if (t == tracks.end()) {
    c->Add("event on an undeclared track", at);
    return;
  }
  PerfettoTrack& track = t->second;
  if (p.timestamp() < track.last_ts) c->Add("events out of time order on a track", at);
  track.last_ts = std::max(track.last_ts, p.timestamp());
  if (ev.type() == kCounter) {
    if (!track.counter) c->Add("counter value on a slice track", at);
    ++c->counter_samples;
    return;
  }
  if (track.counter) c->Add("slice on a counter track", at);
  if (ev.type() == kSliceBegin) {
    if (ev.has_name_iid() && iids.count(ev.name_iid()) == 0) {
      c->Add("interned name used before it is defined", at);
    }
    if (ev.has_name_iid() && (p.sequence_flags() & kNeedsIncrementalState) == 0 && i > 0) {
      c->Add("interned name on a packet that does not ask for incremental state", at);
    }
    track.open.push_back(p.timestamp());
    ++c->slices;
    for (uint64_t id : ev.flow_ids()) ++flow_slices[id];
  } else if (ev.type() == kSliceEnd) {
    if (track.open.empty()) {
      c->Add("slice end without a begin", at);
    } else {
      track.open.pop_back();
    }
  }
}

}  // namespace

ExportCheck CheckPerfetto(const std::string& bytes) {
  ExportCheck c;
  perfetto::protos::Trace trace;
  if (!trace.ParseFromString(bytes)) {
    c.Add("not a Trace", absl::StrCat(bytes.size(), " bytes"));
    return c;
  }
  FindUnknownFields(trace, "Trace", &c);
  std::map<uint64_t, PerfettoTrack> tracks;
  std::set<uint64_t> iids;
  std::map<uint64_t, int> flow_slices;
  std::set<uint32_t> sequences;
  bool realtime = false;
  for (int i = 0; i < trace.packet_size(); ++i) {
    const auto& p = trace.packet(i);
    if (p.has_trusted_packet_sequence_id()) sequences.insert(p.trusted_packet_sequence_id());
    if (i == 0 && (p.sequence_flags() & kIncrementalStateCleared) == 0) {
      c.Add("first packet does not clear the incremental state", "packet 0");
    }
    for (const auto& clock : p.clock_snapshot().clocks()) {
      realtime = realtime || clock.clock_id() == kRealtimeClock;
    }
    for (const auto& n : p.interned_data().event_names()) iids.insert(n.iid());
    if (p.has_track_descriptor()) {
      const auto& d = p.track_descriptor();
      if (tracks.count(d.uuid()) > 0) c.Add("track declared twice", absl::StrCat(d.uuid()));
      if (d.has_parent_uuid() && tracks.count(d.parent_uuid()) == 0) {
        c.Add("track's parent not declared before it", d.name());
      }
      if (d.has_counter() && d.counter().unit() == 0 && d.counter().unit_name().empty()) {
        c.Add("counter track without a unit", d.name());
      }
      tracks[d.uuid()].counter = d.has_counter();
      ++c.tracks;
    }
    if (p.has_track_event())
      CheckTrackEvent(p, static_cast<size_t>(i), tracks, iids, flow_slices, &c);
  }
  if (sequences.size() > 1) c.Add("more than one packet sequence", absl::StrCat(sequences.size()));
  if (!realtime) c.Add("no clock snapshot naming the realtime clock", "");
  for (const auto& [uuid, t] : tracks) {
    if (!t.open.empty()) c.Add("slices never ended", absl::StrCat("track ", uuid));
  }
  // A flow id on one slice only (a collective one chip took part in) draws nothing: harmless.
  for (const auto& [id, n] : flow_slices) c.flows += n >= 2;
  return c;
}

namespace {

// A JSON number in microseconds as whole nanoseconds, or -1 when it is not one.
int64_t Ns(const nlohmann::json& v) {
  if (!v.is_number()) return -1;
  const double ns = v.get<double>() * 1000.0;
  const double whole = std::round(ns);
  // Doubles hold microseconds with three decimals exactly enough for hours of trace.
  if (std::fabs(ns - whole) > 1e-3 * std::max(1.0, std::fabs(ns) * 1e-12)) return -2;
  return static_cast<int64_t>(whole);
}

struct JsonSlice {
  int64_t begin, end;
  std::string name;
};

void CheckNesting(std::vector<JsonSlice>& slices, const std::string& thread, ExportCheck* c) {
  std::sort(slices.begin(), slices.end(), [](const JsonSlice& a, const JsonSlice& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<const JsonSlice*> stack;
  for (const JsonSlice& s : slices) {
    while (!stack.empty() && stack.back()->end <= s.begin) stack.pop_back();
    if (!stack.empty() && s.end > stack.back()->end) {
      c->Add("child slice ends after its parent",
             absl::StrCat(thread, ": ", s.name, " ends ", s.end, " ns, its parent ",
                          stack.back()->name, " at ", stack.back()->end, " ns"));
    }
    stack.push_back(&s);
  }
}

bool InSlice(const std::vector<JsonSlice>& slices, int64_t ts) {
  for (const JsonSlice& s : slices) {
    if (s.begin <= ts && ts <= s.end) return true;
  }
  return false;
}

}  // namespace

ExportCheck CheckChromeJson(const std::string& text) {
  ExportCheck c;
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("traceEvents") ||
      !doc["traceEvents"].is_array()) {
    c.Add("not a JSON object with a traceEvents array", absl::StrCat(text.size(), " bytes"));
    return c;
  }
  std::map<std::string, std::vector<JsonSlice>> threads;  // "pid/tid"
  std::set<int64_t> named_pids;
  std::set<std::string> named_threads, used_threads;
  struct Flow {
    int starts = 0, finishes = 0;
    int64_t start_ts = INT64_MAX, finish_ts = INT64_MIN;
  };
  std::map<std::string, Flow> flows;
  std::vector<std::pair<std::string, int64_t>> flow_points;  // thread, ts
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    const std::string thread =
        absl::StrCat(e.value("pid", int64_t{-1}), "/", e.value("tid", int64_t{0}));
    if (ph == "M") {
      if (e.value("name", "") == "process_name") named_pids.insert(e.value("pid", int64_t{-1}));
      if (e.value("name", "") == "thread_name") named_threads.insert(thread);
    } else if (ph == "X") {
      const int64_t ts = Ns(e["ts"]), dur = Ns(e["dur"]);
      if (ts < 0 || dur < 0) {
        c.Add("ts or dur not a non-negative whole number of ns", e.dump());
        continue;
      }
      threads[thread].push_back({ts, ts + dur, e.value("name", "")});
      used_threads.insert(thread);
      ++c.slices;
    } else if (ph == "C") {
      ++c.counter_samples;
      const auto args = e.find("args");
      if (args == e.end() || !args->is_object() || args->empty()) {
        c.Add("counter without values", e.dump());
      } else {
        for (auto v = args->begin(); v != args->end(); ++v) {
          if (!v->is_number()) c.Add("counter value that is not a number", e.dump());
        }
      }
    } else if (ph == "s" || ph == "t" || ph == "f") {
      if (!e.contains("id") || !e.contains("cat")) c.Add("flow event without id or cat", e.dump());
      const std::string id = e.contains("id") ? e["id"].dump() : "";
      Flow& f = flows[id];
      const int64_t ts = Ns(e["ts"]);
      if (ph == "s") ++f.starts, f.start_ts = std::min(f.start_ts, ts);
      if (ph == "f") ++f.finishes, f.finish_ts = std::max(f.finish_ts, ts);
      flow_points.push_back({thread, ts});
    }
  }
  for (auto& [thread, slices] : threads) {
    ++c.tracks;
    CheckNesting(slices, thread, &c);
    const int64_t pid = std::stoll(thread.substr(0, thread.find('/')));
    if (named_pids.count(pid) == 0) c.Add("process without a name", thread);
    if (named_threads.count(thread) == 0) c.Add("thread without a name", thread);
  }
  for (const auto& [thread, ts] : flow_points) {
    auto t = threads.find(thread);
    if (t == threads.end() || !InSlice(t->second, ts)) {
      c.Add("flow event outside any slice of its thread", absl::StrCat(thread, " at ", ts));
    }
  }
  for (const auto& [id, f] : flows) {
    if (f.starts != 1 || f.finishes != 1) {
      c.Add("flow without exactly one start and one finish", id);
    } else if (f.finish_ts < f.start_ts) {
      c.Add("flow finishes before it starts", id);
    }
  }
  c.flows = flows.size();
  return c;
}

namespace {

std::string StatName(const tensorflow::profiler::XPlane& plane, int64_t id) {
  auto it = plane.stat_metadata().find(id);
  return it == plane.stat_metadata().end() ? "" : it->second.name();
}

}  // namespace

bool XprofProfileWindow(const tensorflow::profiler::XSpace& space, int64_t* start, int64_t* stop) {
  for (const auto& plane : space.planes()) {
    if (plane.name() != "Task Environment") continue;
    for (const auto& s : plane.stats()) {
      const std::string name = StatName(plane, s.metadata_id());
      if (name == "profile_start_time") *start = static_cast<int64_t>(s.uint64_value());
      if (name == "profile_stop_time") *stop = static_cast<int64_t>(s.uint64_value());
    }
    return *start > 0 && *stop >= *start;
  }
  return false;
}

namespace {

void CheckLine(const tensorflow::profiler::XPlane& plane, const tensorflow::profiler::XLine& line,
               const std::string& where, int64_t start, int64_t stop, ExportCheck* c) {
  struct Ev {
    int64_t begin, end;  // ps from the line's timestamp
    int64_t meta;
  };
  std::vector<Ev> events;
  int64_t last_end = 0;
  for (const auto& e : line.events()) {
    events.push_back({e.offset_ps(), e.offset_ps() + e.duration_ps(), e.metadata_id()});
    last_end = std::max(last_end, e.offset_ps() + e.duration_ps());
    if (plane.event_metadata().count(e.metadata_id()) == 0) {
      c->Add("event without metadata", where);
    }
    bool perf_id = false, perf_value = false;
    for (const auto& s : e.stats()) {
      if (plane.stat_metadata().count(s.metadata_id()) == 0) c->Add("stat without metadata", where);
      const std::string name = StatName(plane, s.metadata_id());
      if (name == "all_reduce_unique_id") ++c->flows;
      // XProf's Perf Counters tool and Utilization Viewer key samples on the register id.
      perf_id |= name == "performance_counter_id" && s.value_case() == s.kUint64Value;
      perf_value |= name == "counter_value";
    }
    if (perf_id) {
      ++c->counter_samples;
      if (!perf_value) c->Add("performance counter sample without counter_value", where);
      continue;
    }
    if (line.name() == "_counters_") {
      ++c->counter_samples;
    } else {
      ++c->slices;
    }
  }
  if (events.empty()) return;
  if (line.duration_ps() < last_end) {
    c->Add("line duration shorter than its events",
           absl::StrCat(where, ": ", line.duration_ps(), " ps < ", last_end, " ps"));
  }
  // Relative to the profile start, as the profiler's post-processing leaves them: XProf
  // computes an event's time as line ns x 1000 + offset in an int64, which epoch ns overflow.
  // Within the profile window (with a second of slack for events that began before the window
  // opened, as kernels running at the start do).
  constexpr int64_t kSlackNs = 1'000'000'000;
  constexpr int64_t kEpochLikeNs = 100'000'000'000'000'000;  // 1973: no capture lasts that long
  if (line.timestamp_ns() >= kEpochLikeNs || line.timestamp_ns() < -kEpochLikeNs) {
    c->Add("line timestamp not relative to the profile start (XProf would overflow)",
           absl::StrCat(where, ": ", line.timestamp_ns(), " ns"));
    return;
  }
  const int64_t first_ns = start + line.timestamp_ns();
  const int64_t last_ns = first_ns + last_end / 1000;
  if (first_ns < start - kSlackNs || last_ns > stop + kSlackNs) {
    c->Add("line outside the profile window",
           absl::StrCat(where, ": ", first_ns, "..", last_ns, " ns, window ", start, "..", stop));
  }
  std::sort(events.begin(), events.end(), [](const Ev& a, const Ev& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<const Ev*> stack;
  for (const Ev& e : events) {
    while (!stack.empty() && stack.back()->end <= e.begin) stack.pop_back();
    // Concurrent events may share a line (the profiler writes "Async XLA Ops" so); an overlap
    // under a nanosecond is a rounding artifact where nesting was meant.
    if (!stack.empty() && e.end > stack.back()->end && stack.back()->end - e.begin < 1000) {
      c->Add("events on a line overlap by under a ns without nesting",
             absl::StrCat(where, ": [", e.begin, ", ", e.end, ") ps crosses the end of [",
                          stack.back()->begin, ", ", stack.back()->end, ")"));
    }
    stack.push_back(&e);
  }
}

}  // namespace

ExportCheck CheckXprofSession(const std::filesystem::path& root,
                              std::map<std::string, int64_t>* first_events) {
  namespace fs = std::filesystem;
  ExportCheck c;
  const fs::path profile = root / "plugins" / "profile";
  std::vector<fs::path> runs;
  if (fs::is_directory(profile)) {
    for (const auto& d : fs::directory_iterator(profile)) runs.push_back(d.path());
  }
  if (runs.size() != 1) {
    c.Add("not one run under plugins/profile", absl::StrCat(runs.size(), " runs"));
    return c;
  }
  for (const auto& f : fs::directory_iterator(runs[0])) {
    const std::string file = f.path().filename().string();
    if (f.path().extension() != ".pb" || file.find(".xplane.pb") == std::string::npos) {
      c.Add("file that is not <host>.xplane.pb", file);
      continue;
    }
    std::ifstream in(f.path(), std::ios::binary);
    tensorflow::profiler::XSpace space;
    if (!space.ParseFromIstream(&in)) {
      c.Add("not an XSpace", file);
      continue;
    }
    FindUnknownFields(space, file, &c);
    int64_t start = 0, stop = 0;
    if (!XprofProfileWindow(space, &start, &stop)) {
      c.Add("no Task Environment plane with the profile window", file);
      continue;
    }
    const std::string run =
        absl::FormatTime("%Y_%m_%d_%H_%M_%S", absl::FromUnixNanos(start), absl::UTCTimeZone());
    if (runs[0].filename() != run) {
      c.Add("run directory not named after the session's start",
            absl::StrCat(runs[0].filename().string(), " vs ", run));
    }
    for (const auto& plane : space.planes()) {
      // The trace viewer tells a plane's lines apart by id (a perf sample's number, too).
      std::set<int64_t> line_ids;
      for (const auto& line : plane.lines()) {
        const std::string where = absl::StrCat(file, " ", plane.name(), " ", line.name());
        if (!line_ids.insert(line.id()).second) {
          c.Add("two lines of a plane share an id", absl::StrCat(where, ": ", line.id()));
        }
        if (first_events != nullptr && !line.events().empty()) {
          int64_t first_ps = INT64_MAX;
          for (const auto& e : line.events()) first_ps = std::min(first_ps, e.offset_ps());
          (*first_events)[where] = start + line.timestamp_ns() + first_ps / 1000;
        }
        ++c.tracks;
        CheckLine(plane, line, where, start, stop, &c);
      }
    }
  }
  return c;
}

}  // namespace podprof::testing
