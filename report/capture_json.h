// One capture as JSON, the same for `/api/v1/captures` and `podprof captures --format json`
// (and `podprof import`'s summary), so that a script reads either with the same keys.
#ifndef PODPROF_REPORT_CAPTURE_JSON_H_
#define PODPROF_REPORT_CAPTURE_JSON_H_

#include <string>

#include "nlohmann/json_fwd.hpp"
#include "proto/podprof_types.pb.h"

namespace podprof::report {

// The lower-case name of a capture status without its prefix ("complete", "cancelled");
// "unspecified" for CAPTURE_STATUS_UNSPECIFIED and values this build does not know.
std::string CaptureStatusName(v1::CaptureStatus status);

// `capture` (the id), `created_ns`, `start_ns`, `end_ns` (ns since the Unix epoch), `status`
// (CaptureStatusName), `source` ("capture" or "import"), `hosts` (how many) with `host_names`,
// `chips`, `kernels`, `events`, `labels` (an object of strings), `options` (the tracer and
// kernel-profiling options, proto_json.h) and `error_message`.
nlohmann::json CaptureJson(const v1::CaptureSummary& c);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_CAPTURE_JSON_H_
