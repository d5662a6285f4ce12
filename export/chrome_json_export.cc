// The Chrome JSON writer of export/trace_export.h.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/json_text.h"
#include "export/trace_export.h"
#include "export/tracks.h"
#include "nlohmann/json.hpp"

namespace podprof::exporter {
namespace {

// ns as microseconds with three decimals, exactly (integer arithmetic: a double would round
// some values up and others down).
std::string FormatUs(int64_t ns) {
  const uint64_t magnitude = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  return absl::StrFormat("%s%u.%03u", ns < 0 ? "-" : "", magnitude / 1000, magnitude % 1000);
}

}  // namespace

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

}  // namespace podprof::exporter
