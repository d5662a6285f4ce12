// Merged-timeline exports of a pod capture: every host's chips and lines on one clock, in the
// viewers people already use. Writers take one host at a time (a pod's events never have to be
// in memory together) and write to a stream as they go.
#ifndef PODPROF_EXPORT_TRACE_EXPORT_H_
#define PODPROF_EXPORT_TRACE_EXPORT_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "trace/model.h"

namespace perfetto::protos {
class TracePacket;
}  // namespace perfetto::protos

namespace podprof::exporter {

class NoteLookup;
struct Placed;

// What to say of each kernel on each chip, shown on its slices: (chip ordinal, module, op
// name) -> the kernel's verdict there.
using KernelNotes = std::map<std::tuple<int, std::string, std::string>, std::string>;

struct ExportCounts {
  uint64_t hosts = 0;
  uint64_t tracks = 0;  // process, chip, line and counter tracks
  uint64_t slices = 0;  // timeline events
  uint64_t counter_samples = 0;
  uint64_t flow_events = 0;  // slices joined to other chips' slices of one collective
  uint64_t host_flows = 0;   // HostFlows written with both their ends (Perfetto)
};

// An arrow from one slice to another, usually on another host: a cross-slice (DCN) transfer
// from the sender's send to the receiver's recv-done, as the aggregator's analysis paired them
// (insight::AnalyseDcn; the exporter pairs nothing itself). Each end is named by its host, the
// chip's ordinal and an instant of its slice on that chip's `XLA Ops` track, ns since the Unix
// epoch on the aggregator's clock as the writer's slices have them: where the source slice
// begins, where the destination slice ends (Perfetto binds the arrow's head when it reads that
// end, which always comes after the source's begin; a recv-done may begin before its data's
// send did).
struct HostFlow {
  std::string from_host;
  int from_chip = 0;
  int64_t from_begin_ns = 0;
  std::string to_host;
  int to_chip = 0;
  int64_t to_end_ns = 0;
};

// A Perfetto trace (`.pftrace`, INTEROP.md section 5): a process track per host, under it a
// track per chip and under that one per line (XLA Modules, XLA Ops, Steps, ...) and one per
// counter. Kernel names are interned; category, flops, bytes and program id ride along as
// debug annotations; slices of one collective on different chips are joined by a flow;
// counter tracks carry their unit. Timestamps are the events' own, ns since the Unix epoch on
// the aggregator's clock, and the trace says so: a clock snapshot makes them REALTIME.
class PerfettoWriter {
 public:
  explicit PerfettoWriter(std::ostream* out);
  // The flows to draw between hosts, given before the first AddHost: each written on the
  // source slice (flow_ids) and on the destination slice's end (terminating_flow_ids) where
  // both are exported, matched on begin exactly and on end within the nesting trim
  // (kMaxTrimNs); a flow whose end is not exported (narrowed away) has no arrow. Flow ids are
  // kHostFlowIds + the flow's index, apart from the collectives' (their all_reduce_unique_id).
  void SetHostFlows(std::vector<HostFlow> flows);
  static constexpr uint64_t kHostFlowIds = 0xDC00'0000'0000'0000;
  // Writes one host. `description` shows in the host track's details (e.g. its clock
  // correction); `notes`, when given, adds each kernel slice's verdict as an annotation.
  void AddHost(const trace::HostCapture& capture, const std::string& description,
               const KernelNotes* notes = nullptr);
  // Flushes; fails if the stream did.
  absl::Status Finish();
  const ExportCounts& counts() const { return counts_; }

 private:
  void WritePacket(const std::string& bytes);
  void Emit(perfetto::protos::TracePacket* packet);
  // Writes the trace's first packet (clock snapshot, packet defaults) unless done.
  void Start(int64_t clock_ns);
  uint64_t NewTrack(perfetto::protos::TracePacket* packet, uint64_t parent, const std::string& name,
                    int rank);
  // The flows' ends on one chip's XLA Ops track: (instant, flow index), by instant.
  struct FlowEnds {
    std::vector<std::pair<int64_t, size_t>> from, to;
  };
  void WriteSlices(const trace::HostCapture& capture, const std::vector<Placed>& events,
                   uint64_t track, NoteLookup* note_of, const FlowEnds* flows);
  uint64_t InternedName(const std::string& name, std::string* new_entries);

