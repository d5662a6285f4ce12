// The Perfetto writer of export/trace_export.h.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "export/nesting.h"
#include "export/trace_export.h"
#include "export/tracks.h"
#include "proto/perfetto_trace.pb.h"
#include "trace/perf_counters.h"
#include "trace/xspace_schema.h"

namespace podprof::exporter {
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

PerfettoWriter::PerfettoWriter(std::ostream* out) : out_(out) {}

void PerfettoWriter::SetHostFlows(std::vector<HostFlow> flows) {
  flow_ends_.clear();
  flow_written_.assign(flows.size(), 0);
  for (size_t i = 0; i < flows.size(); ++i) {
    const HostFlow& f = flows[i];
    flow_ends_[f.from_host][f.from_chip].from.emplace_back(f.from_begin_ns, i);
    flow_ends_[f.to_host][f.to_chip].to.emplace_back(f.to_end_ns, i);
  }
  for (auto& [host, chips] : flow_ends_) {
    for (auto& [chip, ends] : chips) {
      std::sort(ends.from.begin(), ends.from.end());
      std::sort(ends.to.begin(), ends.to.end());
    }
  }
}

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
  // The host's flow ends, by chip ordinal: on each chip's XLA Ops track.
  const auto host_flows = flow_ends_.find(capture.host.name);
  auto flows_of = [&](int chip, const std::string& line) -> const FlowEnds* {
    if (host_flows == flow_ends_.end() || line != trace::xspace::kXlaOpsLine || chip < 0 ||
        chip >= static_cast<int>(capture.host.chips.size())) {
      return nullptr;
    }
    auto it = host_flows->second.find(capture.host.chips[static_cast<size_t>(chip)].ordinal);
    return it == host_flows->second.end() ? nullptr : &it->second;
  };
  for (const auto& [key, blocks] : Tracks(capture)) {
    std::vector<std::vector<Placed>> lanes = TrackLanes(capture, blocks);
    const FlowEnds* flows = flows_of(key.first, key.second);
    for (size_t lane = 0; lane < lanes.size(); ++lane) {
      const uint64_t uuid = NewTrack(&packet, chip_track(key.first), LaneName(key.second, lane),
                                     LineRank(key.second));
      Emit(&packet);
      WriteSlices(capture, lanes[lane], uuid, &note_of, flows);
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
                                 NoteLookup* note_of, const FlowEnds* flows) {
  pp::TracePacket packet;
  // The slices begun and not yet ended, innermost last: each one's end and the flows it ends.
  std::vector<std::pair<int64_t, std::vector<uint64_t>>> open;
  auto close_until = [&](int64_t t) {
    while (!open.empty() && open.back().first <= t) {
      packet.set_timestamp(static_cast<uint64_t>(open.back().first));
      auto* ev = packet.mutable_track_event();
      ev->set_type(kSliceEnd);
      ev->set_track_uuid(track);
      for (uint64_t id : open.back().second) ev->add_terminating_flow_ids(id);
      Emit(&packet);
      open.pop_back();
    }
  };
  // The flows whose end (kept in `ends`, by instant) lies in [lo, hi] and is not yet written.
  auto flows_at = [&](const std::vector<std::pair<int64_t, size_t>>& ends, int64_t lo, int64_t hi,
                      uint8_t bit, std::vector<uint64_t>* ids) {
    auto it = std::lower_bound(ends.begin(), ends.end(), std::make_pair(lo, size_t{0}));
    for (; it != ends.end() && it->first <= hi; ++it) {
      uint8_t& written = flow_written_[it->second];
      if ((written & bit) != 0) continue;
      written |= bit;
      ids->push_back(kHostFlowIds + it->second);
      if (written == 3) ++counts_.host_flows;
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
    std::vector<uint64_t> ending;
    if (flows != nullptr) {
      // A source on the slice's begin (never trimmed), a destination on its end, which the
      // nesting may have cut by up to kMaxTrimNs.
      std::vector<uint64_t> starting;
      flows_at(flows->from, e.begin, e.begin, 1, &starting);
      for (uint64_t id : starting) ev->add_flow_ids(id);
      flows_at(flows->to, e.end, e.end + kMaxTrimNs, 2, &ending);
    }
    Emit(&packet);
    ++counts_.slices;
    open.emplace_back(e.end, std::move(ending));
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

}  // namespace podprof::exporter
