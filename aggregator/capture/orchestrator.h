// Pod-wide captures: picks the start instant, has every chosen agent capture at that instant
// (translated into its clock), collects the chunks, puts every host on the aggregator's clock
// (probe-based clock models, refined by collectives), stores the merged capture, and reports
// progress. Thread-safe. Each capture has a thread that drives it; the hosts' streams are read,
// and each host analysed as it finishes, on a shared StreamPool: a bounded number of threads
// however large the pod.
#ifndef PODPROF_AGGREGATOR_CAPTURE_ORCHESTRATOR_H_
#define PODPROF_AGGREGATOR_CAPTURE_ORCHESTRATOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/capture/alignment.h"
#include "aggregator/capture/registry.h"
#include "aggregator/capture/stored_options.h"
#include "aggregator/capture/stream_budget.h"
#include "aggregator/capture/stream_pool.h"
#include "common/clock.h"
#include "proto/podprof_aggregator.pb.h"
#include "storage/capture_writer.h"
#include "trace/model.h"

namespace podprof::aggregator {

struct OrchestratorLimits {
  int64_t max_duration_ns = 300'000'000'000;
  // The least lead time between StartCapture and the start instant.
  int64_t min_lead_ns = 300'000'000;
  // Longest delay before the start a caller may ask for.
  int64_t max_delay_ns = 3'600'000'000'000;
  // Captures running at once; more are refused with RESOURCE_EXHAUSTED.
  int max_concurrent = 4;
  // StartCapture calls accepted per rolling minute (a runaway script cannot flood the pod).
  int max_starts_per_minute = 30;
  // Most hosts named in one request.
  int max_hosts = 10'000;
  // Threads reading agents' streams and analysing each host as it finishes (0 = one per
  // core); hosts streaming at once (see StreamPool).
  int ingest_workers = 0;
  int max_active_hosts = 16;
  // The most bytes one host's stream may bring (ingest.max_host_stream_bytes): a host's
  // encoded data is held until its stream ends, so a stream that never ends (or sends without
  // limit) fails its host at this size instead of growing the aggregator.
  int64_t max_host_stream_bytes = int64_t{1} << 30;
  // The most all hosts' streams may hold at once (ingest.max_stream_bytes; StreamBudget): past
  // it the stream holding the most fails.
  int64_t max_stream_bytes = int64_t{2} << 30;
  // [snapshots] without_recorder = "refuse": a snapshot of hosts of which any has no armed
  // flight recorder fails with FAILED_PRECONDITION naming them. False ("capture-after"): the
  // whole pod is captured from the request on and stored as that window (kAfterRequest).
  bool refuse_snapshot_without_recorder = false;
};

struct CaptureRun;
class HostStream;

class Orchestrator {
 public:
  Orchestrator(Registry* registry, storage::CaptureWriter* writer, Clock& clock,
               OrchestratorLimits limits);
  ~Orchestrator();

  // Validates, picks hosts and the start instant, and starts the capture in the background.
  absl::StatusOr<podprof::v1::StartCaptureResponse> Start(
      const podprof::v1::StartCaptureRequest& request);
  // Streams progress (from the beginning) until the capture ends, `send` fails or `cancelled()`.
  absl::Status Watch(const std::string& id,
                     const std::function<bool(const podprof::v1::CaptureProgress&)>& send,
                     const std::function<bool()>& cancelled);
  // Stops a running capture everywhere and returns CANCELLED; for one already over, returns the
  // state it ended in (COMPLETE, PARTIAL, FAILED, CANCELLED). NotFound for an unknown id.
  absl::StatusOr<podprof::v1::CaptureStatus> Cancel(const std::string& id);
  // Hosts streaming into the ingest pipeline now (for /metrics).
  int active_hosts() const { return streams_.active(); }

 private:
  void Execute(std::shared_ptr<CaptureRun> run);
  // Starts every host's Capture call on the stream pool; returns when all streams are over.
  void CollectHosts(CaptureRun& run, std::vector<std::unique_ptr<HostStream>>* hosts);
  // Aligns the hosts that delivered, stores the capture, and posts the summary.
  void StoreRun(CaptureRun& run, std::vector<std::unique_ptr<HostStream>>& hosts);
  // A snapshot's stored window and kWindowLabel, from its hosts' actual windows (`w`'s start,
  // end and labels; run.window).
  void SnapshotWindow(CaptureRun& run, const std::vector<std::unique_ptr<HostStream>>& hosts,
                      const std::map<std::string, const HostCorrection*>& correction_of,
                      storage::CaptureWrite* w);
  // The capture's last progress event: each host's outcome and correction.
  void PostSummary(CaptureRun& run, const std::vector<std::unique_ptr<HostStream>>& hosts,
                   const std::vector<HostCorrection>& corrections, storage::CaptureState state,
                   const absl::Status& stored);

  Registry* const registry_;
  storage::CaptureWriter* const writer_;
  Clock& clock_;
  const OrchestratorLimits limits_;
  // What every capture's host streams hold at once; before streams_, which it outlives.
  StreamBudget stream_budget_;
  StreamPool streams_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<CaptureRun>> runs_ ABSL_GUARDED_BY(mu_);
  // The thread running each capture, by id; joined once the capture is done.
  std::map<std::string, std::thread> threads_ ABSL_GUARDED_BY(mu_);
  // Finished captures kept for WatchCapture; older ones are forgotten (they are in the store).
  static constexpr size_t kKeptFinishedRuns = 32;
  void PruneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::deque<int64_t> recent_starts_ ABSL_GUARDED_BY(mu_);  // for max_starts_per_minute
  // Starts admitted and not yet in runs_ (or given up): they hold a max_concurrent slot, so
  // that two concurrent StartCapture calls cannot both take the last one.
  int admitted_ ABSL_GUARDED_BY(mu_) = 0;
  // The hosts of `hosts` whose last heartbeat said their flight recorder is not armed, each as
  // "name (state: reason)".
  std::vector<std::string> HostsWithoutRecorder(const std::vector<Registry::Handle>& hosts);
  // A snapshot's window: the seconds before `now` when every host's recorder is armed, else
  // the planned instant on (or FailedPrecondition naming the hosts, when configured to refuse).
  absl::Status PlanSnapshotWindow(CaptureRun& run, int64_t now, int64_t duration_ns);
  // Start's work once admitted: the hosts, the start time, the record, the run's thread.
  absl::StatusOr<podprof::v1::StartCaptureResponse> StartAdmitted(
      const podprof::v1::StartCaptureRequest& req, int64_t duration_ns) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes a slot of each limit, or says which limit refuses.
  absl::Status Admit() ABSL_LOCKS_EXCLUDED(mu_);
  // Gives back the max_concurrent slot Admit took (the run, if any, is listed by now).
  void EndAdmission() ABSL_LOCKS_EXCLUDED(mu_);
  // Start lead per host for sending the requests, as the last capture measured it.
  std::atomic<int64_t> dispatch_per_host_ns_;
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CAPTURE_ORCHESTRATOR_H_
