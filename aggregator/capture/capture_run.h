// One pod capture while it runs: its hosts, their stages, the progress log WatchCapture streams,
// and the pod-wide analysis its hosts add to as each is analysed. Shared by the orchestrator
// (which drives it) and each host's stream.
#ifndef PODPROF_AGGREGATOR_CAPTURE_CAPTURE_RUN_H_
#define PODPROF_AGGREGATOR_CAPTURE_CAPTURE_RUN_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "aggregator/capture/registry.h"
#include "common/clock.h"
#include "ingest/capture_ingest.h"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::aggregator {

struct CaptureRun {
  // Where each host is, as WatchCapture reports it. Only ever moves forward.
  enum Stage { kNone = -1, kWaiting, kCapturing, kConverting, kStreaming, kFinished };

  std::string id;
  podprof::v1::StartCaptureRequest request;
  int64_t start_ns = 0;  // aggregator clock
  // A snapshot's window as planned (kBeforeRequest or kAfterRequest); empty for a capture.
  std::string window;
  // When the capture was asked for, aggregator clock: a snapshot's hosts whose windows start
  // after it captured from the request on.
  int64_t requested_ns = 0;
  // The window stored once the hosts are in (a snapshot's may differ from the planned one).
  int64_t stored_start_ns = 0, stored_end_ns = 0;
  std::vector<Registry::Handle> hosts;
  absl::Mutex mu;
  absl::CondVar cv;  // signalled on every new progress event and at the end
  std::vector<podprof::v1::CaptureProgress> log ABSL_GUARDED_BY(mu);
  std::vector<Stage> stage ABSL_GUARDED_BY(mu);
  int finished ABSL_GUARDED_BY(mu) = 0;
  bool done ABSL_GUARDED_BY(mu) = false;
  std::atomic<bool> cancelled{false};
  absl::Notification stop;  // notified with `cancelled`, to cut the orchestrator's waits short
  // Each host's Capture call while it runs (index as `hosts`), for cancellation.
  std::vector<std::shared_ptr<grpc::ClientContext>> contexts ABSL_GUARDED_BY(mu);
  // The pod's roll-ups and collective arrivals, each host added as it is analysed.
  ingest::PodAnalysis pod;

  // Appends `p` to the log (percent_complete filled in unless set) and wakes the watchers.
  void Post(podprof::v1::CaptureProgress p, Clock& clock) {
    absl::MutexLock lock(&mu);
    PostLocked(std::move(p), clock.NowNs());
  }
  // Moves host `i` to `to` and posts `p` about it; a stage already passed is not posted again
  // (streaming is, with fresh counts).
  void Advance(size_t i, Stage to, podprof::v1::CaptureProgress p, Clock& clock) {
    absl::MutexLock lock(&mu);
    if (stage[i] > to || (stage[i] == to && to != kStreaming)) return;
    if (to == kFinished) ++finished;
    stage[i] = to;
    PostLocked(std::move(p), clock.NowNs());
  }
  void Cancel() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    cancelled = true;
    if (!stop.HasBeenNotified()) stop.Notify();
    for (auto& ctx : contexts) {
      if (ctx) ctx->TryCancel();
    }
  }
  void ForgetContext(size_t i) {
    absl::MutexLock lock(&mu);
    contexts[i].reset();
  }

 private:
  void PostLocked(podprof::v1::CaptureProgress p, int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    p.set_capture_id(id);
    p.set_time_ns(now);
    if (p.percent_complete() == 0 && !p.done()) {
      // Seven tenths for the window, the rest as hosts finish.
      const double window = static_cast<double>(request.duration_ms()) * 1e6;
      const double f = std::clamp(static_cast<double>(now - start_ns) / window, 0.0, 1.0);
      p.set_percent_complete(70 * f + 30.0 * finished / static_cast<double>(hosts.size()));
    }
    log.push_back(std::move(p));
    cv.SignalAll();
  }
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CAPTURE_CAPTURE_RUN_H_
