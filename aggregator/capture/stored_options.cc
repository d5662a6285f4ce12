#include "aggregator/capture/stored_options.h"

#include <cstdint>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace podprof::aggregator {

std::string StoredOptionsJson(const v1::StartCaptureRequest& req) {
  nlohmann::json j = {{"duration_ms", req.duration_ms()}};
  if (req.has_options() && req.options().ByteSizeLong() > 0) {
    google::protobuf::util::JsonPrintOptions print;
    print.preserve_proto_field_names = true;
    std::string text;
    // Printing a message without Any fields cannot fail.
    (void)google::protobuf::util::MessageToJsonString(req.options(), &text, print);
    j["options"] = nlohmann::json::parse(text, nullptr, false);
  }
  return j.dump();
}

v1::CaptureOptions OptionsFromStoredJson(const std::string& text) {
  v1::CaptureOptions options;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("options")) return options;
  google::protobuf::util::JsonParseOptions parse;
  // Written by a newer aggregator, the object may hold fields this one does not know.
  parse.ignore_unknown_fields = true;
  if (!google::protobuf::util::JsonStringToMessage(j["options"].dump(), &options, parse).ok()) {
    options.Clear();
  }
  return options;
}

StoredLabels CauseLabels(const v1::SnapshotCause& cause) {
  StoredLabels out = {{kTriggerLabel, cause.trigger()}};
  if (!cause.reason().empty()) out[kReasonLabel] = cause.reason();
  if (cause.trigger_ns() != 0) out[kTriggerNsLabel] = absl::StrCat(cause.trigger_ns());
  if (!cause.evidence_json().empty()) out[kEvidenceLabel] = cause.evidence_json();
  return out;
}

StoredLabels LabelsToStore(const v1::StartCaptureRequest& req) {
  StoredLabels out(req.labels().begin(), req.labels().end());
  if (req.has_cause()) {
    for (auto& [k, v] : CauseLabels(req.cause())) out[k] = std::move(v);
  }
  return out;
}

std::optional<v1::SnapshotCause> CauseFromLabels(const StoredLabels& labels) {
  const auto trigger = labels.find(kTriggerLabel);
  if (trigger == labels.end()) return std::nullopt;
  v1::SnapshotCause cause;
  cause.set_trigger(trigger->second);
  if (auto it = labels.find(kReasonLabel); it != labels.end()) cause.set_reason(it->second);
  if (auto it = labels.find(kEvidenceLabel); it != labels.end())
    cause.set_evidence_json(it->second);
  int64_t at = 0;
  if (auto it = labels.find(kTriggerNsLabel);
      it != labels.end() && absl::SimpleAtoi(it->second, &at)) {
    cause.set_trigger_ns(at);
  }
  return cause;
}

}  // namespace podprof::aggregator