  std::ostream* out_;
  ExportCounts counts_;
  uint64_t next_uuid_ = 1;
  bool started_ = false;
  std::unordered_map<std::string, uint64_t> name_iids_;
  // By host name, then chip ordinal. Per flow: bit 1 its source written, bit 2 its destination.
  std::map<std::string, std::map<int, FlowEnds>> flow_ends_;
  std::vector<uint8_t> flow_written_;
};

// A Chrome JSON trace ({"traceEvents": [...]}): "M" names for hosts (processes) and chip lines
// (threads), "X" complete events in microseconds with the kernel's attributes as args (slices on
// a thread nest, as in the Perfetto trace), "C" counters, and flow events ("s", "t", "f") joining
// the slices of one collective on different chips. Viewers struggle past about a million events:
// `Large()` says when that is crossed.
class ChromeJsonWriter {
 public:
  // Times are written in microseconds since `origin_ns` (the capture's start): the format's
  // timestamps are doubles, which cannot hold nanoseconds since the epoch. The origin is kept
  // in "otherData".
  ChromeJsonWriter(std::ostream* out, int64_t origin_ns);
  void AddHost(const trace::HostCapture& capture, const std::string& description,
               const KernelNotes* notes = nullptr);
  absl::Status Finish();
  const ExportCounts& counts() const { return counts_; }
  static constexpr uint64_t kLargeEvents = 1'000'000;
  bool Large() const { return counts_.slices + counts_.counter_samples > kLargeEvents; }

 private:
  // One slice of a collective: where a flow event binds to it.
  struct FlowStop {
    uint64_t collective;
    int pid, tid;
    int64_t ns;
  };
  void Event(const std::string& json);
  std::string Us(int64_t ns) const;
  // One thread (a track's lane): its name, then its slices.
  void WriteThread(const trace::HostCapture& capture, int pid, int tid, const std::string& name,
                   const std::vector<Placed>& events, NoteLookup* note_of);
  void WriteFlows();

  std::ostream* out_;
  const int64_t origin_ns_;
  ExportCounts counts_;
  bool first_ = true;
  // The flows are written once every host's slices are known (Finish).
  std::vector<FlowStop> flow_stops_;
};

// The events of a window as a table (`.csv`, RFC 4180 fields), for scripts rather than viewers:
// a header line (kCsvHeader), then one row per timeline event, the same events the Perfetto
// trace has slices for. `start_ns` is where the Perfetto trace begins the event's slice: ns
// since the Unix epoch on the aggregator's clock, the exact ps instant rounded down.
// `duration_ps` is the recorded duration, untouched by the trims that make a viewer's track
// nest. `line` is the event's own timeline (a kernel's named scopes keep theirs, "XLA TraceMe",
// where the viewers draw them on XLA Ops); `chip` its chip's ordinal. Empty fields: a
// collective_id, program_id, flops or bytes_accessed of 0 (none, or unknown), a kernel, module
// or category the capture does not name. Rows go by host (in the order added), chip ordinal,
// line (Steps, XLA Modules, XLA Ops, then the rest by name), start, longer first at equal
// starts, then as stored. Counter samples are not rows.
class CsvWriter {
 public:
  static constexpr char kCsvHeader[] =
      "host,chip,line,kernel,module,start_ns,duration_ps,collective_id,category,program_id,"
      "flops,bytes_accessed";
  // Writes the header line.
  explicit CsvWriter(std::ostream* out);
  // A host's descriptions and verdicts are the viewers': a row has no place for them.
  void AddHost(const trace::HostCapture& capture);
  absl::Status Finish();
  const ExportCounts& counts() const { return counts_; }

 private:
  std::ostream* out_;
  ExportCounts counts_;
};

}  // namespace podprof::exporter

#endif  // PODPROF_EXPORT_TRACE_EXPORT_H_
