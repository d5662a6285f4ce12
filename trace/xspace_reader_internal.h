// Internal to the XSpace reader: the state of one read, shared by the wire walk
// (trace/xspace_reader.cc) and the readers of each kind of plane data beside it, and the
// interface the walk hands each plane to. Not part of podprof's API: callers include
// trace/xspace_reader.h.
//
// The walk reads the XSpace's fields, classifies each plane by its name and hands it, once, to
// the PlaneKindReader for its kind: device lines (trace/device_lines.cc: TPU, SparseCore, GPU
// and CPU device planes), JAX on CPU's host threads (trace/host_cpu_lines.cc), the programs'
// HLO (trace/hlo_programs.cc). Counter samples (trace/counter_samples.cc) and the kernel table
// (trace/kernel_lookup.cc) are what the lines' events add to. Nothing dispatches per event: the
// device lines' event loop (ReadLine, ReadEvent, ParseEvent, ParseEventStat) is one translation
// unit, its helpers inlined.
#ifndef PODPROF_TRACE_XSPACE_READER_INTERNAL_H_
#define PODPROF_TRACE_XSPACE_READER_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trace/byte_source.h"
#include "trace/hlo_proto.h"
#include "trace/model.h"
#include "trace/perf_samples.h"
#include "trace/wire.h"
#include "trace/xspace_reader.h"
#include "trace/xspace_schema.h"

namespace podprof::trace::xspace_internal {

// Metadata ids below this are looked up in dense tables on the per-event path.
constexpr int64_t kDenseIds = 1 << 16;
constexpr uint32_t kNoKernel = ~uint32_t{0};
// Kinds of LineKind, for tables indexed by it.
constexpr int kLineKinds = static_cast<int>(LineKind::kScopes) + 1;
// ReaderState::counter_line_ns of a series whose times are absolute already (perf samples).
constexpr int64_t kAbsolute = INT64_MIN;

// One XStat as found on the wire, before its metadata is known.
struct RawStat {
  int64_t metadata_id = 0;
  enum class Type : uint8_t { kNone, kDouble, kUint64, kInt64, kString, kRef, kCompressed };
  Type type = Type::kNone;
  union {
    double d;
    uint64_t u;
    int64_t i;
  } num = {0};
  std::string str;  // kString, kCompressed (still compressed)
};

// False when the stat is damaged.
bool ParseRawStat(wire::Span stat, RawStat* out);
double StatNumber(const RawStat& stat);
uint64_t StatUint(const RawStat& stat);

// Stat metadata of one plane: names by id, and the kind of each id for the hot path.
class StatTable {
 public:
  void Add(int64_t id, std::string name);
  // Inlined: called for every stat of every event.
  ABSL_ATTRIBUTE_ALWAYS_INLINE xspace::Stat Kind(int64_t id) const {
    if (id >= 0 && id < static_cast<int64_t>(dense_.size())) return dense_[id];
    if (sparse_.empty()) return xspace::Stat::kUnknown;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? xspace::Stat::kUnknown : it->second;
  }
  const std::string* Name(int64_t id) const {
    auto it = names_.find(id);
    return it == names_.end() ? nullptr : &it->second;
  }

