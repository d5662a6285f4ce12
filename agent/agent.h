// The agent: its state (configuration, chips, the one running capture, the workload's
// services). The gRPC services it serves are agent/agent_service.h (podprof.v1.Agent) and
// agent/profiler_proxy.h (the XProf facade); its registration is agent/registrar.h.
#ifndef PODPROF_AGENT_AGENT_H_
#define PODPROF_AGENT_AGENT_H_

#include <cstdint>
#include <memory>
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
#include "proto/podprof_agent.grpc.pb.h"

namespace podprof::agent {

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

  // What the aggregator is told of this host: its name and address, labels, versions and the
  // chips known now (from sysfs, else learned from a capture or LearnChipsFromMetrics). Makes no
  // call: a Prometheus scrape reads it.
  podprof::v1::HostInfo HostInfo();
  // Whether each workload service answers now: the profiler (Monitor, 500 ms) and each runtime
  // metric service (RuntimeMetrics::Check), and where one is unreachable once more on a fresh
  // channel given kCheckReconnectDeadlineNs to connect (agent/workload_channel.h).
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
  // With no chips from sysfs or a capture yet, asks the runtime metric services which devices
  // the workload holds (one call each, RuntimeMetrics::Chips); makes no call once chips are
  // known. Blocks; Info and registration call it before HostInfo().
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

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_AGENT_H_
