// One simulated TPU host: runs profiling sessions against the pod model (or a replayed
// recording), writes their XSpace files, answers runtime-metric queries, and records its ground
// truth (clock errors, each session's true start) for tests.
#ifndef PODPROF_SIM_SIM_HOST_H_
#define PODPROF_SIM_SIM_HOST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "sim/dcn_metric.h"
#include "sim/kernel_profiling.h"
#include "sim/pod_model.h"
#include "sim/replay.h"
#include "sim/xspace_builder.h"

namespace podprof::sim {

struct SimHostOptions {
  PodConfig pod;
  // The host clock's error against true time.
  int64_t clock_offset_ns = 0;
  double clock_drift_ppm = 0;
  int64_t clock_epoch_ns = 0;  // the true instant drift counts from; 0: start-up
  // Extra shift of device timestamps only.
  int64_t device_clock_offset_ns = 0;
  bool counters = true;
  // Name the host writes into its XSpace; files are named by the request, as the real server.
  std::string host_name;
  // Where to keep the ground truth as JSON (empty: nowhere).
  std::string truth_file;
  // A recorded capture to answer with instead of the model (empty: the model).
  std::string replay_path;
  // What continuous profiling costs the workload: steps that start while a continuous session
  // runs take this much longer in the program timings the metric service reports (the
  // recorder's guard, agent/recorder_guard.h, is tested against it). The traces keep the model.
  double continuous_overhead = 0;
};

// The longest session a simulated host runs, ms.
inline constexpr int64_t kMaxSessionMs = 3'600'000;

struct SessionRequest {
  std::string session_id;
  std::string repository_root;
  // `override_hostname` if set, else the request's host name; names the file.
  std::string file_host;
  // Requested start on the host clock, ns since the epoch; 0 = now.
  int64_t start_host_ns = 0;
  int64_t duration_ms = 0;  // 1..kMaxSessionMs
  // Kernel profiling the capture asked for (advanced_configuration).
  KernelProfilingRequest kernel_profiling;
};

struct SessionResult {
  std::string path;
  bool empty_trace = true;
  bool terminated = false;
  int64_t late_by_ns = 0;  // how far past the requested start the session began
  int64_t true_start_ns = 0;
  int64_t true_end_ns = 0;
  int64_t host_start_ns = 0;
  int64_t kernel_events = 0;
};

// Bucket layout of the runtime's distributions as the simulated host reports them: exponential,
// bucket 0 below kTimingScale, bucket i (1..kTimingBuckets) up to kTimingScale * 2^i, then
// overflow (1 us to ~16 s for timings).
inline constexpr int kTimingBuckets = 24;
inline constexpr double kTimingGrowth = 2, kTimingScale = 1;
int TimingBucket(double value);

// A distribution accumulated since a start, as the runtime's cumulative metrics keep one.
struct Cumulative {
  int64_t start_host_ns = 0;  // Metric.start_timestamp
  int64_t count = 0;
  double sum = 0, sum_sq = 0, min = 0, max = 0;
  std::vector<int64_t> buckets = std::vector<int64_t>(kTimingBuckets + 2, 0);
  void Add(double value);
};

// A point-in-time view of one chip for the metric service.
struct ChipActivity {
  int chip = 0;
  double duty_cycle_percent = 0;  // busy share of the steps that ended in the last second
  double idle_seconds = 0;        // since the chip's last kernel ended; 0 while busy
  int queued_kernels = 0;         // kernels of the current step not yet finished
  int64_t hbm_usage_bytes = 0;
  int64_t hbm_total_bytes = 0;
  // HBM bytes the last complete step's kernels moved, as a share of what the chip's peak
  // bandwidth could move in the step period.
  double hbm_bandwidth_percent = 0;
};

// One observation of a transfer metric: its value in the metric's unit and the size of the
// buffer it concerns (0 for metrics about connections rather than buffers).
struct TransferObservation {
  int64_t bytes = 0;
  double value = 0;
};

// What the runtime's multi-slice ("megascale") metrics report: the observations of the last
// complete step, over all chips of this host. A pod of one slice has no data-centre network,
// so the step's collectives stand in for its cross-slice transfers (a multi-slice job's
// dcn_transfer_latencies are its DCN transfers': DcnLatencies).
struct HostTransfers {
  // The step the observations accumulate over, on the host clock.
  int64_t start_host_ns = 0;
  int64_t end_host_ns = 0;
  // Per collective and chip: the transfer phase (after the slowest chip arrived), us.
  std::vector<TransferObservation> outbound_us;
  // Per collective and chip: from its launch until its data arrived (the wait for the
  // slowest chip plus the transfer), us.
  std::vector<TransferObservation> inbound_us;
  // Per reducing collective and chip: the host's share of the reduction, us.
  std::vector<TransferObservation> host_compute_us;
  // Per collective and chip: inbound plus host compute, us.
  std::vector<TransferObservation> collective_us;
  // Per chip: the step's input batch into HBM, and its outputs back to the host, us.
  std::vector<TransferObservation> host_to_device_us;
  std::vector<TransferObservation> device_to_host_us;
  // Per connection to another host of the pod: its smallest round trip (us) and its delivery
  // rate (Mbit/s) over the step.
  std::vector<TransferObservation> tcp_min_rtt_us;
  std::vector<TransferObservation> tcp_delivery_mbps;
};

// One TensorCore at an instant, for the runtime-status query.
struct CoreState {
  int chip = 0;                // host-local, the metrics' device id
  int64_t global_chip_id = 0;  // pod-wide
  int core_on_chip = 0;
  int64_t global_core_id = 0;  // pod-wide
  int64_t run_id = 0;          // the step executing, or last executed when idle
  int op = -1;                 // the kernel executing (index into PodModel::ops()), or -1
  double op_progress = 0;      // how far into that kernel, 0..1
  // Whether the job has dispatched the next step behind this one (JAX does, while it steps;
  // a stalled job has nothing queued).
  bool next_queued = true;
};

// Thread-safe: gRPC handlers call it concurrently. One profiling session runs at a time.
class SimHost {
 public:
  // `truth` is true time; it must outlive the host.
  static absl::StatusOr<std::unique_ptr<SimHost>> Create(const SimHostOptions& options,
                                                         Clock& truth);

