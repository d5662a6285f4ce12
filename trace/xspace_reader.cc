#include "trace/xspace_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "trace/chip_catalog.h"
#include "trace/hash.h"
#include "trace/hlo_proto.h"
#include "trace/perf_counters.h"
#include "trace/perf_samples.h"
#include "trace/wire.h"
#include "trace/xspace_schema.h"

namespace podprof::trace {
namespace {

using wire::Cursor;
using wire::Span;
using wire::WireType;

using xspace::CoreDetailsField;
using xspace::kAbsoluteLineTimestampNs;
using xspace::MapEntryField;
using xspace::Stat;
using xspace::XEventField;
using xspace::XEventMetadataField;
using xspace::XLineField;
using xspace::XPlaneField;
using xspace::XSpaceField;
using xspace::XStatField;
using xspace::XStatMetadataField;

// Metadata ids below this are looked up in dense tables on the per-event path.
constexpr int64_t kDenseIds = 1 << 16;
constexpr uint32_t kNoKernel = ~uint32_t{0};
// Kinds of LineKind, for tables indexed by it.
constexpr int kLineKinds = static_cast<int>(LineKind::kScopes) + 1;
// counter_line_ns_ of a series whose times are absolute already (perf samples).
constexpr int64_t kAbsolute = INT64_MIN;

// The kind of a stat from its name, as the schema knows it; a stat whose name speaks of MLIR
// (a Mosaic kernel's lowered MLIR, under whatever name the capture gives it) is the Mosaic MLIR.
Stat StatKindOf(absl::string_view name) {
  const Stat stat = xspace::StatOfName(name);
  if (stat != Stat::kUnknown) return stat;
  if (absl::StrContains(name, "mlir")) return Stat::kMosaicMlir;
  return Stat::kUnknown;
}

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

bool ParseRawStat(Span stat, RawStat* out) {
  uint32_t field;
  WireType wt;
  absl::string_view bytes;
  uint64_t v;
  while (!stat.done()) {
    if (!stat.ReadTag(&field, &wt)) return false;
    switch (field) {
      case XStatField::kMetadataId:
        if (wt != wire::kVarint || !stat.ReadVarint(&v)) return false;
        out->metadata_id = static_cast<int64_t>(v);
        break;
      case XStatField::kDoubleValue:
        if (wt != wire::kFixed64 || !stat.ReadFixed64(&v)) return false;
        out->type = RawStat::Type::kDouble;
        std::memcpy(&out->num.d, &v, sizeof(double));
        break;
      case XStatField::kUint64Value:
      case XStatField::kInt64Value:
      case XStatField::kRefValue:
        if (wt != wire::kVarint || !stat.ReadVarint(&v)) return false;
        out->type = field == XStatField::kUint64Value  ? RawStat::Type::kUint64
                    : field == XStatField::kInt64Value ? RawStat::Type::kInt64
                                                       : RawStat::Type::kRef;
        out->num.u = v;
        break;
      case XStatField::kStrValue:
      case XStatField::kBytesValue:
      case XStatField::kCompressedStrValue:
        if (wt != wire::kLengthDelimited || !stat.ReadBytes(&bytes)) return false;
        out->type = field == XStatField::kCompressedStrValue ? RawStat::Type::kCompressed
                                                             : RawStat::Type::kString;
        out->str.assign(bytes.data(), bytes.size());
        break;
      default:
        if (!stat.Skip(wt)) return false;
    }
  }
  return true;
}

absl::Status Inflate(absl::string_view in, size_t max_out, std::string* out) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  // 15 + 32: accept gzip or zlib headers.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return absl::InternalError("zlib init failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  out->clear();
  char chunk[16384];
  int rc;
  do {
    zs.next_out = reinterpret_cast<Bytef*>(chunk);
    zs.avail_out = sizeof(chunk);
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      inflateEnd(&zs);
      return absl::DataLossError("compressed_str_value is not valid gzip data");
    }
    out->append(chunk, sizeof(chunk) - zs.avail_out);
    if (out->size() > max_out) {
      inflateEnd(&zs);
      return absl::ResourceExhaustedError(
          absl::StrCat("compressed_str_value inflates past ", max_out, " bytes"));
    }
  } while (rc != Z_STREAM_END && (zs.avail_in > 0 || zs.avail_out == 0));
  inflateEnd(&zs);
  if (rc != Z_STREAM_END) return absl::DataLossError("compressed_str_value is truncated");
  return absl::OkStatus();
}

// Stat metadata of one plane: names by id, and the kind of each id for the hot path.
class StatTable {
 public:
  void Add(int64_t id, std::string name) {
    Stat kind = StatKindOf(name);
    if (id >= 0 && id < kDenseLimit) {
      if (dense_.size() <= static_cast<size_t>(id)) dense_.resize(id + 1, Stat::kUnknown);
      dense_[id] = kind;
    } else if (kind != Stat::kUnknown) {
      sparse_[id] = kind;
    }
    names_[id] = std::move(name);
  }
  // Inlined: called for every stat of every event.
  ABSL_ATTRIBUTE_ALWAYS_INLINE Stat Kind(int64_t id) const {
    if (id >= 0 && id < static_cast<int64_t>(dense_.size())) return dense_[id];
    if (sparse_.empty()) return Stat::kUnknown;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? Stat::kUnknown : it->second;
  }
  const std::string* Name(int64_t id) const {
    auto it = names_.find(id);
    return it == names_.end() ? nullptr : &it->second;
  }

 private:
  static constexpr int64_t kDenseLimit = 1 << 16;
  std::vector<Stat> dense_;
  absl::flat_hash_map<int64_t, Stat> sparse_;
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
enum class PlaneKind {
  kSkip,
  kTpu,
  kGpu,
  kSparseCore,
  kTaskEnvironment,
  kCpu,
  kHostCpu,
  kHostMetadata
};

// A plane number: 1-9 digits, all of `digits`.
bool ParseNumber(absl::string_view digits, int* out) {
  if (digits.empty() || digits.size() > 9) return false;
  for (char c : digits) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return absl::SimpleAtoi(digits, out);
}

bool ParseDeviceOrdinal(absl::string_view name, absl::string_view prefix, int* ordinal) {
  return absl::StartsWith(name, prefix) && ParseNumber(name.substr(prefix.size()), ordinal);
}

// "/device:TPU:N SparseCore M" or "/device:TPU:N SparseCore <Word> M" (XLA's
// kSparseCorePlaneRegex): the chip's ordinal N and the SparseCore's number M.
bool ParseSparseCorePlane(absl::string_view name, int* ordinal, int* sparse_core) {
  if (!absl::ConsumePrefix(&name, xspace::kTpuPlanePrefix)) return false;
  const size_t infix = name.find(xspace::kSparseCorePlaneInfix);
  if (infix == absl::string_view::npos || !ParseNumber(name.substr(0, infix), ordinal)) {
    return false;
  }
  absl::string_view rest = name.substr(infix + xspace::kSparseCorePlaneInfix.size());
  if (const size_t space = rest.find(' '); space != absl::string_view::npos) {
    for (char c : rest.substr(0, space)) {
      if (!absl::ascii_isalpha(c)) return false;
    }
    if (space == 0) return false;
    rest = rest.substr(space + 1);
  }
  return ParseNumber(rest, sparse_core);
}

PlaneKind ClassifyPlane(absl::string_view name, int* ordinal, int* sparse_core) {
  if (ParseDeviceOrdinal(name, xspace::kTpuPlanePrefix, ordinal)) return PlaneKind::kTpu;
  if (ParseDeviceOrdinal(name, xspace::kGpuPlanePrefix, ordinal)) return PlaneKind::kGpu;
  if (ParseSparseCorePlane(name, ordinal, sparse_core)) return PlaneKind::kSparseCore;
  if (name == xspace::kTaskEnvironmentPlane) return PlaneKind::kTaskEnvironment;
  if (ParseDeviceOrdinal(name, xspace::kCpuPlanePrefix, ordinal)) return PlaneKind::kCpu;
  if (name == xspace::kHostCpuPlane) return PlaneKind::kHostCpu;
  if (name == xspace::kHostMetadataPlane) return PlaneKind::kHostMetadata;
  return PlaneKind::kSkip;
}

// Which lines of a device plane podprof keeps; false for the rest. `counters`: the line's
// events that are counter samples become series (the rest are the line's block, if it is one).
// The kernel of a `counters_<kernel>` line; empty for other lines (`counters_0` included).
absl::string_view KernelOfCountersLine(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, xspace::kKernelCountersLinePrefix) || name.empty()) return "";
  for (char c : name) {
    if (!absl::ascii_isdigit(c)) return name;
  }
  return "";
}

// A line of kernels besides XLA Ops (xspace::kLloOpsLine).
bool IsOtherKernelLine(absl::string_view name) {
  return absl::StrContains(name, xspace::kLloOpsLine) || absl::StrContains(name, "Pallas") ||
         absl::StrContains(name, "PALLAS");
}

bool ClassifyLine(PlaneKind plane, absl::string_view name, LineKind* kind, bool* counters) {
  *counters = false;
  if (plane == PlaneKind::kSparseCore) {
    // Counter samples, and scopes of the SparseCore's kernels (docs/INTEROP.md).
    *kind = LineKind::kScopes;
    *counters = true;
    return true;
  }
  if (plane == PlaneKind::kHostCpu) {
    // A host thread: its XLA op events are kernels, its StepTraceAnnotations steps
    // (Reader::ReadCpuEvent); every other event is skipped.
    *kind = LineKind::kOps;
    return true;
  }
  if (name == xspace::kStepsLine) {
    *kind = LineKind::kSteps;
    return true;
  }
  if (plane == PlaneKind::kTpu || plane == PlaneKind::kCpu) {
    if (name == xspace::kXlaOpsLine) {
      *kind = LineKind::kOps;
      return true;
    }
    if (name == xspace::kXlaModulesLine) {
      *kind = LineKind::kModules;
      return true;
    }
    // `XLA TraceMe` and the kernel-profiling lines inside kernels.
    if (IsScopesLine(std::string_view(name.data(), name.size()))) {
      *kind = LineKind::kScopes;
      return true;
    }
    if (KernelOfCountersLine(name).empty() && IsOtherKernelLine(name)) {
      *kind = LineKind::kOps;
      return true;
    }
    // `_counters_`, and any other line (utilization and performance-counter lines): events
    // that carry `counter_value` or `performance_counter_id` are counter samples, the rest
    // is skipped. A CPU device's other lines are its threads' ops (WriteChipPlane).
    if (plane == PlaneKind::kCpu && name != xspace::kCountersLine) {
      *kind = LineKind::kOps;
      return true;
    }
    *counters = true;
    return true;
  }
  if (absl::StartsWith(name, xspace::kGpuStreamLinePrefix)) {
    *kind = LineKind::kGpuStream;
    return true;
  }
  return false;
}

