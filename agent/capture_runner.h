// One capture on this host: asks the workload's profiler for a session at the requested
// instant, samples the runtime metrics meanwhile, reads the resulting XSpace with the streaming
// reader and streams it as chunks. Two files implement it: capture_runner.cc gets the XSpace
// (the workload's profiler driven, or the flight recorder's window frozen and joined), and
// capture_stream.cc reads, analyses and streams it (Finish and what it calls).
#ifndef PODPROF_AGENT_CAPTURE_RUNNER_H_
#define PODPROF_AGENT_CAPTURE_RUNNER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/recorder.h"
#include "agent/runtime_metrics.h"
#include "analysis/host_summary.h"
#include "common/clock.h"
#include "kernelprof/capture_check.h"
#include "proto/podprof_agent.pb.h"
#include "proto/profiler_service.grpc.pb.h"
#include "stream/capture_encoder.h"
#include "trace/byte_source.h"
#include "trace/model.h"

namespace podprof::agent {

// The workload's services as the runner uses them. Stubs are thread-safe.
struct Workload {
  std::string profiler_address;
  std::unique_ptr<tensorflow::ProfilerService::StubInterface> profiler;
  // The channel under `profiler`, whose backoff a reconnection ends
  // (agent/workload_channel.h); null where `profiler` is a test's own stub.
  std::shared_ptr<grpc::Channel> profiler_channel;
  // The runtime metric services ([workload] metrics), read only through this; null where the
  // workload offers none.
  std::unique_ptr<RuntimeMetrics> metrics;
  // The stub podprof's own captures ask the profiler with, on a channel that refuses an answer
  // past kMaxCaptureResponseBytes before it is parsed, and that channel (Agent's constructor);
  // null where a test gave its own `profiler`, which captures then use.
  std::unique_ptr<tensorflow::ProfilerService::StubInterface> capture_profiler;
  std::shared_ptr<grpc::Channel> capture_channel;
  // The recorder's own stub to the profiler, on a channel that refuses a snapshot past
  // [recorder] max_bytes before it is parsed (Agent::StartRecorder); null where a test gave
  // its own `profiler`, which the recorder then uses.
  std::unique_ptr<tensorflow::ProfilerService::StubInterface> recorder_profiler;
  // The flight recorder over `recorder_profiler` or `profiler` ([recorder] enabled); null
  // when off.
  std::unique_ptr<Recorder> recorder;
};

struct RunnerLimits {
  int64_t counter_interval_ns = 100'000'000;
  // AgentConfig::analyse.
  bool analyse = true;
  int64_t max_capture_duration_ns = 300'000'000'000;
  // The agent's own chunk limit; a request's max_chunk_bytes can only lower it.
  size_t max_chunk_bytes = 4 << 20;
  int64_t workload_timeout_ns = 60'000'000'000;
  std::string temp_dir = "/tmp";
};

struct CaptureOutcome {
  stream::ChunkCounts counts;
  std::vector<std::string> warnings;
  // A snapshot's window with no device event is evidence (a hang: the chips idle), not a
  // failed capture: the host completes with none and says so.
  bool no_events_ok = false;
  int64_t actual_start_ns = 0;
  int64_t actual_end_ns = 0;
  uint64_t xspace_bytes = 0;
  // The capture as read (chips learned from it when sysfs shows none).
  std::vector<trace::Chip> chips;
  // The host's summary, when the request asked for this agent's analysis version and every
  // chip came in one piece (analysis::HostAnalyser); sent after the series, before the trailer.
  std::optional<analysis::HostSummary> summary;
};

// A capture's cancellation, told by its call the moment the client goes away (the RPC's
// OnCancel), so that the runner waits for it rather than polling. One per capture;
// thread-safe.
class CaptureCancel {
 public:
  // The client went away. Idempotent.
  void Cancel() ABSL_LOCKS_EXCLUDED(mu_);
  bool cancelled() const ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until Cancel() or Close(), whichever comes first; whether it was Cancel().
  bool AwaitCancelOrClose() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends AwaitCancelOrClose's wait: the workload answered, so there is no session to end.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool Decided() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cancelled_ || closed_; }

  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

// Stateless between captures; one Run() per capture. Thread-compatible: the caller ensures one
// capture at a time per host.
class CaptureRunner {
 public:
  // `clock` and `workload` must outlive the runner.
  CaptureRunner(Clock& clock, const Workload& workload) : clock_(clock), workload_(workload) {}

