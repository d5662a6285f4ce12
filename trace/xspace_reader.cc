// The XSpace wire walk: the XSpace's fields, each plane's first pass (where its lines,
// metadata and stats are) and its metadata tables, then the plane handed to the reader of its
// kind (trace/xspace_reader_internal.h); the pieces a plane's data goes to the sink in.
#include "trace/xspace_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "trace/hash.h"
#include "trace/perf_samples.h"
#include "trace/wire.h"
#include "trace/xspace_reader_internal.h"
#include "trace/xspace_schema.h"

namespace podprof::trace {
namespace xspace_internal {
namespace {

using wire::Cursor;
using wire::Span;
using wire::WireType;

using xspace::MapEntryField;
using xspace::Stat;
using xspace::XEventMetadataField;
using xspace::XLineField;
using xspace::XPlaneField;
using xspace::XSpaceField;
using xspace::XStatField;
using xspace::XStatMetadataField;

// The kind of a stat from its name, as the schema knows it; a stat whose name speaks of MLIR
// (a Mosaic kernel's lowered MLIR, under whatever name the capture gives it) is the Mosaic MLIR.
Stat StatKindOf(absl::string_view name) {
  const Stat stat = xspace::StatOfName(name);
  if (stat != Stat::kUnknown) return stat;
  if (absl::StrContains(name, "mlir")) return Stat::kMosaicMlir;
  return Stat::kUnknown;
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
  if (name == xspace::kMegascaleTracePlane) return PlaneKind::kMegascaleTrace;
  return PlaneKind::kSkip;
}

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

}  // namespace

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

void StatTable::Add(int64_t id, std::string name) {
  Stat kind = StatKindOf(name);
  if (id >= 0 && id < kDenseLimit) {
    if (dense_.size() <= static_cast<size_t>(id)) dense_.resize(id + 1, Stat::kUnknown);
    dense_[id] = kind;
  } else if (kind != Stat::kUnknown) {
    sparse_[id] = kind;
  }
  names_[id] = std::move(name);
}

absl::Status ReaderState::StatString(const StatTable& table, const RawStat& stat,
                                     std::string* out) const {
  switch (stat.type) {
    case RawStat::Type::kString:
      *out = stat.str;
      return absl::OkStatus();
    case RawStat::Type::kRef:
      if (const std::string* name = table.Name(static_cast<int64_t>(stat.num.u))) {
        *out = *name;
        return absl::OkStatus();
      }
      return absl::DataLossError(absl::StrCat("ref_value ", stat.num.u, " names no stat metadata"));
    case RawStat::Type::kCompressed:
      return Inflate(stat.str, options.max_inflated_bytes, out);
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

double StatNumber(const RawStat& stat) {
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

uint64_t StatUint(const RawStat& stat) {
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

namespace {

void MakeAbsolute(ReaderState& r, size_t blocks_from, size_t counters_from) {
  for (size_t b = blocks_from; b < r.capture.blocks.size(); ++b) {
    r.capture.blocks[b].base_ns = r.Absolute(r.capture.blocks[b].base_ns);
  }
  for (size_t i = counters_from; i < r.capture.counters.size(); ++i) {
    if (r.counter_line_ns[i] == kAbsolute) continue;
    const int64_t base = r.Absolute(r.counter_line_ns[i]);
    for (int64_t& t : r.capture.counters[i].time_ns) t += base;
  }
}

absl::Status HandPiece(ReaderState& r, PlaneState* plane) {
  MakeAbsolute(r, 0, 0);
  ResolveModules(r, plane->piece_kernels);
  MakeText(&r.capture, plane->piece_kernels, 0, 0);
  RETURN_IF_ERROR(r.sink->OnPlane(r.capture, plane->piece_kernels));
  plane->piece_kernels = r.capture.kernels.size();
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

absl::Status ReadStatMetadataEntry(Cursor entry, StatTable* table) {
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

absl::Status ReadStatList(Cursor* c, std::vector<RawStat>* out) {
  Span span;
  RETURN_IF_ERROR(c->ReadSpan(&span));
  RawStat stat;
  if (!ParseRawStat(span, &stat)) return wire::MalformedAt(span.offset(), "bad XStat");
  out->push_back(std::move(stat));
  return absl::OkStatus();
}

absl::Status ReadEventMetadataEntry(Cursor entry, PlaneState* plane) {
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

// `Task Environment`: the profile's window, from the plane's stats.
class TaskEnvironment final : public PlaneKindReader {
 public:
  absl::Status ReadHeader(ReaderState& r, const PlaneScan& scan, Cursor& plane) const override {
    StatTable table;
    RETURN_IF_ERROR(ReadStatMetadata(scan, plane, &table));
    std::vector<RawStat> stats;
    RETURN_IF_ERROR(ReadPlaneStats(scan, plane, &stats));
    for (const RawStat& s : stats) {
      Stat kind = table.Kind(s.metadata_id);
      if (kind == Stat::kProfileStartTime) {
        r.capture.host.profile_start_ns = static_cast<int64_t>(StatUint(s));
      } else if (kind == Stat::kProfileStopTime) {
        r.capture.host.profile_stop_ns = static_cast<int64_t>(StatUint(s));
      }
    }
    return absl::OkStatus();
  }
  absl::Status ReadData(ReaderState&, const PlaneScan&, Cursor&) const override {
    return absl::OkStatus();
  }
};

}  // namespace

absl::Status EndPlane(ReaderState& r, PlaneState* state, size_t blocks_before,
                      size_t counters_before) {
  FinishPerfSamples(r, state, blocks_before);
  if (!r.megascale_series.empty()) TakeMegascaleSeries(r, state->chip);
  if (r.sink == nullptr) {
    MakeAbsolute(r, blocks_before, counters_before);
    ResolveModules(r, state->piece_kernels);
    return absl::OkStatus();
  }
  if (state->split) {
    // The lines and series the pieces before this one emptied, and ended with nothing more.
    auto empty_block = [](const EventBlock& b) { return b.size() == 0; };
    r.capture.blocks.erase(
        std::remove_if(r.capture.blocks.begin(), r.capture.blocks.end(), empty_block),
        r.capture.blocks.end());
    size_t kept = 0;
    for (size_t i = 0; i < r.capture.counters.size(); ++i) {
      if (r.capture.counters[i].time_ns.empty()) continue;
      if (kept != i) {
        r.capture.counters[kept] = std::move(r.capture.counters[i]);
        r.counter_line_ns[kept] = r.counter_line_ns[i];
      }
      ++kept;
    }
    r.capture.counters.resize(kept);
    r.counter_line_ns.resize(kept);
  }
  RETURN_IF_ERROR(HandPiece(r, state));
  std::vector<EventBlock>().swap(r.capture.blocks);
  std::vector<CounterSeries>().swap(r.capture.counters);
  r.counter_line_ns.clear();
  return absl::OkStatus();
}

absl::Status MaybeSplitPlane(ReaderState& r, PlaneState* plane, LineContext* ctx) {
  if (plane->perf.bytes() > r.options.max_piece_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "chip ", r.capture.host.chips[plane->chip].ordinal, "'s performance counter samples take ",
        plane->perf.bytes() >> 20, " MiB, past the reader's bound of ",
        r.options.max_piece_bytes >> 20, " MiB a plane"));
  }
  size_t held = 0;
  for (const EventBlock& b : r.capture.blocks) {
    held += b.start_ps.capacity() * sizeof(int64_t) + b.duration_ps.capacity() * sizeof(int64_t) +
            b.kernel.capacity() * sizeof(uint32_t) + b.collective.capacity() * sizeof(uint64_t);
  }
  for (const CounterSeries& c : r.capture.counters) {
    held += c.time_ns.capacity() * sizeof(int64_t) + c.value.capacity() * sizeof(double);
  }
  if (held <= r.options.max_piece_bytes) return absl::OkStatus();
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
  RETURN_IF_ERROR(HandPiece(r, plane));
  std::vector<EventBlock>().swap(r.capture.blocks);
  for (size_t i = 0; i < r.capture.counters.size(); ++i) {
    std::vector<int64_t>().swap(r.capture.counters[i].time_ns);
    std::vector<double>().swap(r.capture.counters[i].value);
    // Samples from here on are relative to their line again (MakeAbsolute made these so).
  }
  if (open_block) {
    rest.base_ns = ctx->timestamp_ns;
    r.capture.blocks.push_back(std::move(rest));
    ctx->block = &r.capture.blocks.back();
  }
  ctx->ops_block = 0;
  ctx->steps_block = -1;
  return absl::OkStatus();
}

absl::Status ReadStatMetadata(const PlaneScan& scan, Cursor& c, StatTable* table) {
  for (const Extent& e : scan.stat_metadata) {
    c.Seek(e.pos);
    Cursor entry(nullptr, 0, 0, "");
    RETURN_IF_ERROR(c.ReadSub("XPlane.stat_metadata entry", &entry));
    RETURN_IF_ERROR(ReadStatMetadataEntry(entry, table));
  }
  return absl::OkStatus();
}

absl::Status ReadEventMetadata(const PlaneScan& scan, Cursor& c, PlaneState* state) {
  for (const Extent& e : scan.event_metadata) {
    c.Seek(e.pos);
    Cursor entry(nullptr, 0, 0, "");
    RETURN_IF_ERROR(c.ReadSub("XPlane.event_metadata entry", &entry));
    RETURN_IF_ERROR(ReadEventMetadataEntry(entry, state));
  }
  return absl::OkStatus();
}

absl::Status ScanLineHeader(Cursor rest, std::string* name, int64_t* timestamp_ns) {
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

absl::Status ReadPlaneStats(const PlaneScan& scan, Cursor& c, std::vector<RawStat>* out) {
  for (const Extent& e : scan.stats) {
    c.Seek(e.pos);
    Span span;
    RETURN_IF_ERROR(c.ReadSpan(&span));
    RawStat stat;
    if (!ParseRawStat(span, &stat)) {
      return wire::MalformedAt(span.offset(), "bad XStat in XPlane.stats");
    }
    out->push_back(std::move(stat));
  }
  return absl::OkStatus();
}

const PlaneKindReader* TaskEnvironmentReader() {
  static const TaskEnvironment reader{};
  return &reader;
}

namespace {

// The reader of each kind of plane; null for a kind that is skipped.
const PlaneKindReader* ReaderOf(PlaneKind kind) {
  switch (kind) {
    case PlaneKind::kTpu:
    case PlaneKind::kGpu:
    case PlaneKind::kSparseCore:
    case PlaneKind::kCpu:
      return DeviceLinesReader();
    case PlaneKind::kHostCpu:
      return HostCpuLinesReader();
    case PlaneKind::kHostMetadata:
      return HloProgramsReader();
    case PlaneKind::kTaskEnvironment:
      return TaskEnvironmentReader();
    case PlaneKind::kMegascaleTrace:
      return MegascaleTraceReader();
    case PlaneKind::kSkip:
      break;
  }
  return nullptr;
}

void Finish(ReaderState& r) {
  // A kernel whose module was named only by a later plane (read whole, not in pieces).
  if (r.sink == nullptr) ResolveModules(r, 0);
  // Once per chip, whichever of its planes the notes came from.
  for (const auto& [ordinal, notes] : r.notes) {
    auto chip = r.chip_of_tpu_ordinal.find(ordinal);
    const std::string* generation = chip == r.chip_of_tpu_ordinal.end()
                                        ? nullptr
                                        : &r.capture.host.chips[chip->second].generation;
    AppendChipWarnings(ordinal, generation == nullptr ? "" : *generation, notes,
                       &r.capture.warnings);
  }
}

absl::Status ReadPlane(ReaderState& r, Cursor plane, bool header) {
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
      if (scan.kind == PlaneKind::kSkip) return absl::OkStatus();  // skipped whole
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
  if (!scan.named) return absl::OkStatus();
  const PlaneKindReader* reader = ReaderOf(scan.kind);
  if (reader == nullptr) return absl::OkStatus();
  scan.end = plane.end();
  Cursor c(&r.window, 0, scan.end, "XPlane");
  return header ? reader->ReadHeader(r, scan, c) : reader->ReadData(r, scan, c);
}

absl::Status WalkSpace(ReaderState& r, bool header) {
  Cursor space(&r.window, 0, r.window.size(), "XSpace");
  while (!space.done()) {
    uint32_t field;
    WireType wt;
    RETURN_IF_ERROR(space.ReadTag(&field, &wt));
    switch (field) {
      case XSpaceField::kPlanes: {
        RETURN_IF_ERROR(space.Expect(field, wt, wire::kLengthDelimited));
        Cursor plane(nullptr, 0, 0, "");
        RETURN_IF_ERROR(space.ReadSub("XPlane", &plane));
        RETURN_IF_ERROR(ReadPlane(r, plane, header));
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
          if (r.capture.host.name.empty()) r.capture.host.name = std::move(s);
        } else {
          r.capture.warnings.push_back(absl::StrCat(
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

absl::StatusOr<HostCapture> Read(ReaderState& r) {
  // Each reader once, whatever planes of its kind there are: JAX on CPU's device is added
  // once the header pass has seen there is no other.
  // The Megascale plane last: its ids are paired with every chip.
  static const PlaneKindReader* const kReaders[] = {DeviceLinesReader(), TaskEnvironmentReader(),
                                                    HloProgramsReader(), HostCpuLinesReader(),
                                                    MegascaleTraceReader()};
  if (r.window.size() == 0) {
    return absl::InvalidArgumentError("empty file: no XSpace in it");
  }
  // First the host: its chips and the profile's window (Task Environment, wherever it is in
  // the file), so that each device plane's data can be put on absolute times, and handed on,
  // as soon as it is read. Skipping the planes' lines costs nothing: they are length-prefixed.
  RETURN_IF_ERROR(WalkSpace(r, /*header=*/true));
  for (const PlaneKindReader* reader : kReaders) RETURN_IF_ERROR(reader->EndHeader(r));
  if (r.capture.host.name.empty()) r.capture.host.name = r.options.host_name;
  MakeText(&r.capture.host);
  if (r.sink != nullptr) RETURN_IF_ERROR(r.sink->OnHost(r.capture.host));
  RETURN_IF_ERROR(WalkSpace(r, /*header=*/false));
  Finish(r);
  MakeText(&r.capture, 0, 0, 0);
  for (std::string& w : r.capture.warnings) MakeText(&w);
  return std::move(r.capture);
}

}  // namespace
}  // namespace xspace_internal

absl::StatusOr<HostCapture> ReadXSpace(ByteSource& source, const ReadOptions& options) {
  xspace_internal::ReaderState r(source, options, nullptr);
  return xspace_internal::Read(r);
}

absl::StatusOr<HostCapture> ReadXSpaceInPieces(ByteSource& source, const ReadOptions& options,
                                               PieceSink* sink) {
  xspace_internal::ReaderState r(source, options, sink);
  return xspace_internal::Read(r);
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