// Category of a GPU kernel, from its stream line ("Stream #7(MemcpyH2D)") and name.
std::string GpuCategory(absl::string_view line, absl::string_view kernel) {
  if (absl::StrContains(line, "Memcpy") || absl::StartsWith(kernel, "Memcpy")) {
    return "memcpy";
  }
  if (absl::StrContains(line, "Memset") || absl::StartsWith(kernel, "Memset")) {
    return "memset";
  }
  return "gpu kernel";
}

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

// A module event's name, "<module>(<program id>)": its parts, or false for another name.
bool ParseModuleName(absl::string_view name, std::string* module, uint64_t* program_id) {
  const size_t open = name.rfind('(');
  if (open == absl::string_view::npos || name.back() != ')' ||
      !absl::SimpleAtoi(name.substr(open + 1, name.size() - open - 2), program_id)) {
    return false;
  }
  *module = std::string(name.substr(0, open));
  return true;
}

class Reader {
 public:
  Reader(ByteSource& source, const ReadOptions& options, PieceSink* sink)
      : window_(&source), options_(options), sink_(sink) {}

  absl::StatusOr<HostCapture> Read();

 private:
  struct PlaneScan {
    PlaneKind kind = PlaneKind::kSkip;
    bool named = false;
    int ordinal = 0;
    int sparse_core = 0;  // M of a SparseCore plane
    std::string name;
    std::vector<Extent> lines, event_metadata, stat_metadata, stats;
  };

  // State of the plane being read.
  struct PlaneState {
    PlaneKind kind = PlaneKind::kSkip;
    int chip = -1;  // index into capture_.host.chips
    StatTable stat_table;
    absl::flat_hash_map<int64_t, EventMeta> metas;
    // Kernel index per (line kind, metadata id), filled as events refer to them.
    absl::flat_hash_map<int64_t, uint32_t> kernel_of[kLineKinds];
    // The same for small ids, read on every event without hashing.
    std::vector<uint32_t> dense_kernel_of[kLineKinds];
    absl::flat_hash_map<int64_t, size_t> counter_of;  // metadata id -> capture_.counters index
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
    // (it is larger than options_.max_piece_bytes).
    size_t piece_kernels = 0;
    bool split = false;
  };

  // One pass over the XSpace: the host's part (`header`: names, warnings, chips, the Task
  // Environment) or the device planes' data.
  absl::Status WalkSpace(bool header);
  absl::Status ReadPlane(Cursor plane, bool header);
  absl::Status ReadDevicePlane(const PlaneScan& scan, int64_t plane_end, bool header);
  // The header pass's part of a device plane: its chip (none for a SparseCore plane) and its
  // dropped_traces.
  absl::Status ReadPlaneHeader(const PlaneScan& scan, const PlaneState& state,
                               const std::vector<RawStat>& plane_stats);
  // The chip a plane's data belongs to (index into capture_.host.chips), or -1 for a
  // SparseCore plane whose chip has no plane (warned, skipped).
  absl::StatusOr<int> DataPlaneChip(const PlaneScan& scan, PlaneState* state);
  // The plane's chip from its stats.
  absl::StatusOr<Chip> ReadChip(const PlaneScan& scan, const PlaneState& state,
                                const std::vector<RawStat>& plane_stats);
  // After a device plane's data: its times made absolute, its new kernels given their modules,
  // and the piece handed to the sink (then dropped) when there is one.
  absl::Status EndPlane(PlaneState* state, size_t blocks_before, size_t counters_before);
  // The timelines and counters read since the last piece, on absolute times, with the new
  // kernels' modules and text made valid, handed to the sink.
  absl::Status HandPiece(PlaneState* plane);
  // A plane's stat and event metadata (the extents its scan recorded), read through `c`.
  absl::Status ReadStatMetadata(const PlaneScan& scan, Cursor& c, StatTable* table);
  absl::Status ReadEventMetadata(const PlaneScan& scan, Cursor& c, PlaneState* state);
  absl::Status ReadStatMetadataEntry(Cursor entry, StatTable* table);
  absl::Status ReadEventMetadataEntry(Cursor entry, PlaneState* plane);
  absl::Status ReadStatList(Cursor* c, std::vector<RawStat>* out);
  // The line being read.
  struct LineContext {
    LineKind kind = LineKind::kOps;
    bool counters = false;
    int64_t timestamp_ns = 0;
    int64_t absolute_ns = 0;      // Absolute(timestamp_ns)
    EventBlock* block = nullptr;  // null for counter lines
    // A `counters_<kernel>` line: the execution its events count, and whether any did.
    bool execution = false;
    ExecutionCounts counts;
    // A host CPU thread's blocks (indices: adding one moves the others): its ops (`block`)
    // and its steps, made when the first step is read.
    size_t ops_block = 0;
    int64_t steps_block = -1;
  };
  absl::Status ReadLine(Cursor line, PlaneState* plane);
  // Reading in pieces: the programs' modules that the plane's module lines name, known before
  // any line is read, so that a kernel handed to the sink in a piece before its plane's module
  // line was read still has its module.
  absl::Status NoteModules(const PlaneScan& scan, Cursor& c, const PlaneState& plane);
  // Reading in pieces, once the plane's data held passes options_.max_piece_bytes: what has
  // been read of it goes to the sink and is dropped, and the line being read goes on in a
  // fresh block. The plane's perf samples cannot be split: past the same budget, an error
  // naming the chip.
  absl::Status MaybeSplitPlane(PlaneState* plane, LineContext* ctx);
  absl::Status ReadEvent(Span ev, PlaneState* plane, LineContext* ctx);
  // JAX on CPU: a host thread's event, kept when it runs an XLA op (`hlo_op`) or is a
  // StepTraceAnnotation (`step_num`).
  absl::Status ReadCpuEvent(Span ev, PlaneState* plane, LineContext* ctx);
  absl::StatusOr<std::pair<uint32_t, bool>> CpuKernelFor(PlaneState* plane, int64_t metadata_id,
                                                         uint64_t program_id,
                                                         const std::string& module);
  // After the header pass: the CPU device, when the capture has a host CPU plane and no
  // device plane, with its programs' HLO (the `/host:metadata` plane).
  absl::Status AddCpuDevice();
  absl::Status ReadHloPrograms(const PlaneScan& scan, int64_t plane_end);
  // The event as a counter sample of a counter line: a perf sample (performance_counter_id on
  // the event or its metadata; counted when it has no value), or an older-style counter sample;
  // false when it is neither. Out of line: most events are not on counter lines.
  ABSL_ATTRIBUTE_NOINLINE bool TakeCounterSample(PlaneState* plane, LineContext* ctx,
                                                 EventFields* f);
  ABSL_ATTRIBUTE_NOINLINE void NoteDroppedTraces(const PlaneState& plane, int64_t n);
  // A counter sample (counter_value, no performance_counter_id): series `<line>/<event>`,
  // or `<event>` on `_counters_`.
  void AddLineCounterSample(PlaneState* plane, const LineContext& ctx, const EventFields& f);
  absl::Status ScanLineHeader(Cursor rest, std::string* name, int64_t* timestamp_ns);
  absl::StatusOr<uint32_t> KernelFor(PlaneState* plane, LineKind kind, int64_t metadata_id);
  absl::Status StatString(const PlaneState& plane, const RawStat& stat, std::string* out);
  static double StatNumber(const RawStat& stat);
  static uint64_t StatUint(const RawStat& stat);
  void Finish();
  void ResolveModules(size_t first_kernel);
  // Blocks and counter series from these indices on moved from their lines' times to
  // absolute ones (series already absolute, the perf series, are left alone).
  void MakeAbsolute(size_t blocks_from, size_t counters_from);
  // Each kernel a `counters_<kernel>` line of the plane names: its executions on the plane's
  // kernel lines (blocks from `blocks_from`), absolute ns, in time order.
  absl::flat_hash_map<std::string, std::vector<std::pair<int64_t, int64_t>>> KernelRuns(
      const PlaneState& state, size_t blocks_from) const;
  int64_t Absolute(int64_t line_ns) const;

  wire::Window window_;
  const ReadOptions& options_;
  PieceSink* const sink_;
  int data_planes_ = 0;  // device planes whose data has been read (the next one's chip index)
  HostCapture capture_;
  absl::flat_hash_map<std::string, uint32_t> kernel_index_;  // dedup key -> kernels index
  absl::flat_hash_map<uint64_t, std::string> module_of_program_;
  // Counter samples keep the line's timestamp until the profile start is known.
  std::vector<int64_t> counter_line_ns_;
  std::vector<int64_t> skipped_planes_;
  // TPU chips by ordinal (index into capture_.host.chips), for their SparseCore planes.
  absl::flat_hash_map<int, int> chip_of_tpu_ordinal_;
  // What each chip's planes lacked, by ordinal; warnings once the capture is read.
  std::map<int, ChipNotes> notes_;
  // JAX on CPU: whether the header pass saw `/host:CPU`, where `/host:metadata` is, the CPU
  // device's chip (-1: none, the host plane is skipped), and each program's HLO ops.
  bool saw_host_cpu_ = false;
  std::optional<PlaneScan> host_metadata_;
  int64_t host_metadata_end_ = 0;
  int cpu_chip_ = -1;
  absl::flat_hash_map<uint64_t, HloModuleOps> hlo_programs_;
};

