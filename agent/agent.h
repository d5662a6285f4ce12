// The agent: its state (configuration, chips, the one running capture) and the gRPC services
// it serves: podprof.v1.Agent and the tensorflow.ProfilerService facade for XProf.
#ifndef PODPROF_AGENT_AGENT_H_
#define PODPROF_AGENT_AGENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/capture_runner.h"
#include "agent/config.h"
#include "agent/discovery.h"
#include "agent/recorder_guard.h"
#include "agent/xprof_bounds.h"
#include "common/clock.h"
#include "metrics/registry.h"
#include "proto/podprof_agent.grpc.pb.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "proto/profiler_service.grpc.pb.h"
#include "security/refusal_log.h"
#include "security/tls.h"

namespace podprof::agent {

extern const char* const kAgentVersion;

// Shared by the service handlers (any gRPC thread) and the daemon lifecycle's thread
// (registration and heartbeats as its tick, reloads). Guarded by mu_ where noted; the workload
// stubs are thread-safe.
class Agent {
 public:
  // `clock` must outlive the agent. Builds workload channels; discovers chips.
  static absl::StatusOr<std::unique_ptr<Agent>> Create(const AgentConfig& config, Clock& clock);

  // Claims the host for capture `id`; FailedPrecondition naming the running capture if busy
  // ("the host is busy with capture \"X\"; try again when it ends"), Unavailable while
  // draining.
  absl::Status BeginCapture(const std::string& id);
  void EndCapture();
  // From now on new captures are refused (SIGTERM); running ones finish.
  void StartDraining();

  podprof::v1::HostInfo HostInfo();
  // Whether each workload service answers now: the profiler (Monitor) and each runtime metric
  // service (ListSupportedMetrics), 500 ms each, and where one is unreachable once more on a
  // fresh channel given kCheckReconnectDeadlineNs to connect (agent/workload_channel.h).
  // Blocks; for Info and the heartbeats.
  std::vector<podprof::v1::WorkloadEndpoint> CheckWorkload();
  std::string active_capture();
  RunnerLimits Limits();
  // What the XProf facade allows now: the capture limit, the spool, [xprof] allowed_roots.
  XprofBounds XprofLimits();
  AgentConfig config();
  // Applies the reloadable keys of `fresh`; returns what changed.
  std::vector<std::string> Reload(const AgentConfig& fresh);
  // Remembers chips seen in a capture when sysfs shows none.
  void LearnChips(const std::vector<trace::Chip>& chips);
  // With no chips from sysfs or a capture yet, asks the runtime metric service which devices
  // the workload holds.
  void LearnChipsFromMetrics();

  // The port podprof.v1.Agent actually listens on (when `listen` asked for port 0), used in
  // the advertised address when that names no port of its own.
  void SetBoundPort(int port);
  // The UDP port the clock probe responder answers on; 0 = none.
  void SetClockProbePort(int port);

  // A problem found at start-up that will make captures of this host fail, one sentence saying
  // what to set (agent/advertise_check.h); sent with every registration.
  void AddStartupWarning(std::string warning);
  std::vector<std::string> startup_warnings();

  // The flight recorder's state for Info and the heartbeats ("off" when not enabled).
  podprof::v1::RecorderStatus RecorderStatus() const;

  // The recorder's guard (agent/recorder_guard.h), for the telemetry to feed; null when the
  // recorder is off or unguarded (no telemetry, or [recorder] max_slowdown = 0).
  RecorderGuard* recorder_guard() { return recorder_guard_.get(); }

  Clock& clock() { return clock_; }
  const Workload& workload() const { return workload_; }
  int64_t start_ns() const { return start_ns_; }

 private:
  Agent(AgentConfig config, std::vector<DiscoveredChip> discovered, Clock& clock);
  // [recorder] enabled: the flight recorder over the workload's profiler, kept armed.
  void StartRecorder(const AgentConfig& config);

