// Kernel lookup: the capture's kernel table, one entry per distinct kernel of the device
// planes' lines (its name, category, program, costs and sources from its event metadata), or
// of JAX on CPU's ops (trace/host_cpu_lines.cc). The event loop looks a kernel up here once per
// (plane, line kind, metadata id); after that, from the plane's own tables.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trace/wire.h"
#include "trace/xspace_reader_internal.h"
#include "trace/xspace_schema.h"

namespace podprof::trace::xspace_internal {
namespace {

using xspace::Stat;

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

}  // namespace

uint32_t InternKernel(ReaderState& r, LineKind kind, KernelDef def) {
  std::string key = absl::StrCat(static_cast<int>(kind), "|", def.program_id, "|", def.hlo_hash,
                                 "|", def.name, "|", def.category);
  auto [it, inserted] = r.kernel_index.try_emplace(key, r.capture.kernels.size());
  if (inserted) r.capture.kernels.push_back(std::move(def));
  return it->second;
}

// Long: one switch over every stat a kernel's metadata may carry, each filling its field.
absl::StatusOr<uint32_t> KernelFor(ReaderState& r, PlaneState* plane, LineKind kind,
                                   int64_t metadata_id) {
  auto& cache = plane->kernel_of[static_cast<int>(kind)];
  auto hit = cache.find(metadata_id);
  if (hit != cache.end()) return hit->second;

  KernelDef def;
  auto meta_it = plane->metas.find(metadata_id);
  if (meta_it == plane->metas.end()) {
    // Events must refer to metadata of their plane; keep the event under a placeholder name
    // rather than dropping time, and tell the user.
    def.name = absl::StrCat("<unknown metadata ", metadata_id, ">");
    r.capture.warnings.push_back(
        absl::StrCat("plane of chip ", r.capture.host.chips[plane->chip].ordinal,
                     ": event refers to missing metadata id ", metadata_id));
  } else {
    const EventMeta& meta = meta_it->second;
    def.name = meta.name;
    def.hlo_hash = meta.full_name_hash;
    def.hlo_text = meta.full_name;
    for (const RawStat& s : meta.stats) {
      auto string_stat = [&](std::string* out) -> absl::Status {
        absl::Status st = r.StatString(plane->stat_table, s, out);
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
        r.module_of_program.try_emplace(id, def.module);
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

  const uint32_t kernel = InternKernel(r, kind, std::move(def));
  cache.emplace(metadata_id, kernel);
  if (metadata_id >= 0 && metadata_id < kDenseIds) {
    std::vector<uint32_t>& dense = plane->dense_kernel_of[static_cast<int>(kind)];
    if (dense.size() <= static_cast<size_t>(metadata_id)) dense.resize(metadata_id + 1, kNoKernel);
    dense[metadata_id] = kernel;
  }
  return kernel;
}

}  // namespace podprof::trace::xspace_internal