// A name that is not UTF-8 (a workload's bytes) as \xNN escapes: protobuf refuses a proto3
// string holding it (the agent's stream failed at its deadline), JSON throws on it (reads of an
// imported capture ended the aggregator). Escaped once, where it is read, every reader and
// writer after sees text. Most names are valid: only those pay for a copy.
void MakeText(std::string* s) {
  if (!IsValidUtf8(*s)) *s = EscapeInvalidUtf8(*s);
}

void MakeText(KernelDef* k) {
  for (std::string* s : {&k->module, &k->name, &k->category, &k->source, &k->hlo_text, &k->tf_op,
                         &k->source_stack, &k->mlir}) {
    MakeText(s);
  }
}

// The capture's names from the given kernel, block and series on.
void MakeText(HostCapture* c, size_t kernels_from, size_t blocks_from, size_t counters_from) {
  for (size_t i = kernels_from; i < c->kernels.size(); ++i) MakeText(&c->kernels[i]);
  for (size_t i = blocks_from; i < c->blocks.size(); ++i) MakeText(&c->blocks[i].line);
  for (size_t i = counters_from; i < c->counters.size(); ++i) MakeText(&c->counters[i].name);
}

void MakeText(Host* h) {
  MakeText(&h->name);
  for (Chip& c : h->chips) {
    MakeText(&c.generation);
    MakeText(&c.device_type);
  }
}

absl::StatusOr<HostCapture> Reader::Read() {
  if (window_.size() == 0) {
    return absl::InvalidArgumentError("empty file: no XSpace in it");
  }
  // First the host: its chips and the profile's window (Task Environment, wherever it is in
  // the file), so that each device plane's data can be put on absolute times, and handed on,
  // as soon as it is read. Skipping the planes' lines costs nothing: they are length-prefixed.
  RETURN_IF_ERROR(WalkSpace(/*header=*/true));
  RETURN_IF_ERROR(AddCpuDevice());
  if (capture_.host.name.empty()) capture_.host.name = options_.host_name;
  MakeText(&capture_.host);
  if (sink_ != nullptr) RETURN_IF_ERROR(sink_->OnHost(capture_.host));
  RETURN_IF_ERROR(WalkSpace(/*header=*/false));
  Finish();
  MakeText(&capture_, 0, 0, 0);
  for (std::string& w : capture_.warnings) MakeText(&w);
  return std::move(capture_);
}

absl::Status Reader::WalkSpace(bool header) {
  Cursor space(&window_, 0, window_.size(), "XSpace");
  while (!space.done()) {
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(space.ReadTag(&field, &wt));
    switch (field) {
      case XSpaceField::kPlanes: {
        RETURN_IF_ERROR(space.Expect(field, wt, wire::kLengthDelimited));
        Cursor plane(nullptr, 0, 0, "");
        RETURN_IF_ERROR(space.ReadSub("XPlane", &plane));
        RETURN_IF_ERROR(ReadPlane(plane, header));
        break;
      }
      case XSpaceField::kErrors:
      case XSpaceField::kWarnings:
      case XSpaceField::kHostnames: {
        if (!header) {
          RETURN_IF_ERROR(space.Skip(wt));
          break;
        }
        RETURN_IF_ERROR(space.Expect(field, wt, wire::kLengthDelimited));
        std::string s;
        RETURN_IF_ERROR(space.ReadString(&s));
        if (field == XSpaceField::kHostnames) {
          if (capture_.host.name.empty()) capture_.host.name = std::move(s);
        } else {
          capture_.warnings.push_back(absl::StrCat(
              field == XSpaceField::kErrors ? "profiler error: " : "profiler warning: ", s));
        }
        break;
      }
      default:
        RETURN_IF_ERROR(space.Skip(wt));
    }
  }
  return absl::OkStatus();
}

absl::Status Reader::ReadPlane(Cursor plane, bool header) {
  // First pass: the plane's name decides whether it is kept, and its metadata (fields 4-6,
  // written after the lines) must be known before events can be interpreted, so record where
  // each part is and come back.
  PlaneScan scan;
  while (!plane.done()) {
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(plane.ReadTag(&field, &wt));
    if (field == XPlaneField::kName) {
      RETURN_IF_ERROR(plane.Expect(field, wt, wire::kLengthDelimited));
      std::string name;
      RETURN_IF_ERROR(plane.ReadString(&name));
      scan.kind = ClassifyPlane(name, &scan.ordinal, &scan.sparse_core);
      scan.named = true;
      if (scan.kind == PlaneKind::kSkip) return absl::OkStatus();  // e.g. /host:CPU: skip whole.
      scan.name = std::move(name);
      continue;
    }
    std::vector<Extent>* extents = nullptr;
    switch (field) {
      case XPlaneField::kLines:
        extents = &scan.lines;
        break;
      case XPlaneField::kEventMetadata:
        extents = &scan.event_metadata;
        break;
      case XPlaneField::kStatMetadata:
        extents = &scan.stat_metadata;
        break;
      case XPlaneField::kStats:
        extents = &scan.stats;
        break;
      default:
        break;
    }
    if (extents != nullptr) {
      RETURN_IF_ERROR(plane.Expect(field, wt, wire::kLengthDelimited));
      extents->push_back({plane.pos()});
    }
    RETURN_IF_ERROR(plane.Skip(wt));
  }
  if (!scan.named || scan.kind == PlaneKind::kSkip) return absl::OkStatus();
  if (!header && scan.kind == PlaneKind::kTaskEnvironment) return absl::OkStatus();
  if (scan.kind == PlaneKind::kHostMetadata) {
    if (header) {
      host_metadata_end_ = plane.end();
      host_metadata_ = std::move(scan);
    }
    return absl::OkStatus();
  }
  if (scan.kind == PlaneKind::kHostCpu) {
    saw_host_cpu_ = true;
    if (header || cpu_chip_ < 0) return absl::OkStatus();
  }
  return ReadDevicePlane(scan, plane.end(), header);
}

absl::Status Reader::ReadDevicePlane(const PlaneScan& scan, int64_t plane_end, bool header) {
  PlaneState state;
  state.kind = scan.kind;
  Cursor c(&window_, 0, plane_end, "XPlane");
  RETURN_IF_ERROR(ReadStatMetadata(scan, c, &state.stat_table));
  // The plane's own stats describe the chip (or the window): the header's pass reads them.
  std::vector<RawStat> plane_stats;
  for (size_t i = 0; header && i < scan.stats.size(); ++i) {
    c.Seek(scan.stats[i].pos);
    Span span;
    RETURN_IF_ERROR(c.ReadSpan(&span));
    RawStat stat;
    if (!ParseRawStat(span, &stat))
      return wire::MalformedAt(span.offset(), "bad XStat in XPlane.stats");
    plane_stats.push_back(std::move(stat));
  }

  if (scan.kind == PlaneKind::kTaskEnvironment) {
    for (const RawStat& s : plane_stats) {
      Stat kind = state.stat_table.Kind(s.metadata_id);
      if (kind == Stat::kProfileStartTime) {
        capture_.host.profile_start_ns = static_cast<int64_t>(StatUint(s));
      } else if (kind == Stat::kProfileStopTime) {
        capture_.host.profile_stop_ns = static_cast<int64_t>(StatUint(s));
      }
    }
    return absl::OkStatus();
  }

  if (header) return ReadPlaneHeader(scan, state, plane_stats);
  ASSIGN_OR_RETURN(state.chip, DataPlaneChip(scan, &state));
  if (state.chip < 0) return absl::OkStatus();
  const size_t blocks_before = capture_.blocks.size();
  const size_t counters_before = capture_.counters.size();
  state.piece_kernels = capture_.kernels.size();

  RETURN_IF_ERROR(ReadEventMetadata(scan, c, &state));
  if (sink_ != nullptr) RETURN_IF_ERROR(NoteModules(scan, c, state));
  for (const Extent& e : scan.lines) {
    c.Seek(e.pos);
    Cursor line(nullptr, 0, 0, "");
    RETURN_IF_ERROR(c.ReadSub("XLine", &line));
    RETURN_IF_ERROR(ReadLine(line, &state));
  }
  return EndPlane(&state, blocks_before, counters_before);
}

absl::Status Reader::ReadPlaneHeader(const PlaneScan& scan, const PlaneState& state,
                                     const std::vector<RawStat>& plane_stats) {
  for (const RawStat& s : plane_stats) {
    if (state.stat_table.Kind(s.metadata_id) == Stat::kDroppedTraces) {
      notes_[scan.ordinal].dropped_traces += static_cast<int64_t>(StatUint(s));
    }
  }
  // A SparseCore plane's chip is its TPU plane's, wherever that is in the file.
  if (scan.kind == PlaneKind::kSparseCore) return absl::OkStatus();
  ASSIGN_OR_RETURN(Chip chip, ReadChip(scan, state, plane_stats));
  if (chip.kind == DeviceKind::kTpu) {
    chip_of_tpu_ordinal_.try_emplace(chip.ordinal, static_cast<int>(capture_.host.chips.size()));
  }
  capture_.host.chips.push_back(std::move(chip));
  return absl::OkStatus();
}

absl::StatusOr<int> Reader::DataPlaneChip(const PlaneScan& scan, PlaneState* state) {
  if (scan.kind == PlaneKind::kHostCpu) return cpu_chip_;
  if (scan.kind == PlaneKind::kSparseCore) {
    auto it = chip_of_tpu_ordinal_.find(scan.ordinal);
    if (it == chip_of_tpu_ordinal_.end()) {
      capture_.warnings.push_back(absl::StrCat("plane \"", scan.name, "\": no ",
                                               xspace::kTpuPlanePrefix, scan.ordinal,
                                               " plane for its chip; its data is skipped"));
      return -1;
    }
    state->line_prefix = absl::StrCat(kSparseCoreLinePrefix, scan.sparse_core, "/");
    return it->second;
  }
  // The same planes in the same order as the header's pass: the next chip is this plane's.
  const int chip = data_planes_++;
  if (static_cast<size_t>(chip) >= capture_.host.chips.size()) {
    return absl::InternalError("a device plane appeared between the reader's passes");
  }
  return chip;
}

