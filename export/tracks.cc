#include "export/tracks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "export/nesting.h"
#include "trace/xspace_schema.h"

namespace podprof::exporter {

int LineRank(const std::string& line) {
  if (line == trace::xspace::kStepsLine) return 0;
  if (line == trace::xspace::kXlaModulesLine) return 1;
  if (line == trace::xspace::kXlaOpsLine) return 2;
  return 3;
}

std::string ChipName(const trace::Chip* chip, int index) {
  if (chip == nullptr || chip->device_type.empty()) return absl::StrCat("chip ", index);
  return absl::StrCat("chip ", chip->ordinal, " (", chip->device_type, ")");
}

std::vector<std::vector<Placed>> TrackLanes(const trace::HostCapture& capture,
                                            const std::vector<uint32_t>& blocks) {
  std::vector<Placed> out;
  for (uint32_t bi : blocks) {
    const trace::EventBlock& b = capture.blocks[bi];
    for (uint32_t i = 0; i < b.size(); ++i) {
      const int64_t end_ps = b.start_ps[i] + std::max<int64_t>(b.duration_ps[i], 0);
      out.push_back(
          {b.base_ns + FloorDiv(b.start_ps[i], 1000), b.base_ns + FloorDiv(end_ps, 1000), bi, i});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Placed& a, const Placed& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  return NestInLanes(std::move(out), kMaxTrimNs);
}

std::string LaneName(const std::string& line, size_t lane) {
  if (lane == 0) return line;
  return lane == 1 ? absl::StrCat(line, " (overlapping)")
                   : absl::StrCat(line, " (overlapping ", lane, ")");
}

std::vector<std::pair<std::pair<int, std::string>, std::vector<uint32_t>>> Tracks(
    const trace::HostCapture& capture) {
  std::map<std::pair<int, std::string>, std::vector<uint32_t>> by;
  for (uint32_t i = 0; i < capture.blocks.size(); ++i) {
    const trace::EventBlock& b = capture.blocks[i];
    // Scopes inside kernels share the kernels' track, where they nest as child slices.
    by[{b.chip,
        b.kind == trace::LineKind::kScopes ? std::string(trace::xspace::kXlaOpsLine) : b.line}]
        .push_back(i);
  }
  std::vector<std::pair<std::pair<int, std::string>, std::vector<uint32_t>>> out(by.begin(),
                                                                                 by.end());
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first.first != b.first.first ? a.first.first < b.first.first
                                          : LineRank(a.first.second) < LineRank(b.first.second);
  });
  return out;
}

}  // namespace podprof::exporter
