// HLO programs and their modules: the `/host:metadata` plane's HloProtos (the ops of JAX on
// CPU's programs, trace/host_cpu_lines.cc), and the module each program id names, from the
// device planes' `XLA Modules` lines, given to the kernels of that program.
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
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
using xspace::XLineField;

// `/host:metadata`: where it is, noted in the header pass and read once the header pass has
// decided that the capture is JAX on CPU (ReadHloPrograms).
class HloPrograms final : public PlaneKindReader {
 public:
  absl::Status ReadHeader(ReaderState& r, const PlaneScan& scan, Cursor&) const override {
    r.host_metadata = scan;
    return absl::OkStatus();
  }
  absl::Status ReadData(ReaderState&, const PlaneScan&, Cursor&) const override {
    return absl::OkStatus();
  }
};

}  // namespace

const PlaneKindReader* HloProgramsReader() {
  static const HloPrograms reader{};
  return &reader;
}

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

absl::Status ReadHloPrograms(ReaderState& r) {
  if (!r.host_metadata.has_value()) return absl::OkStatus();
  const PlaneScan& scan = *r.host_metadata;
  PlaneState state;
  Cursor c(&r.window, 0, scan.end, "XPlane");
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
      r.capture.warnings.push_back(
          absl::StrCat(xspace::kHostMetadataPlane, ": program ", meta.name, ": ", st.message()));
      continue;
    }
    r.hlo_programs.insert_or_assign(program_id, std::move(ops));
  }
  return absl::OkStatus();
}

absl::Status NoteModules(ReaderState& r, const PlaneScan& scan, Cursor& c,
                         const PlaneState& plane) {
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
      RETURN_IF_ERROR(ParseEventFields(ev, plane.stat_table, &f));
      auto meta = plane.metas.find(f.metadata_id);
      std::string module;
      uint64_t id;
      if (meta != plane.metas.end() && ParseModuleName(meta->second.name, &module, &id)) {
        r.module_of_program.try_emplace(id, std::move(module));
      }
    }
  }
  return absl::OkStatus();
}

void ResolveModules(ReaderState& r, size_t first_kernel) {
  for (size_t i = first_kernel; i < r.capture.kernels.size(); ++i) {
    KernelDef& k = r.capture.kernels[i];
    if (!k.module.empty() || k.program_id == 0) continue;
    auto it = r.module_of_program.find(k.program_id);
    if (it != r.module_of_program.end()) k.module = it->second;
  }
}

}  // namespace podprof::trace::xspace_internal