  Clock& clock_;
  Workload workload_;
  const int64_t start_ns_;
  absl::Mutex mu_;
  AgentConfig config_ ABSL_GUARDED_BY(mu_);
  std::vector<DiscoveredChip> discovered_ ABSL_GUARDED_BY(mu_);
  std::vector<trace::Chip> learned_ ABSL_GUARDED_BY(mu_);
  std::string active_ ABSL_GUARDED_BY(mu_);
  int bound_port_ ABSL_GUARDED_BY(mu_) = 0;
  int clock_probe_port_ ABSL_GUARDED_BY(mu_) = 0;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> startup_warnings_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<RecorderGuard> recorder_guard_;
  // Last: stopped (and the recorder disarmed) before the guard and the workload's stubs go.
  std::unique_ptr<RecorderDriver> recorder_driver_;
};

// podprof.v1.Agent. Handlers are thin; the work is in CaptureRunner. Capture is on gRPC's
// callback API (agent/capture_call.h), so that the client going away reaches the capture as
// an event; Ping and Info answer at once and stay synchronous.
class AgentService final
    : public podprof::v1::Agent::WithCallbackMethod_Capture<podprof::v1::Agent::Service> {
 public:
  // Who may start captures comes from the agent's configuration at each call
  // (tls.allowed_aggregators; empty: a certificate carrying urn:podprof:role:aggregator), so a
  // reload changes it for the next call.
  explicit AgentService(Agent* agent) : agent_(agent), refusals_(agent->clock()) {}
  // Where each capture's outcome, duration and volume are counted (/metrics); none when never
  // set. Set before serving; `metrics` must outlive the service.
  void SetMetrics(metrics::Registry* metrics) { metrics_ = metrics; }
  // Where refusals are logged; the daemon routes gRPC's failed handshakes here too.
  security::RefusalLog& refusals() { return refusals_; }
  grpc::ServerWriteReactor<podprof::v1::CaptureChunk>* Capture(
      grpc::CallbackServerContext* context, const podprof::v1::CaptureRequest* request) override;
  grpc::Status Ping(grpc::ServerContext* context, const podprof::v1::PingRequest* request,
                    podprof::v1::PingResponse* response) override;
  grpc::Status Info(grpc::ServerContext* context, const podprof::v1::InfoRequest* request,
                    podprof::v1::InfoResponse* response) override;

 private:
  Agent* const agent_;
  security::RefusalLog refusals_;
  metrics::Registry* metrics_ = nullptr;
};

// tensorflow.ProfilerService that forwards to the workload, so XProf's capture button or
// `jax.collect_profile` pointed at the agent captures the workload, writing files where the
// request says within the bounds of agent/xprof_bounds.h.
//
// Who can reach it: over mutual TLS (FacadeUsesTls) callers are held to
// tls.allowed_profiler_clients, and refusals go to `refusals`; on loopback it is plaintext with
// no authentication, as XProf clients speak no TLS, so every local user can call it. What a
// caller gets: a session of at most limits.max_capture_duration, written under the allowed
// roots, while no other capture holds the host (one at a time, podprof's own captures
// included), with a deadline on the call to the workload; Terminate ends only the session
// this facade is running, and Monitor is held to the same length and the same turn.
//
// Handlers run on gRPC's threads; the running session's id is guarded by mu_.
class ProfilerProxy final : public tensorflow::ProfilerService::Service {
 public:
  ProfilerProxy(Agent* agent, bool mutual_tls, security::RefusalLog* refusals)
      : agent_(agent), mutual_tls_(mutual_tls), refusals_(refusals) {}
  // INVALID_ARGUMENT for a request beyond the bounds (naming the field and the limit),
  // ALREADY_EXISTS while another capture holds the host (naming it), UNAVAILABLE while the
  // agent drains; otherwise the workload's answer.
  grpc::Status Profile(grpc::ServerContext* context, const tensorflow::ProfileRequest* request,
                       tensorflow::ProfileResponse* response) override;
  // FAILED_PRECONDITION unless `session_id` is the session this facade is running.
  grpc::Status Terminate(grpc::ServerContext* context, const tensorflow::TerminateRequest* request,
                         tensorflow::TerminateResponse* response) override;
  // INVALID_ARGUMENT past the duration limit, ALREADY_EXISTS while the host is busy.
  grpc::Status Monitor(grpc::ServerContext* context, const tensorflow::MonitorRequest* request,
                       tensorflow::MonitorResponse* response) override;

 private:
  // OK, or the refusal (logged) of a caller not in tls.allowed_profiler_clients.
  grpc::Status Admit(const grpc::ServerContext& context);
  // Claims the host for `id`: the refusal as the facade answers it, or OK.
  grpc::Status Claim(const std::string& id);
  Agent* const agent_;
  const bool mutual_tls_;
  security::RefusalLog* const refusals_;
  absl::Mutex mu_;
  // The session_id of the Profile call running through this facade, if any.
  std::optional<std::string> session_ ABSL_GUARDED_BY(mu_);
};

// Registration with the aggregator: Register until it works, then Heartbeat; the caller's
// timer calls Tick() and waits the delay it returns.
class Registrar {
 public:
  Registrar(Agent* agent, std::unique_ptr<podprof::v1::Aggregator::StubInterface> stub,
            std::string address)
      : agent_(agent), stub_(std::move(stub)), address_(std::move(address)) {}
  // One registration or heartbeat attempt; returns ns until the next one (the interval, or a
  // doubling backoff capped at heartbeat.max_backoff while the aggregator is away).
  int64_t Tick();
  bool registered() const { return registered_; }
  // What Tick() returns while refused: it only looks whether Retry() was called, and a reload
  // ticks at once anyway.
  static constexpr int64_t kRefusedWaitNs = int64_t{3600} * 1'000'000'000;
  // Lets the next Tick() ask again after a refusal (called on reload).
  void Retry() { retry_.store(true); }

 private:
  Agent* const agent_;
  std::unique_ptr<podprof::v1::Aggregator::StubInterface> stub_;
  const std::string address_;
  // The address this agent registered, repeated in heartbeats.
  std::string registered_address_;
  bool registered_ = false;
  // The aggregator answered PERMISSION_DENIED: a lasting answer, so no more attempts until a
  // reload sets retry_ (from the lifecycle's thread, as Tick runs on it too; atomic anyway).
  bool refused_ = false;
  std::atomic<bool> retry_{false};
  int64_t backoff_ns_ = 0;
  int64_t aggregator_interval_ns_ = 0;
};

// Next retry delay: double the last one (starting at 1 s), never above `max_ns`.
int64_t NextBackoffNs(int64_t last_ns, int64_t max_ns);

// The kernel's clock discipline state (adjtimex), for Info.
podprof::v1::ClockSourceState ReadClockSource();

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_AGENT_H_
