// What a capture asked for, as the store keeps it (storage/SCHEMA.md): its options (the
// captures.options column), a snapshot's window label and its cause's labels. Written by the
// capture engine (orchestrator.h) and read back by the API's row conversion (api_rows.h): one file
// for both directions, so the two cannot drift, and the API need not include the engine to read
// them.
#ifndef PODPROF_AGGREGATOR_CAPTURE_STORED_OPTIONS_H_
#define PODPROF_AGGREGATOR_CAPTURE_STORED_OPTIONS_H_

#include <map>
#include <optional>
#include <string>

#include "proto/podprof_aggregator.pb.h"

namespace podprof::aggregator {

// The captures.options column of a capture started by `req`: its duration and, when given, its
// CaptureOptions in protobuf's JSON form (field names as in the .proto).
std::string StoredOptionsJson(const v1::StartCaptureRequest& req);

// The CaptureOptions in a captures.options column; empty when there are none or the text is
// not what StoredOptionsJson writes.
v1::CaptureOptions OptionsFromStoredJson(const std::string& text);

// A snapshot's reserved label saying which window it holds (docs/RECORDER.md, storage/SCHEMA.md):
// kBeforeRequest, the seconds before the request cut from the agents' flight recorders;
// kAfterRequest, captured live from the request on because a host had no armed recorder;
// kMixedWindows, some hosts' windows before and some after (an agent whose recorder stopped
// after its last heartbeat, or one too old to capture the pod's instant). Set by the
// orchestrator on every snapshot, over any label of that name the caller gave.
inline constexpr char kWindowLabel[] = "window";
inline constexpr char kBeforeRequest[] = "before-request";
inline constexpr char kAfterRequest[] = "after-request";
inline constexpr char kMixedWindows[] = "mixed";

// A snapshot's cause (v1::SnapshotCause) as the store keeps it, in reserved labels: the
// trigger, the reason (left out when empty), the instant it fired (decimal ns; left out when
// 0) and the evidence's JSON (left out when empty). The CLI, the HTTP API, the capture page and
// the Python client show these labels; on the wire the cause is typed.
inline constexpr char kTriggerLabel[] = "trigger";
inline constexpr char kReasonLabel[] = "reason";
inline constexpr char kTriggerNsLabel[] = "trigger_ns";
inline constexpr char kEvidenceLabel[] = "telemetry";

using StoredLabels = std::map<std::string, std::string>;

// `cause` as its reserved labels.
StoredLabels CauseLabels(const v1::SnapshotCause& cause);

// The labels a capture started by `req` is stored with (the window label aside, which the
// orchestrator adds): `req.labels`, and when it has a cause the cause's labels over any of
// those names.
StoredLabels LabelsToStore(const v1::StartCaptureRequest& req);

// The cause in stored `labels`; none when they have no trigger label. A trigger_ns that is not
// a number reads as 0.
std::optional<v1::SnapshotCause> CauseFromLabels(const StoredLabels& labels);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CAPTURE_STORED_OPTIONS_H_
