// What a capture asked for, as the store keeps it (storage/SCHEMA.md): its options (the
// captures.options column) and a snapshot's window label. Written by the capture engine
// (orchestrator.h) and read back by the API's row conversion (api_rows.h): one file for both
// directions, so the two cannot drift, and the API need not include the engine to read them.
#ifndef PODPROF_AGGREGATOR_CAPTURE_STORED_OPTIONS_H_
#define PODPROF_AGGREGATOR_CAPTURE_STORED_OPTIONS_H_

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

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CAPTURE_STORED_OPTIONS_H_