  // Runs the capture and streams every chunk, the trailer last. Errors name the cause:
  // Unavailable (workload unreachable, also on a fresh channel given kReconnectDeadlineNs to
  // connect: agent/workload_channel.h), AlreadyExists (profiler busy), FailedPrecondition (late
  // start, empty trace), DeadlineExceeded (workload hung), DataLoss (unreadable XSpace),
  // Cancelled (`cancel` was cancelled while the workload captured; its session is
  // terminated). `cancel` may be null: a capture nobody can cancel. Run closes it.
  absl::Status Run(const podprof::v1::CaptureRequest& request, const podprof::v1::HostInfo& host,
                   const RunnerLimits& limits, CaptureCancel* cancel, stream::ChunkSink* sink,
                   CaptureOutcome* outcome);

 private:
  // Asks the workload's profiler for the session `preq` and waits for its end; when `cancel`
  // fires, ends the session (Terminate) and sets `*terminated`. A call that finds the
  // profiler unreachable is made once more on a fresh channel, if one connects within
  // kReconnectDeadlineNs and the window can still start in time (`asap`: a window from now,
  // whose start moves to the second call's). Returns the call's status.
  grpc::Status Profile(tensorflow::ProfileRequest* preq, bool asap, int64_t timeout_ns,
                       CaptureCancel* cancel, bool* terminated, tensorflow::ProfileResponse* presp);
  // Reads the workload's XSpace `xspace` and streams it (host, then plane by plane) in chunks
  // of at most `chunk_limit` bytes; fills the outcome's chips, warnings and window. With
  // `analyse_with` (the series sampled beside the capture), each plane is analysed as it
  // streams and the outcome gets the host's summary.
  // A snapshot request: the window frozen from the recorder's ring, joined into one XSpace and
  // streamed as a capture's.
  absl::Status RunSnapshot(const podprof::v1::CaptureRequest& request,
                           const podprof::v1::HostInfo& host, const RunnerLimits& limits,
                           stream::ChunkSink* sink, CaptureOutcome* outcome);
  // The capture's XSpace (a file the workload wrote, or the recorder's window in memory)
  // streamed, then the sampled series, the summary and the trailer.
  absl::Status Finish(trace::ByteSource& xspace, bool empty_trace,
                      const podprof::v1::CaptureRequest& request, const podprof::v1::HostInfo& host,
                      const RunnerLimits& limits,
                      const std::vector<podprof::v1::CounterSeries>& sampled,
                      const std::string& sampler_error, stream::ChunkSink* sink,
                      CaptureOutcome* outcome);
  // Where every core stood at a snapshot (a hang's may hold no kernel at all), a line per
  // runtime metric service in the outcome's warnings.
  void AddRuntimeStatus(CaptureOutcome* outcome);
  // A capture that holds no device event: a failure, or for a snapshot (no_events_ok) the
  // finding, said in the outcome's warnings.
  absl::Status NoEvents(CaptureOutcome* outcome) const;
  // `holds` gets what the capture holds of what a request may ask for (its chips, device
  // events and performance counter series).
  absl::Status StreamXSpace(trace::ByteSource& xspace, const podprof::v1::HostInfo& host,
                            const podprof::v1::CaptureOptions& options, size_t chunk_limit,
                            const std::vector<podprof::v1::CounterSeries>* analyse_with,
                            stream::ChunkSink* sink, CaptureOutcome* outcome,
                            kernelprof::CaptureHolds* holds);
  // What the capture `xspace` lacks of what `asked` asked for, as warnings naming the host
  // (kernelprof/capture_check.h); its host planes are read for it when a host or Python tracer
  // was asked for.
  static void AddMissing(trace::ByteSource& xspace, const podprof::v1::CaptureOptions& asked,
                         const std::string& host_name, kernelprof::CaptureHolds* holds,
                         CaptureOutcome* outcome);

  Clock& clock_;
  const Workload& workload_;
};

// A session id the workload can use as a directory name, from a capture id.
std::string SessionIdFor(const std::string& capture_id);

// Removes the capture repositories (podprof-capture-*) in `parent` left by agents that died
// mid-capture: their owner process is gone. Returns how many were removed.
int RemoveStaleCaptureDirs(const std::string& parent);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_CAPTURE_RUNNER_H_