absl::StatusOr<Chip> Reader::ReadChip(const PlaneScan& scan, const PlaneState& state,
                                      const std::vector<RawStat>& plane_stats) {
  Chip chip;
  chip.kind = scan.kind == PlaneKind::kTpu   ? DeviceKind::kTpu
              : scan.kind == PlaneKind::kCpu ? DeviceKind::kCpu
                                             : DeviceKind::kGpu;
  chip.ordinal = scan.ordinal;
  // Fallbacks for the pod-wide id when core_details does not give it, as XProf's Perf
  // Counters tool reads it: global_chip_id, else device_id.
  int64_t global_chip_id = -1, device_id = -1;
  for (const RawStat& s : plane_stats) {
    switch (state.stat_table.Kind(s.metadata_id)) {
      case Stat::kGlobalChipId:
        global_chip_id = static_cast<int64_t>(StatUint(s));
        break;
      case Stat::kDeviceId:
        device_id = static_cast<int64_t>(StatUint(s));
        break;
      case Stat::kDeviceTypeString:
        RETURN_IF_ERROR(StatString(state, s, &chip.device_type));
        break;
      case Stat::kPeakTeraflops:
        chip.peak_tflops = StatNumber(s);
        break;
      case Stat::kPeakHbmBw:
        chip.peak_hbm_gbps = StatNumber(s);
        break;
      case Stat::kCoreDetails: {
        // A small CoreDetails message; only its global chip id matters here.
        Span cd(reinterpret_cast<const uint8_t*>(s.str.data()),
                reinterpret_cast<const uint8_t*>(s.str.data()) + s.str.size(), 0);
        uint32_t field;
        WireType wt;
        uint64_t v;
        chip.global_id = 0;  // Present but zero-valued fields are omitted on the wire.
        while (!cd.done() && cd.ReadTag(&field, &wt)) {
          if (field == CoreDetailsField::kGlobalChipId && wt == wire::kVarint &&
              cd.ReadVarint(&v)) {
            chip.global_id = static_cast<int64_t>(v);
          } else if (!cd.Skip(wt)) {
            break;
          }
        }
        break;
      }
      default:
        break;
    }
  }
  if (chip.global_id < 0) chip.global_id = global_chip_id >= 0 ? global_chip_id : device_id;
  if (chip.kind == DeviceKind::kCpu && chip.device_type.empty()) chip.device_type = kCpuDeviceType;
  if (const ChipGeneration* g = FindGenerationByDeviceType(chip.device_type);
      g != nullptr && chip.kind == DeviceKind::kTpu) {
    chip.generation = g->name;
    if (chip.peak_tflops <= 0) chip.peak_tflops = g->peak_tflops;
    if (chip.peak_hbm_gbps <= 0) chip.peak_hbm_gbps = g->peak_hbm_gbps;
  }
  return chip;
}

absl::Status Reader::EndPlane(PlaneState* state, size_t blocks_before, size_t counters_before) {
  if (!state->perf.empty()) {
    // A plane in pieces has handed its earlier kernels on: its `counters_<kernel>` lines keep
    // their own times then.
    if (!state->split) state->perf.PlaceExecutions(KernelRuns(*state, blocks_before));
    // Perf samples come from many lines and already hold absolute times: after the others'.
    const Chip& chip = capture_.host.chips[state->chip];
    const size_t perf_from = capture_.counters.size();
    state->perf.Finish(state->chip, chip.generation, options_.perf_counter_scaling,
                       &capture_.counters, &notes_[chip.ordinal]);
    counter_line_ns_.resize(capture_.counters.size(), 0);
    for (size_t i = perf_from; i < counter_line_ns_.size(); ++i) counter_line_ns_[i] = kAbsolute;
  }
  if (sink_ == nullptr) {
    MakeAbsolute(blocks_before, counters_before);
    ResolveModules(state->piece_kernels);
    return absl::OkStatus();
  }
  if (state->split) {
    // The lines and series the pieces before this one emptied, and ended with nothing more.
    auto empty_block = [](const EventBlock& b) { return b.size() == 0; };
    capture_.blocks.erase(
        std::remove_if(capture_.blocks.begin(), capture_.blocks.end(), empty_block),
        capture_.blocks.end());
    size_t kept = 0;
    for (size_t i = 0; i < capture_.counters.size(); ++i) {
      if (capture_.counters[i].time_ns.empty()) continue;
      if (kept != i) {
        capture_.counters[kept] = std::move(capture_.counters[i]);
        counter_line_ns_[kept] = counter_line_ns_[i];
      }
      ++kept;
    }
    capture_.counters.resize(kept);
    counter_line_ns_.resize(kept);
  }
  RETURN_IF_ERROR(HandPiece(state));
  std::vector<EventBlock>().swap(capture_.blocks);
  std::vector<CounterSeries>().swap(capture_.counters);
  counter_line_ns_.clear();
  return absl::OkStatus();
}

absl::flat_hash_map<std::string, std::vector<std::pair<int64_t, int64_t>>> Reader::KernelRuns(
    const PlaneState& state, size_t blocks_from) const {
  absl::flat_hash_map<std::string, std::vector<std::pair<int64_t, int64_t>>> runs;
  const absl::flat_hash_set<std::string> wanted = state.perf.ExecutionKernels();
  if (wanted.empty()) return runs;
  for (size_t b = blocks_from; b < capture_.blocks.size(); ++b) {
    const EventBlock& block = capture_.blocks[b];
    if (block.chip != state.chip || !IsKernelLine(block.kind)) continue;
    const int64_t base_ns = Absolute(block.base_ns);  // still the line's own time here
    for (size_t i = 0; i < block.size(); ++i) {
      const std::string& name = capture_.kernels[block.kernel[i]].name;
      if (!wanted.contains(name)) continue;
      // Whole ns inside the execution.
      const int64_t begin_ps = block.start_ps[i], end_ps = begin_ps + block.duration_ps[i];
      runs[name].push_back({base_ns + (begin_ps + 999) / 1000, base_ns + end_ps / 1000});
    }
  }
  for (auto& [name, r] : runs) std::sort(r.begin(), r.end());
  return runs;
}

void Reader::MakeAbsolute(size_t blocks_from, size_t counters_from) {
  for (size_t b = blocks_from; b < capture_.blocks.size(); ++b) {
    capture_.blocks[b].base_ns = Absolute(capture_.blocks[b].base_ns);
  }
  for (size_t i = counters_from; i < capture_.counters.size(); ++i) {
    if (counter_line_ns_[i] == kAbsolute) continue;
    const int64_t base = Absolute(counter_line_ns_[i]);
    for (int64_t& t : capture_.counters[i].time_ns) t += base;
  }
}

absl::Status Reader::HandPiece(PlaneState* plane) {
  MakeAbsolute(0, 0);
  ResolveModules(plane->piece_kernels);
  MakeText(&capture_, plane->piece_kernels, 0, 0);
  RETURN_IF_ERROR(sink_->OnPlane(capture_, plane->piece_kernels));
  plane->piece_kernels = capture_.kernels.size();
  return absl::OkStatus();
}

absl::Status Reader::MaybeSplitPlane(PlaneState* plane, LineContext* ctx) {
  if (plane->perf.bytes() > options_.max_piece_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "chip ", capture_.host.chips[plane->chip].ordinal, "'s performance counter samples take ",
        plane->perf.bytes() >> 20, " MiB, past the reader's bound of ",
        options_.max_piece_bytes >> 20, " MiB a plane"));
  }
  size_t held = 0;
  for (const EventBlock& b : capture_.blocks) {
    held += b.start_ps.capacity() * sizeof(int64_t) + b.duration_ps.capacity() * sizeof(int64_t) +
            b.kernel.capacity() * sizeof(uint32_t) + b.collective.capacity() * sizeof(uint64_t);
  }
  for (const CounterSeries& c : capture_.counters) {
    held += c.time_ns.capacity() * sizeof(int64_t) + c.value.capacity() * sizeof(double);
  }
  if (held <= options_.max_piece_bytes) return absl::OkStatus();
  plane->split = true;
  // The line being read goes on after the piece: in a block of its own, its host thread's
  // steps in another made at its next step; its counter series keep their places, emptied.
  EventBlock rest;
  const bool open_block = ctx->block != nullptr;
  if (open_block) {
    rest.chip = ctx->block->chip;
    rest.line = ctx->block->line;
    rest.kind = ctx->block->kind;
  }
  RETURN_IF_ERROR(HandPiece(plane));
  std::vector<EventBlock>().swap(capture_.blocks);
  for (size_t i = 0; i < capture_.counters.size(); ++i) {
    std::vector<int64_t>().swap(capture_.counters[i].time_ns);
    std::vector<double>().swap(capture_.counters[i].value);
    // Samples from here on are relative to their line again (MakeAbsolute made these so).
  }
  if (open_block) {
    rest.base_ns = ctx->timestamp_ns;
    capture_.blocks.push_back(std::move(rest));
    ctx->block = &capture_.blocks.back();
  }
  ctx->ops_block = 0;
  ctx->steps_block = -1;
  return absl::OkStatus();
}

// Reads one entry of a `map<int64, Message>`: returns its key and calls `read_field(value,
// field, wire type)` for each field of the value message. The map key is authoritative: some
// writers leave the value's own id unset.
template <typename ReadField>
absl::Status ReadMapEntry(Cursor entry, const char* value_what, int64_t* key,
                          ReadField read_field) {
  *key = 0;
  while (!entry.done()) {
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(entry.ReadTag(&field, &wt));
    if (field == MapEntryField::kKey) {
      RETURN_IF_ERROR(entry.Expect(field, wt, wire::kVarint));
      uint64_t v;
      RETURN_IF_ERROR(entry.ReadVarint(&v));
      *key = static_cast<int64_t>(v);
    } else if (field == MapEntryField::kValue) {
      RETURN_IF_ERROR(entry.Expect(field, wt, wire::kLengthDelimited));
      Cursor value(nullptr, 0, 0, "");
      RETURN_IF_ERROR(entry.ReadSub(value_what, &value));
      while (!value.done()) {
        RETURN_IF_ERROR(value.ReadTag(&field, &wt));
        RETURN_IF_ERROR(read_field(value, field, wt));
      }
    } else {
      RETURN_IF_ERROR(entry.Skip(wt));
    }
  }
  return absl::OkStatus();
}

