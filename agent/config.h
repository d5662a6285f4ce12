// The agent's configuration: one plain struct with documented defaults, loaded from TOML
// (deploy/agent.toml is the annotated example), overridden by flags, validated once.
#ifndef PODPROF_AGENT_CONFIG_H_
#define PODPROF_AGENT_CONFIG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace podprof::agent {

// Where the agent looks for its file when --config is not given.
inline constexpr char kDefaultConfigPath[] = "/etc/podprof/agent.toml";

struct AgentConfig {
  // podprof.v1.Agent listens here.
  std::string listen = "0.0.0.0:7101";
  // The aggregator to register with; empty runs the agent standalone.
  std::string aggregator;
  // The address the aggregator should dial; empty = this host's name with the listen port.
  std::string advertise;
  // What the agent does at start-up when the host of that address does not resolve on this
  // host (agent/advertise_check.h): "warn" (logs it and registers with it, so that `podprof
  // agents` shows it) or "refuse" (does not start: exit 2). Either way saying what to set.
  std::string advertise_check = "warn";
  // Answer the aggregator's clock probes on UDP, on the same port number as `listen` (see
  // common/clock_probe.h); off, the aggregator probes with the slower, biased Ping RPC.
  bool clock_probe = true;
  // The tensorflow.ProfilerService facade for XProf; empty disables it.
  std::string profiler_service_listen = "127.0.0.1:7102";
  // /metrics (Prometheus) over HTTP, loopback by default; HTTPS with the agent's certificates
  // unless insecure. Empty (or "off") turns it off.
  std::string http_listen = "127.0.0.1:7103";
  // Host name reported to the aggregator; empty = gethostname().
  std::string host_name;
  // The workload's profiler service(s); the first one answers captures.
  std::vector<std::string> workload_profiler = {"localhost:9999"};
  // libtpu's runtime metric services (one per process sharing the host, as
  // TPU_RUNTIME_METRICS_PORTS lists them).
  std::vector<std::string> workload_metrics = {"localhost:8431"};
  // How often runtime metrics are sampled during a capture.
  int64_t counter_interval_ns = 100'000'000;
  // [recorder]: the flight recorder keeps the workload in continuous profiling and the last
  // `window` of its trace, for snapshots (agent/recorder.h). Off by default: while armed, the
  // workload's profiler serves no one else (XProf's capture button, jax.profiler.trace).
  bool recorder_enabled = false;
  int64_t recorder_window_ns = 5'000'000'000;
  // 64 MiB: the agent then stays within its unit's MemoryMax=512M whatever the workload sends
  // (about 37 MiB + 5 x max_bytes at a freeze: docs/RELIABILITY.md).
  int64_t recorder_max_bytes = 64 << 20;
  // The recorder's guard (agent/recorder_guard.h): `guard_window` of step times without it, then
  // with it; past `max_slowdown` (a fraction) it turns itself off. 0 turns the guard off.
  double recorder_max_slowdown = 0.10;
  int64_t recorder_guard_window_ns = 30'000'000'000;
  // [telemetry]: every `interval` the agent reads the workload's runtime metrics (step times,
  // duty cycle, HBM, queued programs) and reports one summary per chip to the aggregator, which
  // keeps them and fires the flight recorder's triggers from them (agent/telemetry.h). Takes no
  // profiler session, so it runs whether or not a capture does.
  bool telemetry_enabled = true;
  int64_t telemetry_interval_ns = 1'000'000'000;
  // Analyse this host's captures here (kernel statistics, counter attribution, collective
  // arrivals: analysis/host_summary.h) and send the summary beside the timelines, when the
  // aggregator merges this agent's version of the analysis. Off, the aggregator analyses the
  // host, as it does for agents too old to: a host short of CPU may leave it the work.
  bool analyse = true;
  // Root of the sysfs tree chips are discovered in.
  std::string sysfs_root = "/sys";
  // Labels reported to the aggregator (pod, job, ...).
  std::map<std::string, std::string> labels;
  // The slice of a multi-slice job this host is in (0-based) and its worker id within the
  // slice; -1: not set here, so the workload's environment says (ApplySliceEnvironment).
  // Reported at registration; a change takes a restart.
  int32_t slice = -1;
  int32_t slice_worker = -1;
  // Longest capture accepted.
  int64_t max_capture_duration_ns = 300'000'000'000;
  // The least time a Profile call may take past its start before the workload counts as hung
  // (XProf's client waits max(60 s, 2 x duration)).
  int64_t workload_timeout_ns = 60'000'000'000;
  // Largest chunk the agent streams, bytes; bounds memory in flight per capture.
  int64_t max_inflight_bytes = 4 << 20;
  // Heartbeat period and the cap of the retry backoff while the aggregator is away.
  int64_t heartbeat_interval_ns = 10'000'000'000;
  int64_t heartbeat_max_backoff_ns = 30'000'000'000;
  // How long SIGTERM waits for a running capture to finish.
  int64_t drain_timeout_ns = 30'000'000'000;
  // Where private capture repositories are made; empty = $TMPDIR or /tmp.
  std::string temp_dir;
  // Mutual TLS for the agent's server and its connection to the aggregator. Empty files come
  // from systemd credentials (tls.crt, tls.key, ca.crt); plaintext only with `insecure`.
  std::string tls_cert, tls_key, tls_ca;
  bool insecure = false;
  // Identities (certificate CN or SAN) allowed to start captures on this host; empty allows
  // only certificates carrying urn:podprof:role:aggregator (security/tls.h).
  std::vector<std::string> allowed_aggregators;
  // Identities allowed to call the XProf facade when it listens beyond loopback (it then speaks
  // mutual TLS like the agent's port); empty allows every caller with a certificate from the CA.
  std::vector<std::string> allowed_profiler_clients;
  // [xprof] allowed_roots: directories (absolute) the XProf facade lets a caller's
  // repository_root lie under, besides `<temp_dir>/xprof` (agent/xprof_bounds.h). Empty: only
  // that one. Each should be writable only by users trusted with what the workload may write.
  std::vector<std::string> xprof_allowed_roots;
};

