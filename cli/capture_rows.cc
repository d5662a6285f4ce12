#include "cli/capture_rows.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/report.h"
#include "common/clock.h"
#include "report/pod_rows.h"

namespace podprof::cli {

absl::StatusOr<LabelMap> ParseLabels(const std::vector<std::string>& pairs) {
  LabelMap labels;
  for (const std::string& pair : pairs) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad label \"", pair, "\": want key=value with a non-empty key"));
    }
    if (!labels.emplace(pair.substr(0, eq), pair.substr(eq + 1)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("label \"", pair.substr(0, eq), "\" given twice"));
    }
  }
  return labels;
}

void AddLabels(const LabelMap& labels, ProtoLabels* to) {
  for (const auto& [key, value] : labels) (*to)[key] = value;
}

LabelMap SortedLabels(const ProtoLabels& labels) { return LabelMap(labels.begin(), labels.end()); }

std::string JoinLabels(const ProtoLabels& labels) { return report::JoinLabels(labels); }

absl::StatusOr<v1::CaptureStatus> ParseCaptureStatus(absl::string_view name) {
  std::vector<std::string> names;
  for (int i = v1::CaptureStatus_MIN; i <= v1::CaptureStatus_MAX; ++i) {
    const auto status = static_cast<v1::CaptureStatus>(i);
    if (status == v1::CAPTURE_STATUS_UNSPECIFIED || !v1::CaptureStatus_IsValid(i)) continue;
    if (absl::EqualsIgnoreCase(name, CaptureStatusName(status))) return status;
    names.push_back(CaptureStatusName(status));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown capture status \"", name, "\" (use ", absl::StrJoin(names, ", "), ")"));
}

std::string CaptureDuration(const v1::CaptureSummary& c) {
  if (c.start_ns() <= 0 || c.end_ns() <= c.start_ns()) return "-";
  return FormatDurationPs((c.end_ns() - c.start_ns()) * 1000);
}

}  // namespace podprof::cli