absl::Status Reader::ReadStatMetadata(const PlaneScan& scan, Cursor& c, StatTable* table) {
  for (const Extent& e : scan.stat_metadata) {
    c.Seek(e.pos);
    Cursor entry(nullptr, 0, 0, "");
    RETURN_IF_ERROR(c.ReadSub("XPlane.stat_metadata entry", &entry));
    RETURN_IF_ERROR(ReadStatMetadataEntry(entry, table));
  }
  return absl::OkStatus();
}

absl::Status Reader::ReadEventMetadata(const PlaneScan& scan, Cursor& c, PlaneState* state) {
  for (const Extent& e : scan.event_metadata) {
    c.Seek(e.pos);
    Cursor entry(nullptr, 0, 0, "");
    RETURN_IF_ERROR(c.ReadSub("XPlane.event_metadata entry", &entry));
    RETURN_IF_ERROR(ReadEventMetadataEntry(entry, state));
  }
  return absl::OkStatus();
}

absl::Status Reader::ReadStatMetadataEntry(Cursor entry, StatTable* table) {
  int64_t key;
  std::string name;
  RETURN_IF_ERROR(ReadMapEntry(entry, "XStatMetadata", &key,
                               [&](Cursor& value, uint32_t field, WireType wt) -> absl::Status {
                                 if (field != XStatMetadataField::kName) return value.Skip(wt);
                                 RETURN_IF_ERROR(value.Expect(field, wt, wire::kLengthDelimited));
                                 return value.ReadString(&name);
                               }));
  table->Add(key, std::move(name));
  return absl::OkStatus();
}

absl::Status Reader::ReadStatList(Cursor* c, std::vector<RawStat>* out) {
  Span span;
  RETURN_IF_ERROR(c->ReadSpan(&span));
  RawStat stat;
  if (!ParseRawStat(span, &stat)) return wire::MalformedAt(span.offset(), "bad XStat");
  out->push_back(std::move(stat));
  return absl::OkStatus();
}

absl::Status Reader::ReadEventMetadataEntry(Cursor entry, PlaneState* plane) {
  int64_t key;
  EventMeta meta;
  meta.offset = entry.pos();
  std::string name, display_name;
  RETURN_IF_ERROR(ReadMapEntry(
      entry, "XEventMetadata", &key,
      [&](Cursor& value, uint32_t field, WireType wt) -> absl::Status {
        switch (field) {
          case XEventMetadataField::kName:
            RETURN_IF_ERROR(value.Expect(field, wt, wire::kLengthDelimited));
            return value.ReadString(&name);
          case XEventMetadataField::kDisplayName:
            RETURN_IF_ERROR(value.Expect(field, wt, wire::kLengthDelimited));
            return value.ReadString(&display_name);
          case XEventMetadataField::kStats:
            RETURN_IF_ERROR(value.Expect(field, wt, wire::kLengthDelimited));
            return ReadStatList(&value, &meta.stats);
          default:  // `metadata` (serialized HLO) and child ids: skipped without copying.
            return value.Skip(wt);
        }
      }));
  for (const RawStat& s : meta.stats) {
    if (plane->stat_table.Kind(s.metadata_id) == Stat::kPerformanceCounterId) {
      meta.has_perf_id = true;
      meta.perf_id = StatUint(s);
      plane->any_meta_perf_id = true;
    } else if (plane->stat_table.Kind(s.metadata_id) == Stat::kCounterValue) {
      meta.has_counter = true;
      meta.counter = ClampCounterValue(StatNumber(s));
      plane->any_meta_perf_id = true;
    }
  }
  meta.full_name_hash = Fnv1a64(name);
  if (!display_name.empty() && display_name != name) meta.full_name = name;
  meta.name = display_name.empty() ? std::move(name) : std::move(display_name);
  plane->metas[key] = std::move(meta);
  return absl::OkStatus();
}

absl::Status Reader::ScanLineHeader(Cursor rest, std::string* name, int64_t* timestamp_ns) {
  while (!rest.done()) {
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(rest.ReadTag(&field, &wt));
    if (field == XLineField::kName && wt == wire::kLengthDelimited) {
      RETURN_IF_ERROR(rest.ReadString(name));
    } else if (field == XLineField::kTimestampNs && wt == wire::kVarint) {
      uint64_t v;
      RETURN_IF_ERROR(rest.ReadVarint(&v));
      *timestamp_ns = static_cast<int64_t>(v);
    } else {
      RETURN_IF_ERROR(rest.Skip(wt));
    }
  }
  return absl::OkStatus();
}

// Reading whole (no sink), once a line's first chunk is read: room for the events its other
// bytes should hold at the first chunk's bytes an event, an eighth more. A block of millions
// of events grown by doubling was copied as it grew. (In pieces the block's capacity counts
// against ReadOptions::max_piece_bytes, so it grows as it did.)
void ReserveForRest(EventBlock* block, int64_t read_bytes, int64_t rest_bytes) {
  if (block->size() == 0 || read_bytes <= 0 || rest_bytes <= 0) return;
  const double per_byte = static_cast<double>(block->size()) / static_cast<double>(read_bytes);
  const size_t n = block->size() + static_cast<size_t>(per_byte * rest_bytes * 1.125);
  block->start_ps.reserve(n);
  block->duration_ps.reserve(n);
  block->kernel.reserve(n);
  block->collective.reserve(n);
}

// Long: a line read in one pass (its header, its events chunk by chunk, what it adds to the
// plane), the reader's hot path.
absl::Status Reader::ReadLine(Cursor line, PlaneState* plane) {
  LineContext ctx;
  int64_t timestamp_ns = 0;
  std::string name;
  // The header: writers put the name and timestamp before the events.
  int64_t first_event = -1;
  while (!line.done()) {
    const int64_t at = line.pos();
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(line.ReadTag(&field, &wt));
    if (field == XLineField::kName) {
      RETURN_IF_ERROR(line.Expect(field, wt, wire::kLengthDelimited));
      RETURN_IF_ERROR(line.ReadString(&name));
    } else if (field == XLineField::kTimestampNs) {
      RETURN_IF_ERROR(line.Expect(field, wt, wire::kVarint));
      uint64_t v;
      RETURN_IF_ERROR(line.ReadVarint(&v));
      timestamp_ns = static_cast<int64_t>(v);
    } else if (field == XLineField::kEvents) {
      first_event = at;
      line.Seek(at);
      break;
    } else {
      RETURN_IF_ERROR(line.Skip(wt));
    }
  }
  if (first_event < 0) return absl::OkStatus();  // No events.
  if (name.empty()) {
    // Standard writers emit fields in number order (name, timestamp, events); if one put the
    // name after the events, find it (and the timestamp) before interpreting any event.
    Cursor rest = line;
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(rest.ReadTag(&field, &wt));
    RETURN_IF_ERROR(rest.Expect(field, wt, wire::kLengthDelimited));
    RETURN_IF_ERROR(rest.Skip(wt));
    RETURN_IF_ERROR(ScanLineHeader(rest, &name, &timestamp_ns));
  }
  if (!ClassifyLine(plane->kind, name, &ctx.kind, &ctx.counters)) return absl::OkStatus();
  if (ctx.counters) {
    const absl::string_view kernel = KernelOfCountersLine(name);
    ctx.execution = !kernel.empty();
    ctx.counts.kernel = std::string(kernel);
  }
  // A host thread's ops, apart from the device's own lines: "XLA Ops: tf_XLAEigen/17".
  if (plane->kind == PlaneKind::kHostCpu) name = absl::StrCat(xspace::kXlaOpsLine, ": ", name);
  ctx.timestamp_ns = timestamp_ns;
  ctx.absolute_ns = Absolute(timestamp_ns);
  plane->line_name = plane->line_prefix.empty() ? std::move(name) : plane->line_prefix + name;
  // A SparseCore plane's lines hold both counter samples and scopes.
  const bool sparse_core = plane->kind == PlaneKind::kSparseCore;
  ctx.ops_block = capture_.blocks.size();
  if (!ctx.counters || sparse_core) {
    capture_.blocks.emplace_back();
    ctx.block = &capture_.blocks.back();
    ctx.block->chip = plane->chip;
    ctx.block->line = plane->line_name;
    ctx.block->kind = ctx.kind;
    ctx.block->base_ns = timestamp_ns;
  }

  // Events: decode straight from the window a chunk at a time; a field that does not fit in
  // a chunk (or is damaged) goes through the Cursor, which grows the window or reports where
  // the damage is.
  constexpr int64_t kChunkBytes = 1 << 20;
  while (!line.done()) {
    const int64_t avail = std::min<int64_t>(line.end() - line.pos(), kChunkBytes);
    const uint8_t* p;
    RETURN_IF_ERROR(window_.View(line.pos(), static_cast<size_t>(avail), &p));
    Span chunk(p, p + avail, line.pos());
    while (!chunk.done()) {
      const Span save = chunk;
      uint32_t field;
      WireType wt;
      if (!chunk.ReadTag(&field, &wt)) {
        chunk = save;
        break;
      }
      if (field == XLineField::kEvents && wt == wire::kLengthDelimited) {
        Span ev;
        if (!chunk.ReadSub(&ev)) {
          chunk = save;
          break;
        }
        RETURN_IF_ERROR(ReadEvent(ev, plane, &ctx));
      } else if (!chunk.Skip(wt)) {
        chunk = save;
        break;
      }
    }
    const int64_t consumed = chunk.offset() - line.pos();
    if (sink_ != nullptr) RETURN_IF_ERROR(MaybeSplitPlane(plane, &ctx));
    if (sink_ == nullptr && line.pos() == first_event && ctx.block != nullptr) {
      ReserveForRest(ctx.block, consumed, line.end() - line.pos() - consumed);
    }
    if (consumed > 0) {
      line.Seek(line.pos() + consumed);
      continue;
    }
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(line.ReadTag(&field, &wt));
    if (field == XLineField::kEvents) {
      RETURN_IF_ERROR(line.Expect(field, wt, wire::kLengthDelimited));
      Span ev;
      RETURN_IF_ERROR(line.ReadSpan(&ev));
      RETURN_IF_ERROR(ReadEvent(ev, plane, &ctx));
    } else {
      RETURN_IF_ERROR(line.Skip(wt));
    }
  }
  if (ctx.execution && !ctx.counts.counts.empty()) plane->perf.AddExecution(std::move(ctx.counts));
  // Only counter samples: no block of scopes. A host thread that ran no op: no block.
  if ((sparse_core || plane->kind == PlaneKind::kHostCpu) &&
      capture_.blocks[ctx.ops_block].size() == 0) {
    capture_.blocks.erase(capture_.blocks.begin() + static_cast<ptrdiff_t>(ctx.ops_block));
  }
  return absl::OkStatus();
}

