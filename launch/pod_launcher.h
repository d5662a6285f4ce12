// A simulated pod on this machine: one podprof-aggregator, and per host a podprof-simhost (the
// TPU host's workload) and a podprof-agent, each on loopback ports it picks and announced
// through its ready file. The one place their command lines are written, so the demo, the
// integration tests and the benchmarks start the same pod and a new flag is added once.
//
// Two layers. The argv builders (AggregatorArgs, SimhostArgs, AgentArgs) only build command
// lines, for callers that own their processes (tests that signal and restart them one by one).
// Pod starts and owns the processes: in order, each once the one before is ready, so a host's
// agent is given its simulated host's ports and the aggregator's address.
//
// The daemons speak plaintext unless PodOptions::tls: then each reads its certificate from its
// configuration's [tls] table, and a host whose agent has an identity of its own names its own
// configuration file (HostOptions::agent_config_file).
#ifndef PODPROF_LAUNCH_POD_LAUNCHER_H_
#define PODPROF_LAUNCH_POD_LAUNCHER_H_

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace podprof::launch {

// One simulated host: its podprof-simhost and its podprof-agent.
struct HostOptions {
  // Both processes' --host-name; empty = "host-<index>".
  std::string name;
  // The host's clock error, given to both processes so that they read one wrong clock, as a
  // real host's workload and agent do (the drift counts from the host's start).
  int64_t clock_offset_ns = 0;
  double clock_drift_ppm = 0;  // passed with six significant digits
  // The extra error of the simulated host's device timestamps only.
  int64_t device_clock_offset_ns = 0;
  // Runs both processes under this command (e.g. {"ip", "netns", "exec", "ns1"}).
  std::vector<std::string> prefix;
  // The agent's --listen and --advertise, and --profiler-service-listen (its XProf facade;
  // "none" for none).
  std::string agent_listen = "127.0.0.1:0";
  std::string agent_advertise = "127.0.0.1:0";
  std::string agent_profiler_service_listen = "none";
  // The agent's --config; empty = the pod's <dir>/agent.toml. A file of the caller's, for a host
  // whose agent differs from the pod's (its own TLS identity): WritePodFiles does not write it.
  std::string agent_config_file;
  // The agent's --aggregator; empty = the pod's aggregator.
  std::string aggregator;
  // The agent's --workload-profiler and --workload-metrics; empty = its simulated host's
  // ports on 127.0.0.1 ("none" for no metrics, a dead port for a workload that is down).
  std::string workload_profiler;
  std::string workload_metrics;
  // The host's slice of a multi-slice job: its simulated host's --slice, which hands it to the
  // agent as the workload's environment (MEGASCALE_SLICE_ID) would; -1: no slice.
  int slice = -1;
  // More flags for this host's processes only, after the pod's. A flag the launcher already
  // passes must not be repeated (the daemons refuse a flag given twice): use a field.
  std::vector<std::string> simhost_flags, agent_flags;
};

struct PodOptions {
  // Holds podprof-aggregator, podprof-simhost and podprof-agent.
  std::string bin_dir;
  // Every file of the pod: configurations, database, ready files, logs, ground truth. Made if
  // missing.
  std::string dir;
  int hosts = 1;
  // Chips per simulated host; 0 = the generation's count.
  int chips = 0;
  std::string generation = "v6e";
  // --pod-seed of every simulated host: one seed makes one pod (the same kernels on every
  // host).
  uint64_t seed = 1;
  // The simulated hosts' _counters_ line (unit busy and stall fractions, energy).
  bool counters = true;
  // Start the aggregator, and an agent per host (false: simulated hosts only).
  bool aggregator = true;
  bool agents = true;
  // The aggregator's --listen, and every agent's --http-listen ("off" for none).
  std::string aggregator_listen = "127.0.0.1:0";
  std::string agent_http_listen = "127.0.0.1:0";
  // The contents of <dir>/aggregator.toml and <dir>/agent.toml.
  std::string aggregator_config;
  std::string agent_config;
  // Mutual TLS: the aggregator and the agents without --insecure, so that each must find its
  // material in its configuration's [tls] table (the simulated hosts stay plaintext, as a real
  // workload's loopback services are).
  bool tls = false;
  // Per host; hosts past its end take the defaults.
  std::vector<HostOptions> host;
  // More flags for every aggregator, simulated host or agent (see HostOptions' on repeats).
  std::vector<std::string> aggregator_flags, simhost_flags, agent_flags;

  // How Pod starts the processes. Each child's stdout and stderr go to <dir>/<file>.log, or,
  // with log_files false, to this process's (a test's output shows them).
  bool log_files = true;
  ProcessGroup group = ProcessGroup::kInherit;
  int death_signal = SIGKILL;
  absl::Duration ready_timeout = absl::Seconds(30);
  // Last word on each child's options (a benchmark pins processes to cores); `host` is -1 for
  // the aggregator.
  std::function<void(const std::string& name, int host, SubprocessOptions* options)> adjust;
  // Paces the waits for ready files and the stops; null = the system clock. Borrowed: must
  // outlive the Pod.
  Clock* clock = nullptr;
};

// The files of the pod's processes, in options.dir.
std::string AggregatorReadyFile(const PodOptions& options);
std::string SimhostReadyFile(const PodOptions& options, int host);
std::string AgentReadyFile(const PodOptions& options, int host);
std::string TruthFile(const PodOptions& options, int host);
// options.host[host] or the defaults; the name filled in.
HostOptions HostAt(const PodOptions& options, int host);

// Makes options.dir with what the processes read there: aggregator.toml, agent.toml, and the
// agents' empty sysfs (sys/) and temporary folder (tmp/). Pod::StartAggregator calls it first.
absl::Status WritePodFiles(const PodOptions& options);

// The aggregator's argv (args[0] is its binary): plaintext unless options.tls, a free HTTP
// port, the database <dir>/podprof.db.
std::vector<std::string> AggregatorArgs(const PodOptions& options);
// Host `host`'s simulated host: free ports, host `host` of options.hosts of one pod, its clock
// error from HostOptions since `epoch_ns` (the host's agent must get the same), its ground
// truth in TruthFile.
std::vector<std::string> SimhostArgs(const PodOptions& options, int host, int64_t epoch_ns);
// Host `host`'s agent: plaintext unless options.tls, loopback, no sysfs (<dir>/sys is empty),
// its workload the simulated host whose ready file said `simhost_ready` (profiler_port,
// metrics_port), registering with `aggregator` ("127.0.0.1:PORT"; empty: standalone).
std::vector<std::string> AgentArgs(const PodOptions& options, int host, int64_t epoch_ns,
                                   const nlohmann::json& simhost_ready,
                                   const std::string& aggregator);

// The environment a simulated host's ready file says its workload runs with ("NAME=value"
// each: its "environment" object), which the host's agent is started with, as an agent
// deployed beside a workload shares its environment.
std::vector<std::string> AgentEnvironment(const nlohmann::json& simhost_ready);

// The processes of one pod, started in order and stopped together.
//
// Thread-safety: StopAll, Exited and Pids may be called from any thread at any time (a thread
// that takes signals stops a pod still starting); the rest from one thread, the one whose exit
// is to stop the children (their death signal fires when it exits, see common/subprocess.h).
class Pod {
 public:
  explicit Pod(PodOptions options);
  // Stops every child, agents first (StopAll), unless released.
  ~Pod();
  Pod(const Pod&) = delete;
  Pod& operator=(const Pod&) = delete;

  // Writes the configurations, then starts the aggregator and each host. Errors name the
  // process and its log: it could not be started, exited during start-up, or wrote no ready
  // file within options.ready_timeout. What started stays running (StopAll stops it).
  absl::Status Start();
  // The parts of Start, for callers that add hosts later: the files and the aggregator;
  // host `host`'s simulated host and (with options.agents) its agent.
  absl::Status StartAggregator();
  absl::Status StartHost(int host);

  const PodOptions& options() const { return options_; }
  // "127.0.0.1:PORT"; empty before StartAggregator.
  const std::string& aggregator_address() const { return aggregator_address_; }
  // What each process wrote in its ready file (null for one not started).
  const nlohmann::json& aggregator_ready() const { return aggregator_ready_; }
  const nlohmann::json& simhost_ready(int host) const;
  const nlohmann::json& agent_ready(int host) const;
  // The pid of host `host`'s simulated host or agent, of the aggregator; -1 if not started.
  pid_t simhost_pid(int host);
  pid_t agent_pid(int host);
  pid_t aggregator_pid();

  // The name of a child that has exited ("podprof-agent 3"), or "".
  std::string Exited();
  std::vector<pid_t> Pids();
  // SIGTERM to every child, the last started first (agents before their aggregator), then up
  // to 10 s for all before SIGKILL. Reaps them.
  void StopAll();
  // Leaves every child running past the Pod (started with death_signal 0 and a session of
  // their own, they outlive this process too).
  void Release();

 private:
  // Starts `args` as `name`, then waits for `ready_file`; its JSON, or the error.
  absl::StatusOr<nlohmann::json> StartReady(const std::string& name, int host,
                                            const std::vector<std::string>& args,
                                            const std::string& file,
                                            std::vector<std::string> env = {});
  pid_t PidOf(const std::string& name);

  const PodOptions options_;
  RealClock real_clock_;
  Clock& clock_;
  std::string aggregator_address_;
  nlohmann::json aggregator_ready_;
  std::vector<nlohmann::json> simhost_ready_, agent_ready_;
  absl::Mutex mu_;
  // The children in the order started, with their names ("podprof-agent 3").
  std::vector<Subprocess> children_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace podprof::launch

#endif  // PODPROF_LAUNCH_POD_LAUNCHER_H_