 private:
  static constexpr int64_t kDenseLimit = 1 << 16;
  std::vector<xspace::Stat> dense_;
  absl::flat_hash_map<int64_t, xspace::Stat> sparse_;
  absl::flat_hash_map<int64_t, std::string> names_;
};

// What podprof keeps of one XEventMetadata until events refer to it.
struct EventMeta {
  int64_t offset = 0;     // of the map entry, for error messages
  std::string name;       // display_name if set, else name
  std::string full_name;  // name, when display_name is set and differs (the HLO text)
  uint64_t full_name_hash = 0;
  std::vector<RawStat> stats;
  // `performance_counter_id` among the stats: events of this metadata are counter samples.
  bool has_perf_id = false;
  uint64_t perf_id = 0;
  // `counter_value` among the stats: the value of events that carry none of their own.
  bool has_counter = false;
  double counter = 0;
};

// A length-delimited field recorded during a plane's first pass.
struct Extent {
  int64_t pos;  // offset of the field's length prefix
};

// kSparseCore: a TPU chip's SparseCore plane, whose data belongs to that chip's. kCpu: a
// `/device:CPU:N` plane (podprof's own export of a CPU device), read as a TPU plane is.
// kHostCpu: `/host:CPU`, read only when the capture has no device plane (JAX on CPU: its XLA
// ops run on host threads); kHostMetadata: the programs' HloProtos, read for kHostCpu.
// kMegascaleTrace: the Megascale runtime's action graph, read onto the TPU chips
// (trace/megascale_trace.h); not a chip.
enum class PlaneKind {
  kSkip,
  kTpu,
  kGpu,
  kSparseCore,
  kTaskEnvironment,
  kCpu,
  kHostCpu,
  kHostMetadata,
  kMegascaleTrace
};

// A plane's first pass: its name, and where each of its lines, metadata entries and stats is.
struct PlaneScan {
  PlaneKind kind = PlaneKind::kSkip;
  bool named = false;
  int ordinal = 0;
  int sparse_core = 0;  // M of a SparseCore plane
  std::string name;
  int64_t end = 0;  // of the plane's bytes
  std::vector<Extent> lines, event_metadata, stat_metadata, stats;
};

// The fields of one XEvent that podprof uses.
struct EventFields {
  int64_t metadata_id = 0, offset_ps = 0, duration_ps = 0, device_duration_ps = -1;
  uint64_t collective = 0;
  double counter = 0;
  bool has_counter = false;
  bool has_perf_id = false;
  uint64_t perf_id = 0;
  int64_t dropped_traces = 0;
};

// State of the plane whose data is being read.
struct PlaneState {
  PlaneKind kind = PlaneKind::kSkip;
  int chip = -1;  // index into capture.host.chips
  StatTable stat_table;
  absl::flat_hash_map<int64_t, EventMeta> metas;
  // Kernel index per (line kind, metadata id), filled as events refer to them.
  absl::flat_hash_map<int64_t, uint32_t> kernel_of[kLineKinds];
  // The same for small ids, read on every event without hashing.
  std::vector<uint32_t> dense_kernel_of[kLineKinds];
  absl::flat_hash_map<int64_t, size_t> counter_of;  // metadata id -> capture.counters index
  // The same for counters on other lines than `_counters_`, by (line, metadata id).
  std::map<std::pair<std::string, int64_t>, size_t> line_counter_of;
  std::string line_name;  // of the line being read (for GPU categories), with line_prefix
  // "SparseCore M/" on a SparseCore plane, whose lines are read onto its chip.
  std::string line_prefix;
  // Performance counter samples, and whether any event metadata names a counter.
  PerfSampleCollector perf;
  bool any_meta_perf_id = false;
  // A host CPU plane's ops by (metadata id, program id): one event metadata per op name
  // serves every program that has an op of that name. The value: kernel, and whether it is
  // a collective.
  absl::flat_hash_map<std::pair<int64_t, uint64_t>, std::pair<uint32_t, bool>> cpu_kernel_of;
  // The first kernel not yet handed to the sink, and whether part of the plane has been
  // (it is larger than options.max_piece_bytes).
  size_t piece_kernels = 0;
  bool split = false;
};

// The line being read.
struct LineContext {
  LineKind kind = LineKind::kOps;
  bool counters = false;
  int64_t timestamp_ns = 0;
  int64_t absolute_ns = 0;      // ReaderState::Absolute(timestamp_ns)
  EventBlock* block = nullptr;  // null for counter lines
  // A `counters_<kernel>` line: the execution its events count, and whether any did.
  bool execution = false;
  ExecutionCounts counts;
  // A host CPU thread's blocks (indices: adding one moves the others): its ops (`block`)
  // and its steps, made when the first step is read.
  size_t ops_block = 0;
  int64_t steps_block = -1;
};

// One read of an XSpace: what every plane kind's reader adds to.
struct ReaderState {
  ReaderState(ByteSource& source, const ReadOptions& options, PieceSink* sink)
      : window(&source), options(options), sink(sink) {}