// Whether podprof reads the value of an event's stat of this kind. Most stats on events are
// none of these (device_offset_ps).
inline bool ReadsEventStat(Stat kind) {
  return kind == Stat::kDeviceDurationPs || kind == Stat::kAllReduceUniqueId ||
         kind == Stat::kCounterValue || kind == Stat::kPerformanceCounterId ||
         kind == Stat::kDroppedTraces;
}

// An event's stat of a kind podprof reads, its value from field `value_field`, into `f`.
void StoreEventStat(Stat kind, uint32_t value_field, uint64_t raw, EventFields* f) {
  double d;
  std::memcpy(&d, &raw, sizeof(double));
  const bool is_double = value_field == XStatField::kDoubleValue;
  switch (kind) {
    case Stat::kDeviceDurationPs:
      if (!is_double) f->device_duration_ps = static_cast<int64_t>(raw);
      break;
    case Stat::kAllReduceUniqueId:
      if (!is_double) f->collective = raw;
      break;
    case Stat::kCounterValue:
      // As XProf's tools read it (ClampCounterValue): a count is never negative.
      f->has_counter = true;
      f->counter = ClampCounterValue(is_double ? d
                                     : value_field == XStatField::kInt64Value
                                         ? static_cast<double>(static_cast<int64_t>(raw))
                                         : static_cast<double>(raw));
      break;
    case Stat::kPerformanceCounterId:
      f->has_perf_id = true;
      f->perf_id = is_double ? (d > 0 ? static_cast<uint64_t>(d) : 0) : raw;
      break;
    case Stat::kDroppedTraces:
      if (!is_double) f->dropped_traces += static_cast<int64_t>(raw);
      break;
    default:
      break;
  }
}

// One XStat of an event: the value of the stats podprof reads from events. False when damaged.
bool ParseEventStat(Span st, const StatTable& table, EventFields* f) {
  // The layout every writer uses, read straight through: the metadata id, then the value as
  // a uint64. A stat whose value podprof does not read is done once its id is known, without
  // decoding the value (its bytes lie within the stat's checked length): on most events that
  // is the largest varint they hold (device_offset_ps).
  constexpr uint8_t kIdTag = wire::OneByteTag(XStatField::kMetadataId, wire::kVarint);
  constexpr uint8_t kUintTag = wire::OneByteTag(XStatField::kUint64Value, wire::kVarint);
  Span head = st;
  uint64_t v = 0, raw = 0;
  if (head.TakeByte(kIdTag) && head.ReadVarint(&v)) {
    const Stat kind = table.Kind(static_cast<int64_t>(v));
    if (!ReadsEventStat(kind)) return true;
    if (head.TakeByte(kUintTag) && head.ReadVarint(&raw) && head.done()) {
      StoreEventStat(kind, XStatField::kUint64Value, raw, f);
      return true;
    }
  }
  // Any other layout, field by field.
  int64_t stat_id = 0;
  uint32_t value_field = 0, field;
  WireType wt;
  while (!st.done()) {
    if (!st.ReadTag(&field, &wt)) return false;
    bool ok;
    if (field == XStatField::kMetadataId && wt == wire::kVarint) {
      ok = st.ReadVarint(&v);
      stat_id = static_cast<int64_t>(v);
    } else if ((field == XStatField::kUint64Value || field == XStatField::kInt64Value) &&
               wt == wire::kVarint) {
      ok = st.ReadVarint(&raw);
      value_field = field;
    } else if (field == XStatField::kDoubleValue && wt == wire::kFixed64) {
      ok = st.ReadFixed64(&raw);
      value_field = field;
    } else {
      ok = st.Skip(wt);
    }
    if (!ok) return false;
  }
  const Stat kind = table.Kind(stat_id);
  if (value_field != 0 && ReadsEventStat(kind)) StoreEventStat(kind, value_field, raw, f);
  return true;
}

// The fields of one XEvent.
absl::Status ParseEvent(Span ev, const StatTable& table, EventFields* f) {
  uint64_t v = 0;
  // The layout every writer emits, fields in number order, each tag one byte: read straight
  // through, without the loop's dispatch on each field. The loop below reads whatever is left
  // (all of an event laid out otherwise).
  constexpr uint8_t kIdTag = wire::OneByteTag(XEventField::kMetadataId, wire::kVarint);
  constexpr uint8_t kOffsetTag = wire::OneByteTag(XEventField::kOffsetPs, wire::kVarint);
  constexpr uint8_t kDurationTag = wire::OneByteTag(XEventField::kDurationPs, wire::kVarint);
  constexpr uint8_t kStatTag = wire::OneByteTag(XEventField::kStats, wire::kLengthDelimited);
  if (ev.TakeByte(kIdTag)) {
    if (!ev.ReadVarint(&v)) return wire::MalformedAt(ev.offset(), "bad field in XEvent");
    f->metadata_id = static_cast<int64_t>(v);
  }
  if (ev.TakeByte(kOffsetTag)) {
    if (!ev.ReadVarint(&v)) return wire::MalformedAt(ev.offset(), "bad field in XEvent");
    f->offset_ps = static_cast<int64_t>(v);
  }
  if (ev.TakeByte(kDurationTag)) {
    if (!ev.ReadVarint(&v)) return wire::MalformedAt(ev.offset(), "bad field in XEvent");
    f->duration_ps = static_cast<int64_t>(v);
  }
  while (ev.TakeByte(kStatTag)) {
    Span st;
    if (!ev.ReadSub(&st)) return wire::MalformedAt(ev.offset(), "bad field in XEvent");
    if (!ParseEventStat(st, table, f)) return wire::MalformedAt(st.offset(), "bad XStat in XEvent");
  }
  uint32_t field;
  WireType wt;
  while (!ev.done()) {
    if (!ev.ReadTag(&field, &wt)) return wire::MalformedAt(ev.offset(), "bad field in XEvent");
    bool ok = true;
    switch (field) {
      case XEventField::kMetadataId:
        ok = wt == wire::kVarint && ev.ReadVarint(&v);
        f->metadata_id = static_cast<int64_t>(v);
        break;
      case XEventField::kOffsetPs:
        ok = wt == wire::kVarint && ev.ReadVarint(&v);
        f->offset_ps = static_cast<int64_t>(v);
        break;
      case XEventField::kDurationPs:
        ok = wt == wire::kVarint && ev.ReadVarint(&v);
        f->duration_ps = static_cast<int64_t>(v);
        break;
      case XEventField::kStats: {
        Span st;
        ok = wt == wire::kLengthDelimited && ev.ReadSub(&st);
        if (ok && !ParseEventStat(st, table, f)) {
          return wire::MalformedAt(st.offset(), "bad XStat in XEvent");
        }
        break;
      }
      case XEventField::kNumOccurrences:  // Aggregated events carry no time of their own.
      default:
        ok = ev.Skip(wt);
    }
    if (!ok) return wire::MalformedAt(ev.offset(), "bad field in XEvent");
  }
  return absl::OkStatus();
}

