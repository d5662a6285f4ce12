// Start a pod-wide capture through the aggregator and watch it to the end, with a deadline:
// what the integration tests, the soak test and the benchmarks that drive a real aggregator
// all do. A capture that never finishes ends the watch with an error instead of hanging.
#ifndef PODPROF_HARNESS_CAPTURE_WATCH_H_
#define PODPROF_HARNESS_CAPTURE_WATCH_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "proto/podprof_aggregator.grpc.pb.h"

namespace podprof::testing {

struct WatchedCapture {
  // The aggregator's answer to StartCapture: the capture's id and planned start.
  v1::StartCaptureResponse started;
  // The stream's last message (done() is true): the capture's state and summary.
  v1::CaptureProgress last;
};

// Starts a capture with `request` and reads its progress stream until the last message.
// `on_progress`, when set, sees every message as it arrives, with the StartCapture answer (on
// the calling thread).
// `timeout` bounds the whole call, StartCapture included. Errors: the gRPC error of
// StartCapture or WatchCapture; DeadlineExceeded naming the capture and its last progress when
// it has not finished within `timeout`; Internal when the stream ends without a last message.
// Thread-safe as the stub is.
inline absl::StatusOr<WatchedCapture> StartAndWatchCapture(
    v1::Aggregator::StubInterface& stub, const v1::StartCaptureRequest& request,
    absl::Duration timeout,
    const std::function<void(const v1::StartCaptureResponse& started,
                             const v1::CaptureProgress& progress)>& on_progress = nullptr) {
  const auto deadline = absl::ToChronoTime(absl::Now() + timeout);
  WatchedCapture out;
  grpc::ClientContext start_ctx;
  start_ctx.set_deadline(deadline);
  if (grpc::Status s = stub.StartCapture(&start_ctx, request, &out.started); !s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("StartCapture: ", s.error_message()));
  }
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(deadline);
  v1::WatchCaptureRequest watch;
  watch.set_capture_id(out.started.capture_id());
  auto reader = stub.WatchCapture(&watch_ctx, watch);
  v1::CaptureProgress p;
  while (reader->Read(&p)) {
    if (on_progress) on_progress(out.started, p);
    out.last = p;
  }
  const grpc::Status s = reader->Finish();
  if (out.last.done()) return out;
  std::string last = out.last.ShortDebugString();
  if (last.empty()) last = "none";
  if (last.size() > 300) last = last.substr(0, 300) + "...";
  const std::string where =
      absl::StrCat("capture ", out.started.capture_id(), " (last progress: ", last, ")");
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(
        absl::StrCat(where, " did not finish within ", absl::FormatDuration(timeout)));
  }
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("WatchCapture of ", where, ": ", s.error_message()));
  }
  return absl::InternalError(absl::StrCat("the progress stream of ", where, " ended early"));
}

// The same for a capture of `duration_ms` with nothing else set.
inline absl::StatusOr<WatchedCapture> StartAndWatchCapture(v1::Aggregator::StubInterface& stub,
                                                           int duration_ms,
                                                           absl::Duration timeout) {
  v1::StartCaptureRequest request;
  request.set_duration_ms(duration_ms);
  return StartAndWatchCapture(stub, request, timeout);
}

}  // namespace podprof::testing

#endif  // PODPROF_HARNESS_CAPTURE_WATCH_H_
