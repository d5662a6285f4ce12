// JAX on CPU: a capture with no device plane runs its XLA ops on the host's threads. Each
// `/host:CPU` thread becomes a line of that one CPU device: its XLA op events are kernels (the
// programs' HLO, trace/hlo_programs.cc, gives their categories), its StepTraceAnnotations
// steps; every other event is skipped. With a device plane the host plane is skipped whole.
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trace/hash.h"
#include "trace/hlo_proto.h"
#include "trace/wire.h"
#include "trace/xspace_reader_internal.h"
#include "trace/xspace_schema.h"

namespace podprof::trace::xspace_internal {
namespace {

using wire::Cursor;
using wire::Span;
using wire::WireType;

using xspace::Stat;
using xspace::XEventField;

// An op's kernel, and whether it is a collective: by (metadata id, program id), its category
// from the program's HLO.
absl::StatusOr<std::pair<uint32_t, bool>> CpuKernelFor(ReaderState& r, PlaneState* plane,
                                                       int64_t metadata_id, uint64_t program_id,
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
  if (auto prog = r.hlo_programs.find(program_id); prog != r.hlo_programs.end()) {
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
  std::pair<uint32_t, bool> value{InternKernel(r, LineKind::kOps, std::move(def)), collective};
  plane->cpu_kernel_of.emplace(std::make_pair(metadata_id, program_id), value);
  return value;
}

// After the header pass: the CPU device, when the capture has a host CPU plane and no device
// plane, with its programs' HLO (the `/host:metadata` plane).
absl::Status AddCpuDevice(ReaderState& r) {
  if (!r.saw_host_cpu || !r.capture.host.chips.empty()) return absl::OkStatus();
  Chip chip;
  chip.kind = DeviceKind::kCpu;
  chip.device_type = kCpuDeviceType;
  r.cpu_chip = static_cast<int>(r.capture.host.chips.size());
  r.capture.host.chips.push_back(std::move(chip));
  if (!r.host_metadata.has_value()) return absl::OkStatus();
  return ReadHloPrograms(r);
}

// `/host:CPU`: seen in the header pass, read in the data pass when it is the CPU device's.
class HostCpuLines final : public PlaneKindReader {
 public:
  absl::Status ReadHeader(ReaderState& r, const PlaneScan&, Cursor&) const override {
    r.saw_host_cpu = true;
    return absl::OkStatus();
  }
  absl::Status EndHeader(ReaderState& r) const override { return AddCpuDevice(r); }
  absl::Status ReadData(ReaderState& r, const PlaneScan& scan, Cursor& plane) const override {
    if (r.cpu_chip < 0) return absl::OkStatus();
    PlaneState state;
    state.kind = scan.kind;
    RETURN_IF_ERROR(ReadStatMetadata(scan, plane, &state.stat_table));
    state.chip = r.cpu_chip;
    return ReadPlaneLines(r, scan, plane, &state);
  }
};

}  // namespace

const PlaneKindReader* HostCpuLinesReader() {
  static const HostCpuLines reader{};
  return &reader;
}

// Long: one pass over the event's fields and stats, then the op or step it is.
absl::Status ReadCpuEvent(ReaderState& r, Span ev, PlaneState* plane, LineContext* ctx) {
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
          RETURN_IF_ERROR(r.StatString(plane->stat_table, stat, &module));
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
    ASSIGN_OR_RETURN(auto k, CpuKernelFor(r, plane, metadata_id, program_id, module));
    kernel = k.first;
    // Every process of a JAX job runs a program with the same run id (its launch id), so
    // program, run and op name identify one collective on every host.
    if (k.second) {
      collective =
          Fnv1a64(absl::StrCat(program_id, "/", run_id, "/", r.capture.kernels[kernel].name)) | 1;
    }
    block = &r.capture.blocks[ctx->ops_block];
  } else {
    ASSIGN_OR_RETURN(kernel, KernelFor(r, plane, LineKind::kSteps, metadata_id));
    if (ctx->steps_block < 0) {
      ctx->steps_block = static_cast<int64_t>(r.capture.blocks.size());
      EventBlock& steps = r.capture.blocks.emplace_back();
      steps.chip = plane->chip;
      steps.line = std::string(xspace::kStepsLine);
      steps.kind = LineKind::kSteps;
      steps.base_ns = ctx->timestamp_ns;
      ctx->block = &r.capture.blocks[ctx->ops_block];
    }
    block = &r.capture.blocks[static_cast<size_t>(ctx->steps_block)];
  }
  block->start_ps.push_back(offset_ps);
  block->duration_ps.push_back(duration_ps);
  block->kernel.push_back(kernel);
  block->collective.push_back(collective);
  return absl::OkStatus();
}

}  // namespace podprof::trace::xspace_internal