// Whether a listen address ("127.0.0.1:7102", "localhost:7102", "[::1]:7102") reaches only this
// host. The XProf facade stays plaintext there, for XProf clients on the host, which speak
// no TLS; anywhere else it is held to the agent's TLS rules.
bool IsLoopbackAddress(const std::string& address);

// Whether the XProf facade speaks mutual TLS: TLS is on and it listens beyond loopback.
bool FacadeUsesTls(const AgentConfig& config);

// The command-line flags that override configuration keys; empty (false) leaves the key alone.
struct AgentFlags {
  // The file, and whether --config named it: a named file must exist, the default may not.
  std::string config = kDefaultConfigPath;
  bool config_given = false;
  std::string listen, aggregator, advertise, advertise_check, profiler_service_listen, host_name,
      sysfs_root, temp_dir, http_listen;
  // A duration such as "250ms".
  std::string counter_interval;
  bool insecure = false;
  // "none" alone turns metric sampling off; --profiler-service-listen=none the facade.
  std::vector<std::string> workload_profiler, workload_metrics;
  // key=value each.
  std::vector<std::string> labels;
  // --slice, --slice-worker; -1 leaves the key alone.
  int32_t slice = -1, slice_worker = -1;
};

// Every key the file may hold, dotted ("recorder.window"); an entry ending in ".*" takes a
// table of any keys ("labels.*"). deploy/agent.toml sets each of them.
const std::vector<std::string>& AgentConfigKeys();

// Loads `path` over the defaults. Unknown keys, wrong types and bad values fail with a message
// naming the file and the key.
absl::StatusOr<AgentConfig> LoadAgentConfig(const std::string& path);

// The running configuration: the file (when given, or present at the default path) over the
// defaults, then the flags, then this process's environment for the slice keys left unset
// (ApplySliceEnvironment), validated. Errors name the file and key, or the flag. Called at
// start and again on SIGHUP.
absl::StatusOr<AgentConfig> BuildAgentConfig(const AgentFlags& flags);

// The environment variables a multi-slice workload's hosts carry (Cloud TPU, Megascale): the
// host's slice and its worker id within its slice.
inline constexpr char kSliceIdEnv[] = "MEGASCALE_SLICE_ID";
inline constexpr char kWorkerIdEnv[] = "TPU_WORKER_ID";

// Fills `slice` and `slice_worker` that the configuration leaves at -1 from the environment
// (`getenv` is std::getenv but in tests): the agent's file or flags win over it, as an operator
// who sets them means. A worker id counts only with a slice id (TPU_WORKER_ID alone is a
// single-slice job's). A value that is not a number 0..65535 fails, naming the variable.
absl::Status ApplySliceEnvironment(const std::function<const char*(const char*)>& getenv,
                                   AgentConfig* config);

// Checks values that do not depend on the file (addresses, ranges); names the key.
absl::Status ValidateAgentConfig(const AgentConfig& config);

// Applies the keys that may change while running (SIGHUP): labels, counter interval, limits,
// heartbeat timing, allow lists, [xprof] allowed_roots. Returns the names of the keys that changed.
std::vector<std::string> ApplyReloadable(const AgentConfig& from, AgentConfig* to);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_CONFIG_H_