absl::Status Reader::NoteModules(const PlaneScan& scan, Cursor& c, const PlaneState& plane) {
  for (const Extent& e : scan.lines) {
    c.Seek(e.pos);
    Cursor line(nullptr, 0, 0, "");
    RETURN_IF_ERROR(c.ReadSub("XLine", &line));
    std::string name;
    int64_t timestamp_ns = 0;
    RETURN_IF_ERROR(ScanLineHeader(line, &name, &timestamp_ns));
    LineKind kind;
    bool counters;
    if (!ClassifyLine(plane.kind, name, &kind, &counters) || kind != LineKind::kModules) continue;
    while (!line.done()) {
      uint32_t field;
      WireType wt;
      RETURN_IF_ERROR(line.ReadTag(&field, &wt));
      if (field != XLineField::kEvents || wt != wire::kLengthDelimited) {
        RETURN_IF_ERROR(line.Skip(wt));
        continue;
      }
      Span ev;
      RETURN_IF_ERROR(line.ReadSpan(&ev));
      EventFields f;
      RETURN_IF_ERROR(ParseEvent(ev, plane.stat_table, &f));
      auto meta = plane.metas.find(f.metadata_id);
      std::string module;
      uint64_t id;
      if (meta != plane.metas.end() && ParseModuleName(meta->second.name, &module, &id)) {
        module_of_program_.try_emplace(id, std::move(module));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Reader::ReadEvent(Span ev, PlaneState* plane, LineContext* ctx) {
  if (plane->kind == PlaneKind::kHostCpu) return ReadCpuEvent(ev, plane, ctx);
  EventFields f;
  RETURN_IF_ERROR(ParseEvent(ev, plane->stat_table, &f));
  if (ABSL_PREDICT_FALSE(f.dropped_traces > 0)) NoteDroppedTraces(*plane, f.dropped_traces);
  // On a SparseCore plane's lines, events that are no counter samples are scopes.
  if (ctx->counters && (TakeCounterSample(plane, ctx, &f) || ctx->block == nullptr)) {
    return absl::OkStatus();
  }
  uint32_t kernel;
  std::vector<uint32_t>& dense = plane->dense_kernel_of[static_cast<int>(ctx->kind)];
  if (f.metadata_id >= 0 && f.metadata_id < static_cast<int64_t>(dense.size()) &&
      dense[f.metadata_id] != kNoKernel) {
    kernel = dense[f.metadata_id];
  } else {
    ASSIGN_OR_RETURN(kernel, KernelFor(plane, ctx->kind, f.metadata_id));
  }
  EventBlock* block = ctx->block;
  // Device-measured durations are exact; the event's own duration went through the
  // device-to-host clock mapping.
  block->start_ps.push_back(f.offset_ps);
  block->duration_ps.push_back(f.device_duration_ps >= 0 ? f.device_duration_ps : f.duration_ps);
  block->kernel.push_back(kernel);
  block->collective.push_back(f.collective);
  return absl::OkStatus();
}

absl::Status Reader::ReadCpuEvent(Span ev, PlaneState* plane, LineContext* ctx) {
  uint64_t v = 0, program_id = 0, run_id = 0;
  int64_t metadata_id = 0, offset_ps = 0, duration_ps = 0;
  bool op = false, step = false;
  std::string module;
  uint32_t field;
  WireType wt;
  while (!ev.done()) {
    if (!ev.ReadTag(&field, &wt)) return wire::MalformedAt(ev.offset(), "bad field in XEvent");
    bool ok = true;
    if ((field == XEventField::kMetadataId || field == XEventField::kOffsetPs ||
         field == XEventField::kDurationPs) &&
        wt == wire::kVarint) {
      ok = ev.ReadVarint(&v);
      (field == XEventField::kMetadataId ? metadata_id
       : field == XEventField::kOffsetPs ? offset_ps
                                         : duration_ps) = static_cast<int64_t>(v);
    } else if (field == XEventField::kStats && wt == wire::kLengthDelimited) {
      Span st;
      RawStat stat;
      if (!ev.ReadSub(&st) || !ParseRawStat(st, &stat)) {
        return wire::MalformedAt(ev.offset(), "bad XStat in XEvent");
      }
      switch (plane->stat_table.Kind(stat.metadata_id)) {
        case Stat::kHloOp:
          op = true;
          break;
        case Stat::kHloModule:
          RETURN_IF_ERROR(StatString(*plane, stat, &module));
          break;
        case Stat::kProgramId:
          program_id = StatUint(stat);
          break;
        case Stat::kRunId:
          run_id = StatUint(stat);
          break;
        case Stat::kStepNum:
          step = true;
          break;
        default:
          break;
      }
    } else {
      ok = ev.Skip(wt);
    }
    if (!ok) return wire::MalformedAt(ev.offset(), "bad field in XEvent");
  }
  if (!op && !step) return absl::OkStatus();
  uint32_t kernel;
  uint64_t collective = 0;
  EventBlock* block;
  if (op) {
    ASSIGN_OR_RETURN(auto k, CpuKernelFor(plane, metadata_id, program_id, module));
    kernel = k.first;
    // Every process of a JAX job runs a program with the same run id (its launch id), so
    // program, run and op name identify one collective on every host.
    if (k.second) {
      collective =
          Fnv1a64(absl::StrCat(program_id, "/", run_id, "/", capture_.kernels[kernel].name)) | 1;
    }
    block = &capture_.blocks[ctx->ops_block];
  } else {
    ASSIGN_OR_RETURN(kernel, KernelFor(plane, LineKind::kSteps, metadata_id));
    if (ctx->steps_block < 0) {
      ctx->steps_block = static_cast<int64_t>(capture_.blocks.size());
      EventBlock& steps = capture_.blocks.emplace_back();
      steps.chip = plane->chip;
      steps.line = std::string(xspace::kStepsLine);
      steps.kind = LineKind::kSteps;
      steps.base_ns = ctx->timestamp_ns;
      ctx->block = &capture_.blocks[ctx->ops_block];
    }
    block = &capture_.blocks[static_cast<size_t>(ctx->steps_block)];
  }
  block->start_ps.push_back(offset_ps);
  block->duration_ps.push_back(duration_ps);
  block->kernel.push_back(kernel);
  block->collective.push_back(collective);
  return absl::OkStatus();
}

absl::StatusOr<std::pair<uint32_t, bool>> Reader::CpuKernelFor(PlaneState* plane,
                                                               int64_t metadata_id,
                                                               uint64_t program_id,
                                                               const std::string& module) {
  auto hit = plane->cpu_kernel_of.find({metadata_id, program_id});
  if (hit != plane->cpu_kernel_of.end()) return hit->second;
  KernelDef def;
  auto meta = plane->metas.find(metadata_id);
  def.name = meta != plane->metas.end() ? meta->second.name
                                        : absl::StrCat("<unknown metadata ", metadata_id, ">");
  def.hlo_hash = Fnv1a64(def.name);
  def.program_id = program_id;
  def.module = module;
  if (auto prog = hlo_programs_.find(program_id); prog != hlo_programs_.end()) {
    if (def.module.empty()) def.module = prog->second.name;
    if (auto op = prog->second.ops.find(def.name); op != prog->second.ops.end()) {
      def.category = op->second.opcode;
      def.tf_op = op->second.op_name;
    }
  }
  // Without the program's HLO, an op named after a collective's opcode ("all-reduce.3") is one.
  if (def.category.empty()) {
    absl::string_view base = def.name;
    if (size_t dot = base.rfind('.'); dot != absl::string_view::npos) base = base.substr(0, dot);
    def.category = IsCollectiveOpcode(base) ? std::string(base) : "unknown";
  }
  const bool collective = IsCollectiveOpcode(def.category);
  std::string key = absl::StrCat(static_cast<int>(LineKind::kOps), "|", def.program_id, "|",
                                 def.hlo_hash, "|", def.name, "|", def.category);
  auto [it, inserted] = kernel_index_.try_emplace(key, capture_.kernels.size());
  if (inserted) capture_.kernels.push_back(std::move(def));
  std::pair<uint32_t, bool> value{it->second, collective};
  plane->cpu_kernel_of.emplace(std::make_pair(metadata_id, program_id), value);
  return value;
}

absl::Status Reader::AddCpuDevice() {
  if (!saw_host_cpu_ || !capture_.host.chips.empty()) return absl::OkStatus();
  Chip chip;
  chip.kind = DeviceKind::kCpu;
  chip.device_type = kCpuDeviceType;
  cpu_chip_ = static_cast<int>(capture_.host.chips.size());
  capture_.host.chips.push_back(std::move(chip));
  if (!host_metadata_.has_value()) return absl::OkStatus();
  return ReadHloPrograms(*host_metadata_, host_metadata_end_);
}

absl::Status Reader::ReadHloPrograms(const PlaneScan& scan, int64_t plane_end) {
  PlaneState state;
  Cursor c(&window_, 0, plane_end, "XPlane");
  RETURN_IF_ERROR(ReadStatMetadata(scan, c, &state.stat_table));
  RETURN_IF_ERROR(ReadEventMetadata(scan, c, &state));
  for (const auto& [id, meta] : state.metas) {
    const RawStat* hlo = nullptr;
    uint64_t program_id = 0;
    for (const RawStat& s : meta.stats) {
      const Stat kind = state.stat_table.Kind(s.metadata_id);
      if (kind == Stat::kHloProto && s.type == RawStat::Type::kString) hlo = &s;
      if (kind == Stat::kProgramId) program_id = StatUint(s);
    }
    if (hlo == nullptr) continue;
    HloModuleOps ops;
    if (absl::Status st = ReadHloModuleOps(hlo->str, &ops); !st.ok()) {
      // The ops are still read, by name alone; say which program lacks its HLO.
      capture_.warnings.push_back(
          absl::StrCat(xspace::kHostMetadataPlane, ": program ", meta.name, ": ", st.message()));
      continue;
    }
    hlo_programs_.insert_or_assign(program_id, std::move(ops));
  }
  return absl::OkStatus();
}

void Reader::NoteDroppedTraces(const PlaneState& plane, int64_t n) {
  notes_[capture_.host.chips[plane.chip].ordinal].dropped_traces += n;
}

bool Reader::TakeCounterSample(PlaneState* plane, LineContext* ctx, EventFields* f) {
  // As XProf's tools read a counter: its id and value from the event, else from its metadata;
  // without an id, the metadata's id when that is a register of the chip's table.
  const EventMeta* meta = nullptr;
  if ((!f->has_perf_id || !f->has_counter) && plane->any_meta_perf_id) {
    auto it = plane->metas.find(f->metadata_id);
    if (it != plane->metas.end()) meta = &it->second;
  }
  if (!f->has_perf_id && meta != nullptr && meta->has_perf_id) {
    f->has_perf_id = true;
    f->perf_id = meta->perf_id;
  }
  if (!f->has_counter && meta != nullptr && meta->has_counter) {
    f->has_counter = true;
    f->counter = meta->counter;
  }
  const std::string& generation = capture_.host.chips[plane->chip].generation;
  if (!f->has_perf_id && f->has_counter && f->metadata_id > 0 &&
      PerfCounterName(generation, static_cast<uint64_t>(f->metadata_id))) {
    f->has_perf_id = true;
    f->perf_id = static_cast<uint64_t>(f->metadata_id);
  }
  // An id of 0 is no register: XProf takes the metadata's id then too.
  if (f->has_perf_id && f->perf_id == 0) f->perf_id = static_cast<uint64_t>(f->metadata_id);
  if (f->has_perf_id) {
    if (!f->has_counter) {
      ++notes_[capture_.host.chips[plane->chip].ordinal].missing_values;
    } else if (ctx->execution) {
      const int64_t begin = ctx->absolute_ns + f->offset_ps / 1000;
      const int64_t end = ctx->absolute_ns + (f->offset_ps + f->duration_ps) / 1000;
      ExecutionCounts& e = ctx->counts;
      if (e.counts.empty() || begin < e.begin_ns) e.begin_ns = begin;
      if (e.counts.empty() || end > e.end_ns) e.end_ns = end;
      e.counts[f->perf_id] = f->counter;
    } else {
      plane->perf.Add(f->perf_id, ctx->absolute_ns + f->offset_ps / 1000, f->counter);
    }
    return true;
  }
  if (!f->has_counter) return false;
  AddLineCounterSample(plane, *ctx, *f);
  return true;
}

void Reader::AddLineCounterSample(PlaneState* plane, const LineContext& ctx, const EventFields& f) {
  // Series on `_counters_` are named by their event; elsewhere by line and event, since a
  // utilization line may name its samples after the unit only by the line.
  const bool own_line = plane->line_name == xspace::kCountersLine;
  size_t index = capture_.counters.size();
  bool inserted;
  if (own_line) {
    auto [it, fresh] = plane->counter_of.try_emplace(f.metadata_id, index);
    index = it->second;
    inserted = fresh;
  } else {
    auto [it, fresh] = plane->line_counter_of.try_emplace({plane->line_name, f.metadata_id}, index);
    index = it->second;
    inserted = fresh;
  }
  if (inserted) {
    CounterSeries series;
    series.chip = plane->chip;
    auto meta = plane->metas.find(f.metadata_id);
    series.name =
        meta == plane->metas.end() ? absl::StrCat("counter_", f.metadata_id) : meta->second.name;
    if (!own_line) series.name = absl::StrCat(plane->line_name, "/", series.name);
    capture_.counters.push_back(std::move(series));
    counter_line_ns_.push_back(ctx.timestamp_ns);
  }
  CounterSeries& series = capture_.counters[index];
  series.time_ns.push_back(f.offset_ps / 1000);  // Line start added in EndPlane().
  series.value.push_back(f.counter);
}

// Long: one switch over every stat a kernel's metadata may carry, each filling its field.
absl::StatusOr<uint32_t> Reader::KernelFor(PlaneState* plane, LineKind kind, int64_t metadata_id) {
  auto& cache = plane->kernel_of[static_cast<int>(kind)];
  auto hit = cache.find(metadata_id);
  if (hit != cache.end()) return hit->second;

  KernelDef def;
  auto meta_it = plane->metas.find(metadata_id);
  if (meta_it == plane->metas.end()) {
    // Events must refer to metadata of their plane; keep the event under a placeholder name
    // rather than dropping time, and tell the user.
    def.name = absl::StrCat("<unknown metadata ", metadata_id, ">");
    capture_.warnings.push_back(
        absl::StrCat("plane of chip ", capture_.host.chips[plane->chip].ordinal,
                     ": event refers to missing metadata id ", metadata_id));
  } else {
    const EventMeta& meta = meta_it->second;
    def.name = meta.name;
    def.hlo_hash = meta.full_name_hash;
    def.hlo_text = meta.full_name;
    for (const RawStat& s : meta.stats) {
      auto string_stat = [&](std::string* out) -> absl::Status {
        absl::Status st = StatString(*plane, s, out);
        if (st.ok()) return st;
        return wire::MalformedAt(
            meta.offset, absl::StrCat("in the metadata of event ", def.name, ": ", st.message()));
      };
      switch (plane->stat_table.Kind(s.metadata_id)) {
        case Stat::kHloCategory:
          RETURN_IF_ERROR(string_stat(&def.category));
          break;
        case Stat::kProgramId:
          def.program_id = StatUint(s);
          break;
        case Stat::kFlops:
          def.flops = static_cast<int64_t>(StatNumber(s));
          break;
        case Stat::kBytesAccessed:
          def.bytes_accessed = static_cast<int64_t>(StatNumber(s));
          break;
        case Stat::kSource:
          RETURN_IF_ERROR(string_stat(&def.source));
          break;
        case Stat::kTfOp:
          RETURN_IF_ERROR(string_stat(&def.tf_op));
          break;
        case Stat::kSourceStack:
          RETURN_IF_ERROR(string_stat(&def.source_stack));
          break;
        case Stat::kMosaicMlir:
          RETURN_IF_ERROR(string_stat(&def.mlir));
          break;
        default:
          break;
      }
    }
  }
  switch (kind) {
    case LineKind::kModules: {
      def.category = "xla module";
      uint64_t id;
      if (ParseModuleName(def.name, &def.module, &id)) {
        def.program_id = id;
        module_of_program_.try_emplace(id, def.module);
      } else {
        def.module = def.name;
      }
      break;
    }
    case LineKind::kSteps:
      def.category = "step";
      break;
    case LineKind::kScopes:
      def.category = "scope";
      break;
    case LineKind::kGpuStream:
      if (def.category.empty()) def.category = GpuCategory(plane->line_name, def.name);
      break;
    case LineKind::kOps:
      if (def.category.empty()) def.category = "unknown";
      break;
  }

  std::string key = absl::StrCat(static_cast<int>(kind), "|", def.program_id, "|", def.hlo_hash,
                                 "|", def.name, "|", def.category);
  auto [it, inserted] = kernel_index_.try_emplace(key, capture_.kernels.size());
  if (inserted) capture_.kernels.push_back(std::move(def));
  cache.emplace(metadata_id, it->second);
  if (metadata_id >= 0 && metadata_id < kDenseIds) {
    std::vector<uint32_t>& dense = plane->dense_kernel_of[static_cast<int>(kind)];
    if (dense.size() <= static_cast<size_t>(metadata_id)) dense.resize(metadata_id + 1, kNoKernel);
    dense[metadata_id] = it->second;
  }
  return it->second;
}

absl::Status Reader::StatString(const PlaneState& plane, const RawStat& stat, std::string* out) {
  switch (stat.type) {
    case RawStat::Type::kString:
      *out = stat.str;
      return absl::OkStatus();
    case RawStat::Type::kRef:
      if (const std::string* name = plane.stat_table.Name(static_cast<int64_t>(stat.num.u))) {
        *out = *name;
        return absl::OkStatus();
      }
      return absl::DataLossError(absl::StrCat("ref_value ", stat.num.u, " names no stat metadata"));
    case RawStat::Type::kCompressed:
      return Inflate(stat.str, options_.max_inflated_bytes, out);
    case RawStat::Type::kDouble:
      *out = absl::StrCat(stat.num.d);
      return absl::OkStatus();
    case RawStat::Type::kUint64:
      *out = absl::StrCat(stat.num.u);
      return absl::OkStatus();
    case RawStat::Type::kInt64:
      *out = absl::StrCat(stat.num.i);
      return absl::OkStatus();
    case RawStat::Type::kNone:
      out->clear();
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

double Reader::StatNumber(const RawStat& stat) {
  switch (stat.type) {
    case RawStat::Type::kDouble:
      return stat.num.d;
    case RawStat::Type::kUint64:
      return static_cast<double>(stat.num.u);
    case RawStat::Type::kInt64:
      return static_cast<double>(stat.num.i);
    default:
      return 0;
  }
}

uint64_t Reader::StatUint(const RawStat& stat) {
  switch (stat.type) {
    case RawStat::Type::kDouble:
      return stat.num.d > 0 ? static_cast<uint64_t>(stat.num.d) : 0;
    case RawStat::Type::kUint64:
    case RawStat::Type::kInt64:
      return stat.num.u;
    default:
      return 0;
  }
}

int64_t Reader::Absolute(int64_t line_ns) const {
  // Post-processed captures store line times relative to the profile start; make them
  // absolute. Older captures already hold absolute times and have no Task Environment.
  const int64_t start = capture_.host.profile_start_ns;
  return start > 0 && line_ns < kAbsoluteLineTimestampNs ? start + line_ns : line_ns;
}

void Reader::ResolveModules(size_t first_kernel) {
  for (size_t i = first_kernel; i < capture_.kernels.size(); ++i) {
    KernelDef& k = capture_.kernels[i];
    if (!k.module.empty() || k.program_id == 0) continue;
    auto it = module_of_program_.find(k.program_id);
    if (it != module_of_program_.end()) k.module = it->second;
  }
}

void Reader::Finish() {
  // A kernel whose module was named only by a later plane (read whole, not in pieces).
  if (sink_ == nullptr) ResolveModules(0);
  // Once per chip, whichever of its planes the notes came from.
  for (const auto& [ordinal, notes] : notes_) {
    auto chip = chip_of_tpu_ordinal_.find(ordinal);
    const std::string* generation = chip == chip_of_tpu_ordinal_.end()
                                        ? nullptr
                                        : &capture_.host.chips[chip->second].generation;
    AppendChipWarnings(ordinal, generation == nullptr ? "" : *generation, notes,
                       &capture_.warnings);
  }
}

}  // namespace

absl::StatusOr<HostCapture> ReadXSpace(ByteSource& source, const ReadOptions& options) {
  Reader reader(source, options, nullptr);
  return reader.Read();
}

absl::StatusOr<HostCapture> ReadXSpaceInPieces(ByteSource& source, const ReadOptions& options,
                                               PieceSink* sink) {
  Reader reader(source, options, sink);
  return reader.Read();
}

absl::StatusOr<HostCapture> ReadXSpaceFile(const std::string& path, ReadOptions options,
                                           PieceSink* sink) {
  auto source = FileSource::Open(path);
  if (!source.ok()) return source.status();
  if (options.host_name.empty()) options.host_name = HostNameFromPath(path);
  absl::StatusOr<HostCapture> capture =
      sink == nullptr ? ReadXSpace(**source, options) : ReadXSpaceInPieces(**source, options, sink);
  if (!capture.ok()) {
    return absl::Status(capture.status().code(),
                        absl::StrCat(path, ": ", capture.status().message()));
  }
  return capture;
}

std::string HostNameFromPath(absl::string_view path) {
  size_t slash = path.rfind('/');
  absl::string_view base = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  absl::ConsumeSuffix(&base, ".xplane.pb");
  return std::string(base);
}

}  // namespace podprof::trace
