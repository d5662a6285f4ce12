#include "agent/runtime_status.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace podprof::agent {
namespace {

namespace rt = tpu::monitoring::runtime;

// The tensor-core sequencer's state, or null (a core that reports none).
const rt::SequencerState* TensorCoreSequencer(const rt::CoreStateSummary& core) {
  for (const rt::SequencerState& s : core.sequencer_info()) {
    if (s.sequencer_type() == rt::TPU_SEQUENCER_TYPE_TENSOR_CORE_SEQUENCER) return &s;
  }
  return core.sequencer_info().empty() ? nullptr : &core.sequencer_info(0);
}

std::string DescribeCore(int32_t id, const rt::CoreStateSummary& core) {
  std::string out = absl::StrCat("core ", id);
  if (core.core_id().has_chip_id()) absl::StrAppend(&out, " (chip ", core.core_id().chip_id(), ")");
  if (!core.error_message().empty()) return absl::StrCat(out, " error: ", core.error_message());
  const rt::SequencerState* s = TensorCoreSequencer(core);
  if (s == nullptr) return absl::StrCat(out, " reports no sequencer");
  absl::StrAppend(&out, " step ", s->run_id());
  if (!s->hlo_location().empty()) {
    absl::StrAppend(&out, " in ", s->hlo_location());
  } else if (s->tag() == 0) {
    // The runtime's tag is 0 outside the program's kernels.
    absl::StrAppend(&out, " between kernels");
  } else {
    absl::StrAppend(&out, " in kernel ", s->tag(), " (pc ", s->pc(), ")");
  }
  if (core.queued_program_info_size() > 0) {
    absl::StrAppend(&out, ", ", core.queued_program_info_size(), " queued");
  }
  return out;
}

}  // namespace

std::string DescribeRuntimeStatus(const rt::GetTpuRuntimeStatusResponse& status, int max_cores) {
  if (status.core_states().empty()) return "runtime status: no cores reported";
  // The map is unordered on the wire: by core id.
  std::vector<int32_t> ids;
  for (const auto& [id, core] : status.core_states()) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < ids.size() && static_cast<int>(i) < max_cores; ++i) {
    parts.push_back(DescribeCore(ids[i], status.core_states().at(ids[i])));
  }
  std::string out = absl::StrCat("runtime status: ", absl::StrJoin(parts, "; "));
  if (static_cast<int>(ids.size()) > max_cores) {
    absl::StrAppend(&out, "; and ", ids.size() - static_cast<size_t>(max_cores), " more cores");
  }
  return out;
}

}  // namespace podprof::agent
