#include "cli/capture_rows.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/report.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"
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

namespace {

std::string Label(const ProtoLabels& labels, const std::string& key) {
  auto it = labels.find(key);
  return it == labels.end() ? "" : it->second;
}

// The sentence from a trigger's evidence (the figures it compared), or "" when the evidence
// lacks them (an older or foreign label).
std::string FromEvidence(const std::string& trigger, const nlohmann::json& e) {
  auto num = [&](const char* key) { return e.value(key, -1.0); };
  if (trigger == "step_time" && num("ratio") > 0 && num("baseline_step_us") > 0) {
    return absl::StrFormat(
        "step time %.2fx its baseline (%.2f ms against %.2f ms; fires past "
        "%.2fx)",
        num("ratio"), num("recent_step_us") / 1000, num("baseline_step_us") / 1000,
        num("threshold"));
  }
  if (trigger == "straggler" && e.contains("host") && num("ratio_to_pod_median") > 0) {
    return absl::StrFormat("chip %d of %s at %.2fx the pod's median step (%.2f ms)",
                           e.value("chip", -1), e.value("host", std::string()),
                           num("ratio_to_pod_median"), num("step_us") / 1000);
  }
  if (trigger == "duty_cycle" && num("baseline_duty_percent") > 0 &&
      num("recent_duty_percent") >= 0) {
    return absl::StrFormat("duty cycle down %.0f%% (%.1f%% from %.1f%%; fires past %.0f%%)",
                           100 * (1 - num("recent_duty_percent") / num("baseline_duty_percent")),
                           num("recent_duty_percent"), num("baseline_duty_percent"),
                           100 * (1 - num("threshold")));
  }
  if (trigger == "dcn" && e.contains("host") && num("baseline_p50_us") > 0) {
    const int slice = e.value("slice", -1);
    return absl::StrFormat("DCN into %s%s at %.2fx its baseline (p50 %.0f us against %.0f us)",
                           e.value("host", std::string()),
                           slice >= 0 ? absl::StrCat(" (slice ", slice, ")") : "", num("ratio"),
                           num("recent_p50_us"), num("baseline_p50_us"));
  }
  if (trigger == "hang" && num("quiet_seconds") > 0) {
    return absl::StrFormat("no step ended on any chip for %.0f s", num("quiet_seconds"));
  }
  return "";
}

}  // namespace

std::string TriggerSummary(const ProtoLabels& labels) {
  const std::string trigger = Label(labels, "trigger");
  if (trigger.empty()) return "";
  const nlohmann::json evidence =
      nlohmann::json::parse(Label(labels, "telemetry"), nullptr, /*allow_exceptions=*/false);
  std::string said = evidence.is_object() ? FromEvidence(trigger, evidence) : "";
  if (said.empty()) {
    said = Label(labels, "reason");
    if (said.size() > 80) said = said.substr(0, 77) + "...";
  }
  return said.empty() ? trigger : absl::StrCat(trigger, ": ", said);
}

std::string TableLabels(const ProtoLabels& labels) {
  const std::string summary = TriggerSummary(labels);
  if (summary.empty()) return JoinLabels(labels);
  ProtoLabels rest = labels;
  for (const char* key : {"trigger", "reason", "telemetry", "trigger_ns"}) rest.erase(key);
  const std::string others = JoinLabels(rest);
  return others.empty() ? summary : absl::StrCat(summary, ";", others);
}

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