  // Post-processed captures store line times relative to the profile start: made absolute.
  // Older captures already hold absolute times and have no Task Environment.
  int64_t Absolute(int64_t line_ns) const {
    const int64_t start = capture.host.profile_start_ns;
    return start > 0 && line_ns < xspace::kAbsoluteLineTimestampNs ? start + line_ns : line_ns;
  }
  // A stat's value as text (a ref names stat metadata; compressed text is inflated).
  absl::Status StatString(const StatTable& table, const RawStat& stat, std::string* out) const;

  wire::Window window;
  const ReadOptions& options;
  PieceSink* const sink;
  int data_planes = 0;  // device planes whose data has been read (the next one's chip index)
  HostCapture capture;
  absl::flat_hash_map<std::string, uint32_t> kernel_index;  // dedup key -> kernels index
  absl::flat_hash_map<uint64_t, std::string> module_of_program;
  // Counter samples keep the line's timestamp until the profile start is known.
  std::vector<int64_t> counter_line_ns;
  // TPU chips by ordinal (index into capture.host.chips), for their SparseCore planes.
  absl::flat_hash_map<int, int> chip_of_tpu_ordinal;
  // What each chip's planes lacked, by ordinal; warnings once the capture is read.
  std::map<int, ChipNotes> notes;
  // JAX on CPU: whether the header pass saw `/host:CPU`, where `/host:metadata` is, the CPU
  // device's chip (-1: none, the host plane is skipped), and each program's HLO ops.
  bool saw_host_cpu = false;
  std::optional<PlaneScan> host_metadata;
  int cpu_chip = -1;
  absl::flat_hash_map<uint64_t, HloModuleOps> hlo_programs;
  // The Megascale plane the header pass found, read once the chips are known; then its
  // series, each handed on with its chip's device plane (TakeMegascaleSeries).
  std::optional<PlaneScan> megascale_plane;
  std::vector<CounterSeries> megascale_series;
};

// What the walk hands a plane of one kind to: called once per plane in each of the walk's two
// passes (never per line or event), and once between them. `plane` is a cursor over the
// plane's bytes, for seeking to the extents in `scan`.
class PlaneKindReader {
 public:
  virtual ~PlaneKindReader() = default;
  // The header pass: what the plane says of the host (its chip, the profile's window, where
  // the programs are), before any plane's data is read.
  virtual absl::Status ReadHeader(ReaderState& r, const PlaneScan& scan,
                                  wire::Cursor& plane) const = 0;
  // After the header pass, before the data pass.
  virtual absl::Status EndHeader(ReaderState& /*r*/) const { return absl::OkStatus(); }
  // The data pass: the plane's timelines and counters.
  virtual absl::Status ReadData(ReaderState& r, const PlaneScan& scan,
                                wire::Cursor& plane) const = 0;
};

// The reader of each kind (null: the kind is skipped).
const PlaneKindReader* DeviceLinesReader();      // device_lines.cc
const PlaneKindReader* HostCpuLinesReader();     // host_cpu_lines.cc
const PlaneKindReader* HloProgramsReader();      // hlo_programs.cc
const PlaneKindReader* TaskEnvironmentReader();  // xspace_reader.cc
const PlaneKindReader* MegascaleTraceReader();   // megascale_trace.cc

// The Megascale series of `chip` (megascale_trace.cc), moved to the capture's counters on
// absolute times: EndPlane's, so that they go to the sink in the chip's own piece.
void TakeMegascaleSeries(ReaderState& r, int chip);

// The wire walk's services (xspace_reader.cc).
// A plane's stat and event metadata and its own stats (the extents its scan recorded).
absl::Status ReadStatMetadata(const PlaneScan& scan, wire::Cursor& c, StatTable* table);
absl::Status ReadEventMetadata(const PlaneScan& scan, wire::Cursor& c, PlaneState* state);
absl::Status ReadPlaneStats(const PlaneScan& scan, wire::Cursor& c, std::vector<RawStat>* out);
// After a device plane's data: its times made absolute, its new kernels given their modules,
// and the piece handed to the sink (then dropped) when there is one.
absl::Status EndPlane(ReaderState& r, PlaneState* state, size_t blocks_before,
                      size_t counters_before);
// Reading in pieces, once the plane's data held passes options.max_piece_bytes: what has
// been read of it goes to the sink and is dropped, and the line being read goes on in a
// fresh block. The plane's perf samples cannot be split: past the same budget, an error
// naming the chip.
absl::Status MaybeSplitPlane(ReaderState& r, PlaneState* plane, LineContext* ctx);

// Device lines (device_lines.cc).
// Which lines of a plane podprof keeps, and as what; false for the rest. `counters`: the
// line's events that are counter samples become series (the rest are the line's block, if it
// is one).
bool ClassifyLine(PlaneKind plane, absl::string_view name, LineKind* kind, bool* counters);
// A line's name and timestamp, wherever they are among its fields.
absl::Status ScanLineHeader(wire::Cursor rest, std::string* name, int64_t* timestamp_ns);
// The fields of one XEvent, as the device lines' event loop reads them.
absl::Status ParseEventFields(wire::Span ev, const StatTable& table, EventFields* f);
// The data of a plane whose chip is known (state->chip, state->kind): its event metadata,
// its lines, then EndPlane. Device planes and host CPU planes alike.
absl::Status ReadPlaneLines(ReaderState& r, const PlaneScan& scan, wire::Cursor& c,
                            PlaneState* state);

// JAX on CPU (host_cpu_lines.cc): a host thread's event, kept when it runs an XLA op
// (`hlo_op`) or is a StepTraceAnnotation (`step_num`).
absl::Status ReadCpuEvent(ReaderState& r, wire::Span ev, PlaneState* plane, LineContext* ctx);

// HLO programs and modules (hlo_programs.cc).
// A module event's name, "<module>(<program id>)": its parts, or false for another name.
bool ParseModuleName(absl::string_view name, std::string* module, uint64_t* program_id);
// The programs' HLO ops from the `/host:metadata` plane the header pass found.
absl::Status ReadHloPrograms(ReaderState& r);
// Reading in pieces: the programs' modules that the plane's module lines name, known before
// any line is read, so that a kernel handed to the sink in a piece before its plane's module
// line was read still has its module.
absl::Status NoteModules(ReaderState& r, const PlaneScan& scan, wire::Cursor& c,
                         const PlaneState& plane);
// Kernels from `first_kernel` on without a module take their program's, when known.
void ResolveModules(ReaderState& r, size_t first_kernel);

// Kernel lookup (kernel_lookup.cc).
// The kernel of an event of the plane's line of `kind` with this metadata, added to the
// capture's table the first time.
absl::StatusOr<uint32_t> KernelFor(ReaderState& r, PlaneState* plane, LineKind kind,
                                   int64_t metadata_id);
// `def`'s index in the capture's kernel table, added unless an equal kernel is there.
uint32_t InternKernel(ReaderState& r, LineKind kind, KernelDef def);

// Counter samples (counter_samples.cc). Out of line: most events are not on counter lines.
// The event as a counter sample of a counter line: a perf sample (performance_counter_id on
// the event or its metadata; counted when it has no value), or an older-style counter sample;
// false when it is neither.
ABSL_ATTRIBUTE_NOINLINE bool TakeCounterSample(ReaderState& r, PlaneState* plane, LineContext* ctx,
                                               EventFields* f);
ABSL_ATTRIBUTE_NOINLINE void NoteDroppedTraces(ReaderState& r, const PlaneState& plane, int64_t n);
// After a plane's lines: its perf samples as series (on absolute times, after the plane's
// other series), their executions placed on the kernels' runs from `blocks_before` on.
void FinishPerfSamples(ReaderState& r, PlaneState* state, size_t blocks_before);

}  // namespace podprof::trace::xspace_internal

#endif  // PODPROF_TRACE_XSPACE_READER_INTERNAL_H_
