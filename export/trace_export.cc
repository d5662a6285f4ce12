#include "export/trace_export.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_text.h"
#include "export/nesting.h"
#include "nlohmann/json.hpp"
#include "proto/perfetto_trace.pb.h"
#include "report/format.h"
#include "trace/perf_counters.h"
#include "trace/xspace_schema.h"

namespace podprof::exporter {

// One timeline event, placed: where it begins and ends (ns) and where it came from.
struct Placed {
  int64_t begin, end;
  uint32_t block, index;
};

namespace {

namespace pp = perfetto::protos;

constexpr uint32_t kSequenceId = 1;
constexpr uint32_t kIncrementalStateCleared = 1;
constexpr uint32_t kNeedsIncrementalState = 2;
enum EventType { kSliceBegin = 1, kSliceEnd = 2, kCounter = 4 };
// BuiltinClock: the aggregator's wall clock, and Perfetto's default trace clock.
constexpr uint32_t kClockRealtime = 1;
constexpr uint32_t kClockBoottime = 6;
// CounterDescriptor.Unit.
constexpr int kUnitTimeNs = 1, kUnitCount = 2, kUnitSizeBytes = 3;

// Lines in the order XProf shows them; anything else after.
int LineRank(const std::string& line) {
  if (line == trace::xspace::kStepsLine) return 0;
  if (line == trace::xspace::kXlaModulesLine) return 1;
  if (line == trace::xspace::kXlaOpsLine) return 2;
  return 3;
}

std::string ChipName(const trace::Chip* chip, int index) {
  if (chip == nullptr || chip->device_type.empty()) return absl::StrCat("chip ", index);
  return absl::StrCat("chip ", chip->ordinal, " (", chip->device_type, ")");
}

// The events of one (chip, line) track in start order, longer first at equal starts, so that
// enclosing slices come before what they enclose; nested (nesting.h), in lanes: lane 0 is the
// track itself, later lanes hold events that really overlap the ones before them (an async
// copy running past the next op), shown whole on tracks of their own rather than cut. Begin and
// end are each the exact instant in ps rounded down to ns: rounding a begin and a duration
// separately could end a scope after its kernel, while rounding both instants one way keeps
// every order.
std::vector<std::vector<Placed>> TrackLanes(const trace::HostCapture& capture,
                                            const std::vector<uint32_t>& blocks) {
  std::vector<Placed> out;
  for (uint32_t bi : blocks) {
    const trace::EventBlock& b = capture.blocks[bi];
    for (uint32_t i = 0; i < b.size(); ++i) {
      const int64_t end_ps = b.start_ps[i] + std::max<int64_t>(b.duration_ps[i], 0);
      out.push_back(
          {b.base_ns + FloorDiv(b.start_ps[i], 1000), b.base_ns + FloorDiv(end_ps, 1000), bi, i});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Placed& a, const Placed& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  return NestInLanes(std::move(out), kMaxTrimNs);
}

// The name of a lane's track: the line's own for lane 0.
std::string LaneName(const std::string& line, size_t lane) {
  if (lane == 0) return line;
  return lane == 1 ? absl::StrCat(line, " (overlapping)")
                   : absl::StrCat(line, " (overlapping ", lane, ")");
}

// Blocks of each (chip, line), tracks in display order.
std::vector<std::pair<std::pair<int, std::string>, std::vector<uint32_t>>> Tracks(
    const trace::HostCapture& capture) {
  std::map<std::pair<int, std::string>, std::vector<uint32_t>> by;
  for (uint32_t i = 0; i < capture.blocks.size(); ++i) {
    const trace::EventBlock& b = capture.blocks[i];
    // Scopes inside kernels share the kernels' track, where they nest as child slices.
    by[{b.chip,
        b.kind == trace::LineKind::kScopes ? std::string(trace::xspace::kXlaOpsLine) : b.line}]
        .push_back(i);
  }
  std::vector<std::pair<std::pair<int, std::string>, std::vector<uint32_t>>> out(by.begin(),
                                                                                 by.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first.first != b.first.first ? a.first.first < b.first.first
                                          : LineRank(a.first.second) < LineRank(b.first.second);
  });
  return out;
}

// Category, flops, bytes, program id, module and verdict of a kernel slice, as annotations.
void Annotate(const trace::KernelDef& def, const std::string* verdict, pp::TrackEvent* ev) {
  if (!def.category.empty()) {
    auto* a = ev->add_debug_annotations();
    a->set_name("category");
    a->set_string_value(def.category);
  }
  if (def.flops > 0) {
    auto* a = ev->add_debug_annotations();
    a->set_name("flops");
    a->set_int_value(def.flops);
  }
  if (def.bytes_accessed > 0) {
    auto* a = ev->add_debug_annotations();
    a->set_name("bytes_accessed");
    a->set_int_value(def.bytes_accessed);
  }
  if (def.program_id != 0) {
    auto* a = ev->add_debug_annotations();
    a->set_name("program_id");
    a->set_uint_value(def.program_id);
  }
  if (!def.module.empty()) {
    auto* a = ev->add_debug_annotations();
    a->set_name("module");
    a->set_string_value(def.module);
  }
  if (verdict != nullptr) {
    auto* a = ev->add_debug_annotations();
    a->set_name("verdict");
    a->set_string_value(*verdict);
  }
}

// A counter's unit, from the last word of its name: the simulator's and the TPU's counters
// (`vdd_core_energy_nj`, `stall_hbm_cycles`) and libtpu's runtime metrics
// (`tpu.runtime.hbm.memory.usage.bytes`, `tpu.runtime.tensorcore.dutycycle.percent`) say it
// there; sampled performance counters (`perf/...`) are counts. Busy and stall gauges (`mxu_busy`,
// `stall_hbm`: the share of each interval a unit was busy or stalled) are fractions; anything else
// is counted as plain counts.
void SetCounterUnit(const std::string& name, pp::CounterDescriptor* counter) {
  struct Suffix {
    const char* word;
    int unit;               // CounterDescriptor.Unit, or 0 with a unit name
    const char* unit_name;  // for units the enum lacks
    int64_t multiplier;     // to the enum's unit (ns, count, bytes)
  };
  static constexpr Suffix kSuffixes[] = {
      {"nj", 0, "nJ", 0},
      {"uj", 0, "uJ", 0},
      {"joules", 0, "J", 0},
      {"watts", 0, "W", 0},
      {"percent", 0, "%", 0},
      {"bytes", kUnitSizeBytes, "", 0},
      {"ns", kUnitTimeNs, "", 0},
      {"us", kUnitTimeNs, "", 1'000},
      {"ms", kUnitTimeNs, "", 1'000'000},
      {"seconds", kUnitTimeNs, "", 1'000'000'000},
      {"cycles", kUnitCount, "", 0},
      {"count", kUnitCount, "", 0},
  };
  // Sampled performance counters count events or cycles, whatever their register's last word.
  if (trace::IsPerfSeries(name)) {
    counter->set_unit(kUnitCount);
    return;
  }
  const size_t cut = name.find_last_of("_.");
  const std::string word =
      absl::AsciiStrToLower(cut == std::string::npos ? name : name.substr(cut + 1));
  for (const Suffix& s : kSuffixes) {
    if (word != s.word) continue;
    if (s.unit != 0) counter->set_unit(s.unit);
    if (*s.unit_name != '\0') counter->set_unit_name(s.unit_name);
    if (s.multiplier != 0) counter->set_unit_multiplier(s.multiplier);
    return;
  }
  if (word == "busy" || absl::StartsWith(name, "stall_")) {
    counter->set_unit_name("fraction");
  } else {
    counter->set_unit(kUnitCount);
  }
}

// ns as microseconds with three decimals, exactly (integer arithmetic: a double would round
// some values up and others down).
std::string FormatUs(int64_t ns) {
  const uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return absl::StrFormat("%s%u.%03u", ns < 0 ? "-" : "", magnitude / 1000, magnitude % 1000);
}

// A reading of the trace's clock for its clock snapshot: any instant works (REALTIME and
// BOOTTIME are given the same one), so the capture's start, else its first event's.
int64_t ClockReading(const trace::HostCapture& capture) {
  if (capture.host.profile_start_ns > 0) return capture.host.profile_start_ns;
  for (const trace::EventBlock& b : capture.blocks) {
    if (b.size() > 0) return b.base_ns;
  }
  return 0;
}

}  // namespace

// The verdict noted for kernel `k` on `chip` (an index into the host's chips), or null.
class NoteLookup {
 public:
  NoteLookup(const trace::HostCapture& capture, const KernelNotes* notes)
      : capture_(capture), notes_(notes) {}
  const std::string* Of(int chip, uint32_t k) {
    if (notes_ == nullptr || k >= capture_.kernels.size() || chip < 0 ||
        chip >= static_cast<int>(capture_.host.chips.size())) {
      return nullptr;
    }
    auto [it, fresh] = cache_.try_emplace({chip, k}, nullptr);
    if (fresh) {
      const trace::KernelDef& def = capture_.kernels[k];
      auto n = notes_->find({capture_.host.chips[chip].ordinal, def.module, def.name});
      if (n != notes_->end()) it->second = &n->second;
    }
    return it->second;
  }

 private:
  const trace::HostCapture& capture_;
  const KernelNotes* notes_;
  std::map<std::pair<int, uint32_t>, const std::string*> cache_;
};

PerfettoWriter::PerfettoWriter(std::ostream* out) : out_(out) {}

void PerfettoWriter::WritePacket(const std::string& bytes) {
  // Field 1 of Trace, length-delimited: the file is a Trace written one packet at a time.
  std::string header(1, '\x0a');
  uint64_t n = bytes.size();
  while (n >= 0x80) {
    header.push_back(static_cast<char>((n & 0x7f) | 0x80));
    n >>= 7;
  }
  header.push_back(static_cast<char>(n));
  out_->write(header.data(), static_cast<std::streamsize>(header.size()));
  out_->write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void PerfettoWriter::Emit(pp::TracePacket* p) {
  p->set_trusted_packet_sequence_id(kSequenceId);
  if (p->has_track_event()) p->set_sequence_flags(kNeedsIncrementalState);
  WritePacket(p->SerializeAsString());
  p->Clear();
}

void PerfettoWriter::Start(int64_t clock_ns) {
  if (started_) return;
  started_ = true;
  // The first packet clears the sequence's state and says what its timestamps are: the
  // aggregator's realtime clock (ns since the epoch). BOOTTIME, Perfetto's default trace clock,
  // is given the same reading, so trace time is wall-clock time too.
  pp::TracePacket p;
  p.set_sequence_flags(kIncrementalStateCleared);
  p.mutable_trace_packet_defaults()->set_timestamp_clock_id(kClockRealtime);
  for (uint32_t id : {kClockRealtime, kClockBoottime}) {
    auto* c = p.mutable_clock_snapshot()->add_clocks();
    c->set_clock_id(id);
    c->set_timestamp(static_cast<uint64_t>(std::max<int64_t>(clock_ns, 0)));
  }
  Emit(&p);
}

uint64_t PerfettoWriter::NewTrack(pp::TracePacket* p, uint64_t parent, const std::string& name,
                                  int rank) {
  const uint64_t uuid = next_uuid_++;
  auto* t = p->mutable_track_descriptor();
  t->set_uuid(uuid);
  t->set_parent_uuid(parent);
  t->set_name(name);
  t->set_sibling_order_rank(rank);
  ++counts_.tracks;
  return uuid;
}

void PerfettoWriter::AddHost(const trace::HostCapture& capture, const std::string& description,
                             const KernelNotes* notes) {
  Start(ClockReading(capture));
  NoteLookup note_of(capture, notes);
  ++counts_.hosts;
  pp::TracePacket packet;
  // The host: a process track.
  const uint64_t host_uuid = next_uuid_++;
  {
    auto* t = packet.mutable_track_descriptor();
    t->set_uuid(host_uuid);
    t->set_description(description);
    t->set_child_ordering(3);  // chips in ordinal order
    auto* proc = t->mutable_process();
    proc->set_pid(static_cast<int32_t>(counts_.hosts));
    proc->set_process_name(capture.host.name);
    ++counts_.tracks;
    Emit(&packet);
  }
  std::map<int, uint64_t> chip_uuid;
  auto chip_track = [&](int chip) {
    auto it = chip_uuid.find(chip);
    if (it != chip_uuid.end()) return it->second;
    const trace::Chip* c = chip >= 0 && chip < static_cast<int>(capture.host.chips.size())
                               ? &capture.host.chips[chip]
                               : nullptr;
    const uint64_t uuid =
        NewTrack(&packet, host_uuid, ChipName(c, chip), c != nullptr ? c->ordinal : chip);
    packet.mutable_track_descriptor()->set_child_ordering(3);
    Emit(&packet);
    chip_uuid[chip] = uuid;
    return uuid;
  };
  for (const auto& [key, blocks] : Tracks(capture)) {
    std::vector<std::vector<Placed>> lanes = TrackLanes(capture, blocks);
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      const uint64_t uuid = NewTrack(&packet, chip_track(key.first), LaneName(key.second, lane),
                                     LineRank(key.second));
      Emit(&packet);
      WriteSlices(capture, lanes[lane], uuid, &note_of);
    }
  }
  for (const trace::CounterSeries& s : capture.counters) {
    const uint64_t uuid = NewTrack(&packet, chip_track(s.chip), s.name, 100);
    SetCounterUnit(s.name, packet.mutable_track_descriptor()->mutable_counter());
    Emit(&packet);
    for (size_t i = 0; i < s.value.size(); ++i) {
      packet.set_timestamp(static_cast<uint64_t>(s.time_ns[i]));
      auto* ev = packet.mutable_track_event();
      ev->set_type(kCounter);
      ev->set_track_uuid(uuid);
      ev->set_double_counter_value(s.value[i]);
      Emit(&packet);
      ++counts_.counter_samples;
    }
  }
}

void PerfettoWriter::WriteSlices(const trace::HostCapture& capture,
                                 const std::vector<Placed>& events, uint64_t track,
                                 NoteLookup* note_of) {
  pp::TracePacket packet;
  std::vector<int64_t> open;  // ends of the slices begun and not yet ended, innermost last
  auto close_until = [&](int64_t t) {
    while (!open.empty() && open.back() <= t) {
      packet.set_timestamp(static_cast<uint64_t>(open.back()));
      packet.mutable_track_event()->set_type(kSliceEnd);
      packet.mutable_track_event()->set_track_uuid(track);
      Emit(&packet);
      open.pop_back();
    }
  };
  // The events nest (TrackLanes), so each one's end comes before its enclosing slice's.
  for (const Placed& e : events) {
    close_until(e.begin);
    const trace::EventBlock& b = capture.blocks[e.block];
    const uint32_t k = b.kernel[e.index];
    const trace::KernelDef* def = k < capture.kernels.size() ? &capture.kernels[k] : nullptr;
    std::string interned;
    const std::string& name = def != nullptr && !def->name.empty() ? def->name : b.line;
    const uint64_t iid = InternedName(name, &interned);
    if (!interned.empty()) {
      auto* n = packet.mutable_interned_data()->add_event_names();
      n->set_iid(iid);
      n->set_name(interned);
    }
    packet.set_timestamp(static_cast<uint64_t>(e.begin));
    auto* ev = packet.mutable_track_event();
    ev->set_type(kSliceBegin);
    ev->set_track_uuid(track);
    ev->set_name_iid(iid);
    ev->add_categories(b.line);
    if (def != nullptr) Annotate(*def, note_of->Of(b.chip, k), ev);
    if (b.collective[e.index] != 0) {
      ev->add_flow_ids(b.collective[e.index]);
      ++counts_.flow_events;
    }
    Emit(&packet);
    ++counts_.slices;
    open.push_back(e.end);
  }
  close_until(INT64_MAX);
}

uint64_t PerfettoWriter::InternedName(const std::string& name, std::string* new_entry) {
  auto [it, fresh] = name_iids_.try_emplace(name, name_iids_.size() + 1);
  if (fresh) *new_entry = name;
  return it->second;
}

absl::Status PerfettoWriter::Finish() {
  out_->flush();
  if (!*out_) return absl::DataLossError("writing the Perfetto trace failed");
  return absl::OkStatus();
}

ChromeJsonWriter::ChromeJsonWriter(std::ostream* out, int64_t origin_ns)
    : out_(out), origin_ns_(origin_ns) {
  *out_ << "{\"otherData\":{\"origin_unix_ns\":" << origin_ns_ << "},\"traceEvents\":[\n";
}

void ChromeJsonWriter::Event(const std::string& json) {
  if (!first_) *out_ << ",\n";
  first_ = false;
  *out_ << json;
}

void ChromeJsonWriter::WriteThread(const trace::HostCapture& capture, int pid, int tid,
                                   const std::string& name, const std::vector<Placed>& events,
                                   NoteLookup* note_of) {
  using nlohmann::json;
  ++counts_.tracks;
  Event(JsonText(json{{"ph", "M"},
                      {"pid", pid},
                      {"tid", tid},
                      {"name", "thread_name"},
                      {"args", {{"name", name}}}}));
  Event(JsonText(json{{"ph", "M"},
                      {"pid", pid},
                      {"tid", tid},
                      {"name", "thread_sort_index"},
                      {"args", {{"sort_index", tid}}}}));
  for (const Placed& e : events) {
    const trace::EventBlock& b = capture.blocks[e.block];
    const uint32_t k = b.kernel[e.index];
    const trace::KernelDef* def = k < capture.kernels.size() ? &capture.kernels[k] : nullptr;
    json args = json::object();
    if (def != nullptr) {
      if (!def->category.empty()) args["category"] = def->category;
      if (def->flops > 0) args["flops"] = def->flops;
      if (def->bytes_accessed > 0) args["bytes_accessed"] = def->bytes_accessed;
      if (def->program_id != 0) args["program_id"] = def->program_id;
      if (const std::string* verdict = note_of->Of(b.chip, k)) args["verdict"] = *verdict;
    }
    if (b.collective[e.index] != 0) args["collective_id"] = b.collective[e.index];
    const std::string name = def != nullptr && !def->name.empty() ? def->name : b.line;
    // ts and dur from the same whole-ns begin and end, so that a slice ends where its
    // enclosing one says it may (TrackLanes nests them).
    Event(absl::StrCat("{\"ph\":\"X\",\"pid\":", pid, ",\"tid\":", tid,
                       ",\"name\":", JsonText(json(name)), ",\"cat\":", JsonText(json(b.line)),
                       ",\"ts\":", Us(e.begin), ",\"dur\":", FormatUs(e.end - e.begin),
                       ",\"args\":", JsonText(args), "}"));
    ++counts_.slices;
    if (b.collective[e.index] != 0) {
      // A flow binds to the slice enclosing its instant: the middle of the slice, which no
      // neighbour shares.
      flow_stops_.push_back({b.collective[e.index], pid, tid, e.begin + (e.end - e.begin) / 2});
    }
  }
}

void ChromeJsonWriter::AddHost(const trace::HostCapture& capture, const std::string& description,
                               const KernelNotes* notes) {
  NoteLookup note_of(capture, notes);
  const int pid = static_cast<int>(++counts_.hosts);
  ++counts_.tracks;
  using nlohmann::json;
  Event(JsonText(json{{"ph", "M"},
                      {"pid", pid},
                      {"name", "process_name"},
                      {"args", {{"name", capture.host.name}}}}));
  Event(JsonText(json{
      {"ph", "M"}, {"pid", pid}, {"name", "process_sort_index"}, {"args", {{"sort_index", pid}}}}));
  if (!description.empty()) {
    Event(JsonText(json{{"ph", "M"},
                        {"pid", pid},
                        {"name", "process_labels"},
                        {"args", {{"labels", description}}}}));
  }
  int tid = 0;
  for (const auto& [key, blocks] : Tracks(capture)) {
    const trace::Chip* c = key.first >= 0 && key.first < static_cast<int>(capture.host.chips.size())
                               ? &capture.host.chips[key.first]
                               : nullptr;
    std::vector<std::vector<Placed>> lanes = TrackLanes(capture, blocks);
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      WriteThread(capture, pid, ++tid,
                  absl::StrCat(ChipName(c, key.first), " ", LaneName(key.second, lane)),
                  lanes[lane], &note_of);
    }
  }
  for (const trace::CounterSeries& s : capture.counters) {
    ++counts_.tracks;
    // Named like the chip's slice threads (its ordinal, not its index in this host's list).
    const trace::Chip* c = s.chip >= 0 && s.chip < static_cast<int>(capture.host.chips.size())
                               ? &capture.host.chips[s.chip]
                               : nullptr;
    const std::string name = absl::StrCat(ChipName(c, s.chip), " ", s.name);
    for (size_t i = 0; i < s.value.size(); ++i) {
      Event(absl::StrCat("{\"ph\":\"C\",\"pid\":", pid, ",\"name\":", JsonText(json(name)),
                         ",\"ts\":", Us(s.time_ns[i]),
                         ",\"args\":{\"value\":", json(s.value[i]).dump(), "}}"));
      ++counts_.counter_samples;
    }
  }
}

std::string ChromeJsonWriter::Us(int64_t ns) const { return FormatUs(ns - origin_ns_); }

void ChromeJsonWriter::WriteFlows() {
  // Each collective's slices in time order: the first starts the flow, the last ends it
  // ("bp":"e": bound to the slice enclosing its instant, as the others are), any between are
  // steps. Trace Event Format flow events, which chrome://tracing and Perfetto's JSON importer
  // both read; Perfetto tells flows apart by id, category and name, so those are shared.
  std::stable_sort(
      flow_stops_.begin(), flow_stops_.end(), [](const FlowStop& a, const FlowStop& b) {
        return a.collective != b.collective ? a.collective < b.collective : a.ns < b.ns;
      });
  for (size_t i = 0; i < flow_stops_.size();) {
    size_t j = i;
    while (j < flow_stops_.size() && flow_stops_[j].collective == flow_stops_[i].collective) ++j;
    for (size_t k = i; j - i > 1 && k < j; ++k) {
      const FlowStop& f = flow_stops_[k];
      const char* ph = k == i ? "s" : k + 1 == j ? "f" : "t";
      // The id as a hex string: JSON numbers past 2^53 lose digits in JavaScript viewers.
      Event(absl::StrCat("{\"ph\":\"", ph, "\",\"pid\":", f.pid, ",\"tid\":", f.tid,
                         ",\"name\":\"collective\",\"cat\":\"collective\",\"id\":\"",
                         absl::StrFormat("0x%x", f.collective), "\",\"ts\":", Us(f.ns),
                         k + 1 == j ? ",\"bp\":\"e\"}" : "}"));
      ++counts_.flow_events;
    }
    i = j;
  }
  std::vector<FlowStop>().swap(flow_stops_);
}

absl::Status ChromeJsonWriter::Finish() {
  WriteFlows();
  *out_ << "\n]}\n";
  out_->flush();
  if (!*out_) return absl::DataLossError("writing the Chrome JSON trace failed");
  return absl::OkStatus();
}

namespace {

// Rows are written in pieces of about this size: one write per row costs more than the row.
constexpr size_t kCsvWriteBytes = 64 << 10;

// A count or id as a CSV field: empty for 0 (none, or unknown).
template <typename T>
std::string NonZero(T v) {
  return v == 0 ? std::string() : absl::StrCat(v);
}

// The fields of a kernel that every row of it repeats, escaped once rather than per row:
// "kernel,module" and "category,program_id,flops,bytes_accessed".
struct CsvKernel {
  std::string names, cost;
};

// The host's kernels' fields, with one more entry last for an event whose kernel it lacks.
std::vector<CsvKernel> CsvKernels(const std::vector<trace::KernelDef>& kernels) {
  std::vector<CsvKernel> out;
  out.reserve(kernels.size() + 1);
  for (const trace::KernelDef& k : kernels) {
    out.push_back({absl::StrCat(report::CsvField(k.name), ",", report::CsvField(k.module)),
                   absl::StrCat(report::CsvField(k.category), ",", NonZero(k.program_id), ",",
                                NonZero(k.flops), ",", NonZero(k.bytes_accessed))});
  }
  out.push_back({",", ",,,"});
  return out;
}

int ChipOrdinal(const trace::HostCapture& capture, int chip) {
  return chip >= 0 && chip < static_cast<int>(capture.host.chips.size())
             ? capture.host.chips[chip].ordinal
             : chip;
}

// (chip ordinal, chip index, line rank, line): the CSV's row order within a host. The index
// keeps apart two devices of one ordinal (the CPU device beside a chip 0).
using CsvGroup = std::tuple<int, int, int, std::string>;

// The blocks of each (chip, line) of a host, in row order.
std::map<CsvGroup, std::vector<uint32_t>> CsvGroups(const trace::HostCapture& capture) {
  std::map<CsvGroup, std::vector<uint32_t>> out;
  for (uint32_t i = 0; i < capture.blocks.size(); ++i) {
    const trace::EventBlock& b = capture.blocks[i];
    out[{ChipOrdinal(capture, b.chip), b.chip, LineRank(b.line), b.line}].push_back(i);
  }
  return out;
}

// One event of a (chip, line), for ordering: its start as the Perfetto trace places it (whole
// ns) and the ps past that, so that the order is the exact instants' even across blocks of
// different bases.
struct CsvEvent {
  int64_t begin_ns, past_ns_ps, duration_ps;
  uint32_t block, index;
};

// The events of `blocks` by start, longer first at equal starts, then as stored: a
// deterministic order for any capture.
std::vector<CsvEvent> CsvOrder(const trace::HostCapture& capture,
                               const std::vector<uint32_t>& blocks) {
  std::vector<CsvEvent> out;
  for (uint32_t bi : blocks) {
    const trace::EventBlock& b = capture.blocks[bi];
    for (uint32_t i = 0; i < b.size(); ++i) {
      const int64_t ns = FloorDiv(b.start_ps[i], 1000);
      // A negative duration (none is recorded) counts as 0, as the viewers' exports take it.
      out.push_back({b.base_ns + ns, b.start_ps[i] - ns * 1000,
                     std::max<int64_t>(b.duration_ps[i], 0), bi, i});
    }
  }
  std::sort(out.begin(), out.end(), [](const CsvEvent& a, const CsvEvent& b) {
    return std::tie(a.begin_ns, a.past_ns_ps, b.duration_ps, a.block, a.index) <
           std::tie(b.begin_ns, b.past_ns_ps, a.duration_ps, b.block, b.index);
  });
  return out;
}

}  // namespace

CsvWriter::CsvWriter(std::ostream* out) : out_(out) { *out_ << kCsvHeader << "\n"; }

void CsvWriter::AddHost(const trace::HostCapture& capture) {
  ++counts_.hosts;
  const std::vector<CsvKernel> kernels = CsvKernels(capture.kernels);
  const std::string host = report::CsvField(capture.host.name);
  std::string rows;
  auto write = [&] {
    out_->write(rows.data(), static_cast<std::streamsize>(rows.size()));
    rows.clear();
  };
  for (const auto& [group, blocks] : CsvGroups(capture)) {
    const std::string prefix =
        absl::StrCat(host, ",", std::get<0>(group), ",", report::CsvField(std::get<3>(group)), ",");
    for (const CsvEvent& e : CsvOrder(capture, blocks)) {
      const trace::EventBlock& b = capture.blocks[e.block];
      const CsvKernel& k = kernels[std::min<size_t>(b.kernel[e.index], capture.kernels.size())];
      absl::StrAppend(&rows, prefix, k.names, ",", e.begin_ns, ",", e.duration_ps, ",",
                      NonZero(b.collective[e.index]), ",", k.cost, "\n");
      ++counts_.slices;
      if (rows.size() >= kCsvWriteBytes) write();
    }
  }
  write();
}

absl::Status CsvWriter::Finish() {
  out_->flush();
  if (!*out_) return absl::DataLossError("writing the CSV failed");
  return absl::OkStatus();
}

}  // namespace podprof::exporter