  // Waits for the requested start on the host clock, profiles for the duration, writes
  // `<root>/<session>/<file_host with ':' as '_'>.xplane.pb`. Fails with AlreadyExists while
  // another session runs, InvalidArgument for bad requests, Cancelled when `cancelled()` turns
  // true or the host shuts down. Terminate() ends the session early (normally).
  absl::StatusOr<SessionResult> RunSession(const SessionRequest& request,
                                           const std::function<bool()>& cancelled);
  // Ends the running session `session_id` early; NotFound if no such session runs.
  absl::Status Terminate(const std::string& session_id);

  // Continuous profiling, as jaxlib 0.10.2's profiler server does it (docs/INTEROP.md,
  // "Continuous profiling"): StartContinuous begins a session that runs until stopped
  // (AlreadyExists while one runs; while it runs RunSession fails with Internal, "Another
  // profiling session active."); Snapshot returns the XSpace of everything since the start or
  // the last snapshot and goes on from now; StopContinuous ends it, dropping what is not yet
  // snapshotted. Both fail with NotFound when no continuous session runs.
  absl::Status StartContinuous();
  absl::StatusOr<tensorflow::profiler::XSpace> Snapshot(const std::function<bool()>& cancelled);
  absl::Status StopContinuous();
  // Stops any running session (for shutdown).
  void Shutdown();

  std::vector<ChipActivity> Activity();
  // libtpu's `hlo.execution.timing.distribution.microseconds`, per chip: every execution of
  // the step's program (start to its last kernel's end) that ended since the host started.
  std::vector<Cumulative> ProgramTimings() ABSL_LOCKS_EXCLUDED(timing_mu_);
  HostTransfers Transfers();
  // A multi-slice job's `megascale.dcn_transfer_latencies`: every DCN transfer this host's chips
  // received in the steps that ended since the host started, by buffer-size class
  // (sim/dcn_metric.h). Empty with one slice.
  std::map<std::string, DcnLatencyClass> DcnLatencies() ABSL_LOCKS_EXCLUDED(timing_mu_);
  // Every TensorCore of this host, by chip and core.
  std::vector<CoreState> CoreStates();
  const std::string& host_name() const { return options_.host_name; }
  const PodModel& model() const { return model_; }
  SkewedClock& host_clock() { return host_clock_; }
  Clock& truth() { return truth_; }
  bool replaying() const { return replay_.has_value(); }

 private:
  SimHost(const SimHostOptions& options, Clock& truth, PodModel model);
  absl::Status WriteTruth() ABSL_LOCKS_EXCLUDED(mu_);
  // Writes the session's XSpace file (result->path) and fills its kernel events; CANCELLED when
  // `cancelled()` turns true meanwhile (no file is left).
  absl::Status WriteTrace(const SessionRequest& request, int64_t host_end_ns,
                          const std::function<bool()>& cancelled, SessionResult* result);
  // The XSpace of a continuous session's `window` (its true start and end set).
  absl::StatusOr<tensorflow::profiler::XSpace> SnapshotSpace(
      SessionWindow window, const std::function<bool()>& cancelled);
  // Sleeps until the host clock reads `host_ns`; false if stopped early.
  bool WaitUntil(int64_t host_ns, absl::Notification* stop, const std::function<bool()>& cancelled);

  const SimHostOptions options_;
  Clock& truth_;
  SkewedClock host_clock_;
  const PodModel model_;
  std::optional<Replay> replay_;
  // Program timings counted so far: every step up to timed_through_ (ProgramTimings).
  absl::Mutex timing_mu_;
  int64_t timed_through_ ABSL_GUARDED_BY(timing_mu_) = 0;
  std::vector<Cumulative> timings_ ABSL_GUARDED_BY(timing_mu_);
  DcnLatencyCounter dcn_latencies_ ABSL_GUARDED_BY(timing_mu_);

  absl::Mutex mu_;
  // Guarded by mu_.
  std::string active_session_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<absl::Notification> stop_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::pair<SessionRequest, SessionResult>> history_ ABSL_GUARDED_BY(mu_);
  // The continuous session's next snapshot begins here (true time); -1 when none runs.
  int64_t continuous_since_ns_ ABSL_GUARDED_BY(mu_) = -1;
  // A snapshot being written: StopContinuous waits for none (it only ends the session), but a
  // second snapshot is refused meanwhile, as the server serves one at a time.
  bool snapshotting_ ABSL_GUARDED_BY(mu_) = false;
  // When continuous sessions ran (true time; INT64_MAX: still running), for its overhead.
  std::vector<std::pair<int64_t, int64_t>> continuous_spans_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podprof::sim

#endif  // PODPROF_SIM_SIM_HOST_H_
