// Device lines: the data of TPU, SparseCore, GPU and CPU device planes (the kernels, modules,
// steps and scopes of their lines, their counter samples), and the chip each plane describes.
// The event loop (ReadLine, ReadEvent, ParseEvent, ParseEventStat) is the reader's hot path: it
// stays in this one translation unit, its helpers inlined, and reads a host CPU thread's events
// through the same loop, chosen once per line.
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "trace/chip_catalog.h"
#include "trace/perf_samples.h"
#include "trace/wire.h"
#include "trace/xspace_reader_internal.h"
#include "trace/xspace_schema.h"

namespace podprof::trace::xspace_internal {
namespace {

using wire::Cursor;
using wire::Span;
using wire::WireType;

using xspace::CoreDetailsField;
using xspace::Stat;
using xspace::XEventField;
using xspace::XLineField;
using xspace::XStatField;

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

// One event of a device line.
absl::Status ReadEvent(ReaderState& r, Span ev, PlaneState* plane, LineContext* ctx) {
  EventFields f;
  RETURN_IF_ERROR(ParseEvent(ev, plane->stat_table, &f));
  if (ABSL_PREDICT_FALSE(f.dropped_traces > 0)) NoteDroppedTraces(r, *plane, f.dropped_traces);
  // On a SparseCore plane's lines, events that are no counter samples are scopes.
  if (ctx->counters && (TakeCounterSample(r, plane, ctx, &f) || ctx->block == nullptr)) {
    return absl::OkStatus();
  }
  uint32_t kernel;
  std::vector<uint32_t>& dense = plane->dense_kernel_of[static_cast<int>(ctx->kind)];
  if (f.metadata_id >= 0 && f.metadata_id < static_cast<int64_t>(dense.size()) &&
      dense[f.metadata_id] != kNoKernel) {
    kernel = dense[f.metadata_id];
  } else {
    ASSIGN_OR_RETURN(kernel, KernelFor(r, plane, ctx->kind, f.metadata_id));
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

// A line's name and timestamp: writers put them before the events. `first_event`: where the
// events start (the cursor is left there), -1 when the line has none.
absl::Status ReadLineHeader(Cursor& line, std::string* name, int64_t* timestamp_ns,
                            int64_t* first_event) {
  *first_event = -1;
  while (!line.done()) {
    const int64_t at = line.pos();
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(line.ReadTag(&field, &wt));
    if (field == XLineField::kName) {
      RETURN_IF_ERROR(line.Expect(field, wt, wire::kLengthDelimited));
      RETURN_IF_ERROR(line.ReadString(name));
    } else if (field == XLineField::kTimestampNs) {
      RETURN_IF_ERROR(line.Expect(field, wt, wire::kVarint));
      uint64_t v;
      RETURN_IF_ERROR(line.ReadVarint(&v));
      *timestamp_ns = static_cast<int64_t>(v);
    } else if (field == XLineField::kEvents) {
      *first_event = at;
      line.Seek(at);
      return absl::OkStatus();
    } else {
      RETURN_IF_ERROR(line.Skip(wt));
    }
  }
  return absl::OkStatus();
}

// The line's context, and its block unless it holds counter samples alone, once its name has
// classified it; false for a line podprof does not keep.
bool StartLine(ReaderState& r, PlaneState* plane, std::string name, int64_t timestamp_ns,
               LineContext* ctx) {
  if (!ClassifyLine(plane->kind, name, &ctx->kind, &ctx->counters)) return false;
  if (ctx->counters) {
    const absl::string_view kernel = KernelOfCountersLine(name);
    ctx->execution = !kernel.empty();
    ctx->counts.kernel = std::string(kernel);
  }
  // A host thread's ops, apart from the device's own lines: "XLA Ops: tf_XLAEigen/17".
  if (plane->kind == PlaneKind::kHostCpu) name = absl::StrCat(xspace::kXlaOpsLine, ": ", name);
  ctx->timestamp_ns = timestamp_ns;
  ctx->absolute_ns = r.Absolute(timestamp_ns);
  plane->line_name = plane->line_prefix.empty() ? std::move(name) : plane->line_prefix + name;
  ctx->ops_block = r.capture.blocks.size();
  // A SparseCore plane's lines hold both counter samples and scopes.
  if (!ctx->counters || plane->kind == PlaneKind::kSparseCore) {
    EventBlock& block = r.capture.blocks.emplace_back();
    block.chip = plane->chip;
    block.line = plane->line_name;
    block.kind = ctx->kind;
    block.base_ns = timestamp_ns;
    ctx->block = &block;
  }
  return true;
}

// The line's events from `first_event` on, decoded straight from the window a chunk at a
// time: the reader's hot path. A field that does not fit in a chunk (or is damaged) goes
// through the Cursor, which grows the window or reports where the damage is. `read_event`
// reads one event; it is chosen once per line (a device line's or a host thread's), so that
// nothing dispatches per event and a device line's ReadEvent is inlined here.
template <typename ReadOneEvent>
absl::Status ReadEvents(ReaderState& r, Cursor& line, int64_t first_event, PlaneState* plane,
                        LineContext* ctx, ReadOneEvent read_event) {
  constexpr int64_t kChunkBytes = 1 << 20;
  while (!line.done()) {
    const int64_t avail = std::min<int64_t>(line.end() - line.pos(), kChunkBytes);
    const uint8_t* p;
    RETURN_IF_ERROR(r.window.View(line.pos(), static_cast<size_t>(avail), &p));
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
        RETURN_IF_ERROR(read_event(ev, plane, ctx));
      } else if (!chunk.Skip(wt)) {
        chunk = save;
        break;
      }
    }
    const int64_t consumed = chunk.offset() - line.pos();
    if (r.sink != nullptr) RETURN_IF_ERROR(MaybeSplitPlane(r, plane, ctx));
    if (r.sink == nullptr && line.pos() == first_event && ctx->block != nullptr) {
      ReserveForRest(ctx->block, consumed, line.end() - line.pos() - consumed);
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
      RETURN_IF_ERROR(read_event(ev, plane, ctx));
    } else {
      RETURN_IF_ERROR(line.Skip(wt));
    }
  }
  return absl::OkStatus();
}

// A line read in one pass: its header, its events chunk by chunk, what it adds to the plane.
absl::Status ReadLine(ReaderState& r, Cursor line, PlaneState* plane) {
  int64_t timestamp_ns = 0, first_event;
  std::string name;
  RETURN_IF_ERROR(ReadLineHeader(line, &name, &timestamp_ns, &first_event));
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
  LineContext ctx;
  if (!StartLine(r, plane, std::move(name), timestamp_ns, &ctx)) return absl::OkStatus();
  const bool host_cpu = plane->kind == PlaneKind::kHostCpu;
  if (host_cpu) {
    RETURN_IF_ERROR(ReadEvents(
        r, line, first_event, plane, &ctx,
        [&r](Span ev, PlaneState* p, LineContext* c) { return ReadCpuEvent(r, ev, p, c); }));
  } else {
    RETURN_IF_ERROR(ReadEvents(
        r, line, first_event, plane, &ctx,
        [&r](Span ev, PlaneState* p, LineContext* c) { return ReadEvent(r, ev, p, c); }));
  }
  if (ctx.execution && !ctx.counts.counts.empty()) plane->perf.AddExecution(std::move(ctx.counts));
  // Only counter samples: no block of scopes. A host thread that ran no op: no block.
  if ((host_cpu || plane->kind == PlaneKind::kSparseCore) &&
      r.capture.blocks[ctx.ops_block].size() == 0) {
    r.capture.blocks.erase(r.capture.blocks.begin() + static_cast<ptrdiff_t>(ctx.ops_block));
  }
  return absl::OkStatus();
}

// The plane's chip from its stats.
absl::StatusOr<Chip> ReadChip(ReaderState& r, const PlaneScan& scan, const StatTable& table,
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
    switch (table.Kind(s.metadata_id)) {
      case Stat::kGlobalChipId:
        global_chip_id = static_cast<int64_t>(StatUint(s));
        break;
      case Stat::kDeviceId:
        device_id = static_cast<int64_t>(StatUint(s));
        break;
      case Stat::kDeviceTypeString:
        RETURN_IF_ERROR(r.StatString(table, s, &chip.device_type));
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

// The header pass's part of a device plane: its chip (none for a SparseCore plane) and its
// dropped_traces.
absl::Status ReadPlaneHeader(ReaderState& r, const PlaneScan& scan, const StatTable& table,
                             const std::vector<RawStat>& plane_stats) {
  for (const RawStat& s : plane_stats) {
    if (table.Kind(s.metadata_id) == Stat::kDroppedTraces) {
      r.notes[scan.ordinal].dropped_traces += static_cast<int64_t>(StatUint(s));
    }
  }
  // A SparseCore plane's chip is its TPU plane's, wherever that is in the file.
  if (scan.kind == PlaneKind::kSparseCore) return absl::OkStatus();
  ASSIGN_OR_RETURN(Chip chip, ReadChip(r, scan, table, plane_stats));
  if (chip.kind == DeviceKind::kTpu) {
    r.chip_of_tpu_ordinal.try_emplace(chip.ordinal, static_cast<int>(r.capture.host.chips.size()));
  }
  r.capture.host.chips.push_back(std::move(chip));
  return absl::OkStatus();
}

// The chip a plane's data belongs to (index into capture.host.chips), or -1 for a SparseCore
// plane whose chip has no plane (warned, skipped).
absl::StatusOr<int> DataPlaneChip(ReaderState& r, const PlaneScan& scan, PlaneState* state) {
  if (scan.kind == PlaneKind::kSparseCore) {
    auto it = r.chip_of_tpu_ordinal.find(scan.ordinal);
    if (it == r.chip_of_tpu_ordinal.end()) {
      r.capture.warnings.push_back(absl::StrCat("plane \"", scan.name, "\": no ",
                                                xspace::kTpuPlanePrefix, scan.ordinal,
                                                " plane for its chip; its data is skipped"));
      return -1;
    }
    state->line_prefix = absl::StrCat(kSparseCoreLinePrefix, scan.sparse_core, "/");
    return it->second;
  }
  // The same planes in the same order as the header's pass: the next chip is this plane's.
  const int chip = r.data_planes++;
  if (static_cast<size_t>(chip) >= r.capture.host.chips.size()) {
    return absl::InternalError("a device plane appeared between the reader's passes");
  }
  return chip;
}

// TPU, SparseCore, GPU and CPU device planes.
class DeviceLines final : public PlaneKindReader {
 public:
  absl::Status ReadHeader(ReaderState& r, const PlaneScan& scan, Cursor& plane) const override {
    StatTable table;
    RETURN_IF_ERROR(ReadStatMetadata(scan, plane, &table));
    std::vector<RawStat> plane_stats;
    RETURN_IF_ERROR(ReadPlaneStats(scan, plane, &plane_stats));
    return ReadPlaneHeader(r, scan, table, plane_stats);
  }
  absl::Status ReadData(ReaderState& r, const PlaneScan& scan, Cursor& plane) const override {
    PlaneState state;
    state.kind = scan.kind;
    RETURN_IF_ERROR(ReadStatMetadata(scan, plane, &state.stat_table));
    ASSIGN_OR_RETURN(state.chip, DataPlaneChip(r, scan, &state));
    if (state.chip < 0) return absl::OkStatus();
    return ReadPlaneLines(r, scan, plane, &state);
  }
};

}  // namespace

const PlaneKindReader* DeviceLinesReader() {
  static const DeviceLines reader{};
  return &reader;
}

absl::Status ReadPlaneLines(ReaderState& r, const PlaneScan& scan, Cursor& c, PlaneState* state) {
  const size_t blocks_before = r.capture.blocks.size();
  const size_t counters_before = r.capture.counters.size();
  state->piece_kernels = r.capture.kernels.size();
  RETURN_IF_ERROR(ReadEventMetadata(scan, c, state));
  if (r.sink != nullptr) RETURN_IF_ERROR(NoteModules(r, scan, c, *state));
  for (const Extent& e : scan.lines) {
    c.Seek(e.pos);
    Cursor line(nullptr, 0, 0, "");
    RETURN_IF_ERROR(c.ReadSub("XLine", &line));
    RETURN_IF_ERROR(ReadLine(r, line, state));
  }
  return EndPlane(r, state, blocks_before, counters_before);
}

absl::Status ParseEventFields(Span ev, const StatTable& table, EventFields* f) {
  return ParseEvent(ev, table, f);
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
    // (ReadCpuEvent, trace/host_cpu_lines.cc); every other event is skipped.
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

}  // namespace podprof::trace::xspace_internal
