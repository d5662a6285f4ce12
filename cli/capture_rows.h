// What several commands print of captures and labels: the status names and the label pairs, so
// that `captures`, `import` and `capture` agree (one capture as JSON is report/capture_json.h,
// shared with the HTTP API).
#ifndef PODPROF_CLI_CAPTURE_ROWS_H_
#define PODPROF_CLI_CAPTURE_ROWS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"
#include "proto/podprof_aggregator.pb.h"
#include "report/capture_json.h"

namespace podprof::cli {

using LabelMap = std::map<std::string, std::string>;

// Which captures a query covers by when their window started.
struct StartRange {
  // At or after now minus this; unset: no such bound. Wins over since_ns.
  std::optional<int64_t> since_ago_ns;
  // At or after this instant, ns since the Unix epoch; 0: no bound.
  int64_t since_ns = 0;
  // Before this instant; 0: no bound.
  int64_t until_ns = 0;

  // The lower bound for a request made now.
  int64_t SinceNs(int64_t now_ns) const {
    return since_ago_ns.has_value() ? now_ns - *since_ago_ns : since_ns;
  }
};
using ProtoLabels = google::protobuf::Map<std::string, std::string>;

// Parses `key=value` pairs (repeated `--label` flags) into a map. Errors (InvalidArgument,
// naming the pair): no '=', an empty key, a key given twice.
absl::StatusOr<LabelMap> ParseLabels(const std::vector<std::string>& pairs);

// Copies `labels` into a request's label map.
void AddLabels(const LabelMap& labels, ProtoLabels* to);

// A proto map sorted by key, so that output is stable.
LabelMap SortedLabels(const ProtoLabels& labels);

// Labels as `k=v;k=v`, sorted by key.
std::string JoinLabels(const ProtoLabels& labels);

// A triggered snapshot's cause as a short sentence for a table cell, from its reserved labels
// (`trigger`, `reason`, `telemetry`: aggregator/recorder/triggers.h): "step_time: step time 1.60x
// its baseline (5.41 ms against 3.38 ms; fires past 1.10x)". A trigger without usable evidence (a
// webhook, a person) gives its reason, cut to 80 characters; "" for a capture no trigger took.
std::string TriggerSummary(const ProtoLabels& labels);

// Labels for a table: `k=v;k=v` as JoinLabels, but a triggered snapshot's reserved labels
// (trigger, reason, telemetry, trigger_ns) give way to its TriggerSummary. The stored labels
// are unchanged (csv and json print them all).
std::string TableLabels(const ProtoLabels& labels);

// The lower-case name of a capture status ("complete"), as the HTTP API's JSON has it.
using report::CaptureStatusName;

// The capture status a name from CaptureStatusName stands for (case-insensitive). Errors
// (InvalidArgument) list the accepted names.
absl::StatusOr<v1::CaptureStatus> ParseCaptureStatus(absl::string_view name);

// The capture window's length for people, or "-" when the window is unknown.
std::string CaptureDuration(const v1::CaptureSummary& c);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_CAPTURE_ROWS_H_
