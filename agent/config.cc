#include "agent/config.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/status_macros.h"

namespace podprof::agent {
namespace {

absl::Status CheckAddress(const std::string& key, const std::string& value, bool may_be_empty) {
  if (value.empty()) {
    if (may_be_empty) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(key, " is empty; expected host:port"));
  }
  size_t colon = value.rfind(':');
  int port;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " \"", value, "\" is not host:port with a port in 0..65535"));
  }
  return absl::OkStatus();
}

// "none", in the file or a flag, turns metric sampling off (a workload without libtpu's
// service) and the XProf facade off.
void TurnOffWhatSaysNone(AgentConfig* c) {
  if (c->workload_metrics.size() == 1 && c->workload_metrics[0] == "none") {
    c->workload_metrics.clear();
  }
  if (c->profiler_service_listen == "none") c->profiler_service_listen.clear();
  if (c->http_listen == "off" || c->http_listen == "none") c->http_listen.clear();
}

// The largest slice or worker id accepted: more than any job has, small enough to print.
constexpr int32_t kMaxSlice = 65535;

}  // namespace

const std::vector<std::string>& AgentConfigKeys() {
  static const auto* const keys = new std::vector<std::string>{"listen",
                                                               "aggregator",
                                                               "advertise",
                                                               "advertise_check",
                                                               "clock_probe",
                                                               "profiler_service_listen",
                                                               "http.listen",
                                                               "host_name",
                                                               "workload.profiler",
                                                               "workload.metrics",
                                                               "workload.counter_interval",
                                                               "analysis.enabled",
                                                               "discovery.sysfs_root",
                                                               "labels.*",
                                                               "slice",
                                                               "slice_worker",
                                                               "limits.max_capture_duration",
                                                               "limits.max_inflight_bytes",
                                                               "limits.workload_timeout",
                                                               "heartbeat.interval",
                                                               "heartbeat.max_backoff",
                                                               "drain_timeout",
                                                               "temp_dir",
                                                               "tls.cert",
                                                               "tls.key",
                                                               "tls.ca",
                                                               "insecure",
                                                               "tls.allowed_aggregators",
                                                               "tls.allowed_profiler_clients",
                                                               "xprof.allowed_roots",
                                                               "recorder.enabled",
                                                               "recorder.window",
                                                               "recorder.max_bytes",
                                                               "recorder.max_slowdown",
                                                               "recorder.guard_window",
                                                               "telemetry.enabled",
                                                               "telemetry.interval"};
  return *keys;
}

absl::StatusOr<AgentConfig> LoadAgentConfig(const std::string& path) {
  AgentConfig c;
  ASSIGN_OR_RETURN(ConfigFile f, ConfigFile::Load(path));
  RETURN_IF_ERROR(f.CheckKnownKeys(AgentConfigKeys()));
  RETURN_IF_ERROR(f.GetString("listen", &c.listen));
  RETURN_IF_ERROR(f.GetString("aggregator", &c.aggregator));
  RETURN_IF_ERROR(f.GetString("advertise", &c.advertise));
  RETURN_IF_ERROR(f.GetString("advertise_check", &c.advertise_check));
  RETURN_IF_ERROR(f.GetBool("clock_probe", &c.clock_probe));
  RETURN_IF_ERROR(f.GetString("profiler_service_listen", &c.profiler_service_listen));
  RETURN_IF_ERROR(f.GetString("http.listen", &c.http_listen));
  RETURN_IF_ERROR(f.GetString("host_name", &c.host_name));
  RETURN_IF_ERROR(f.GetStringList("workload.profiler", &c.workload_profiler));
  RETURN_IF_ERROR(f.GetStringList("workload.metrics", &c.workload_metrics));
  RETURN_IF_ERROR(f.GetDurationNs("workload.counter_interval", &c.counter_interval_ns));
  RETURN_IF_ERROR(f.GetBool("analysis.enabled", &c.analyse));
  RETURN_IF_ERROR(f.GetString("discovery.sysfs_root", &c.sysfs_root));
  RETURN_IF_ERROR(f.GetStringMap("labels", &c.labels));
  RETURN_IF_ERROR(f.GetInt("slice", &c.slice));
  RETURN_IF_ERROR(f.GetInt("slice_worker", &c.slice_worker));
  RETURN_IF_ERROR(f.GetDurationNs("limits.max_capture_duration", &c.max_capture_duration_ns));
  RETURN_IF_ERROR(f.GetInt("limits.max_inflight_bytes", &c.max_inflight_bytes));
  RETURN_IF_ERROR(f.GetDurationNs("limits.workload_timeout", &c.workload_timeout_ns));
  RETURN_IF_ERROR(f.GetDurationNs("heartbeat.interval", &c.heartbeat_interval_ns));
  RETURN_IF_ERROR(f.GetDurationNs("heartbeat.max_backoff", &c.heartbeat_max_backoff_ns));
  RETURN_IF_ERROR(f.GetDurationNs("drain_timeout", &c.drain_timeout_ns));
  RETURN_IF_ERROR(f.GetString("temp_dir", &c.temp_dir));
  RETURN_IF_ERROR(f.GetString("tls.cert", &c.tls_cert));
  RETURN_IF_ERROR(f.GetString("tls.key", &c.tls_key));
  RETURN_IF_ERROR(f.GetString("tls.ca", &c.tls_ca));
  RETURN_IF_ERROR(f.GetBool("insecure", &c.insecure));
  RETURN_IF_ERROR(f.GetStringList("tls.allowed_aggregators", &c.allowed_aggregators));
  RETURN_IF_ERROR(f.GetStringList("tls.allowed_profiler_clients", &c.allowed_profiler_clients));
  RETURN_IF_ERROR(f.GetStringList("xprof.allowed_roots", &c.xprof_allowed_roots));
  RETURN_IF_ERROR(f.GetBool("recorder.enabled", &c.recorder_enabled));
  RETURN_IF_ERROR(f.GetDurationNs("recorder.window", &c.recorder_window_ns));
  RETURN_IF_ERROR(f.GetInt("recorder.max_bytes", &c.recorder_max_bytes));
  RETURN_IF_ERROR(f.GetDouble("recorder.max_slowdown", &c.recorder_max_slowdown));
  RETURN_IF_ERROR(f.GetDurationNs("recorder.guard_window", &c.recorder_guard_window_ns));
  RETURN_IF_ERROR(f.GetBool("telemetry.enabled", &c.telemetry_enabled));
  RETURN_IF_ERROR(f.GetDurationNs("telemetry.interval", &c.telemetry_interval_ns));
  TurnOffWhatSaysNone(&c);
  absl::Status s = ValidateAgentConfig(c);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  return c;
}

absl::StatusOr<AgentConfig> BuildAgentConfig(const AgentFlags& flags) {
  AgentConfig config;
  if (flags.config_given || std::filesystem::exists(flags.config)) {
    ASSIGN_OR_RETURN(config, LoadAgentConfig(flags.config));
  }
  auto set = [](const std::string& flag, std::string* key) {
    if (!flag.empty()) *key = flag;
  };
  set(flags.listen, &config.listen);
  set(flags.aggregator, &config.aggregator);
  set(flags.advertise, &config.advertise);
  set(flags.advertise_check, &config.advertise_check);
  set(flags.profiler_service_listen, &config.profiler_service_listen);
  set(flags.http_listen, &config.http_listen);
  set(flags.host_name, &config.host_name);
  set(flags.sysfs_root, &config.sysfs_root);
  set(flags.temp_dir, &config.temp_dir);
  if (flags.insecure) config.insecure = true;
  if (flags.slice >= 0) config.slice = flags.slice;
  if (flags.slice_worker >= 0) config.slice_worker = flags.slice_worker;
  if (!flags.workload_profiler.empty()) config.workload_profiler = flags.workload_profiler;
  if (!flags.workload_metrics.empty()) config.workload_metrics = flags.workload_metrics;
  TurnOffWhatSaysNone(&config);
  if (!flags.counter_interval.empty()) {
    absl::StatusOr<int64_t> ns = ParseDurationNs(flags.counter_interval);
    if (!ns.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--counter-interval: ", ns.status().message()));
    }
    config.counter_interval_ns = *ns;
  }
  for (const std::string& l : flags.labels) {
    std::vector<std::string> kv = absl::StrSplit(l, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--label \"", l, "\" is not key=value"));
    }
    config.labels[kv[0]] = kv[1];
  }
  RETURN_IF_ERROR(
      ApplySliceEnvironment([](const char* name) { return std::getenv(name); }, &config));
  RETURN_IF_ERROR(ValidateAgentConfig(config));
  return config;
}

absl::Status ApplySliceEnvironment(const std::function<const char*(const char*)>& getenv,
                                   AgentConfig* config) {
  auto read = [&](const char* name, int32_t* out) -> absl::Status {
    const char* text = getenv(name);
    if (*out >= 0 || text == nullptr || *text == '\0') return absl::OkStatus();
    if (!absl::SimpleAtoi(text, out) || *out < 0 || *out > kMaxSlice) {
      *out = -1;
      return absl::InvalidArgumentError(absl::StrCat("environment variable ", name, "=\"", text,
                                                     "\" is not a number 0..", kMaxSlice));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(read(kSliceIdEnv, &config->slice));
  if (config->slice < 0) return absl::OkStatus();
  return read(kWorkerIdEnv, &config->slice_worker);
}

absl::Status ValidateAgentConfig(const AgentConfig& c) {
  if (c.slice < -1 || c.slice > kMaxSlice || c.slice_worker < -1 || c.slice_worker > kMaxSlice) {
    return absl::InvalidArgumentError(absl::StrCat("slice and slice_worker must be 0..", kMaxSlice,
                                                   ", got ", c.slice, " and ", c.slice_worker));
  }
  RETURN_IF_ERROR(CheckAddress("listen", c.listen, false));
  RETURN_IF_ERROR(CheckAddress("aggregator", c.aggregator, true));
  RETURN_IF_ERROR(CheckAddress("advertise", c.advertise, true));
  if (c.advertise_check != "warn" && c.advertise_check != "refuse") {
    return absl::InvalidArgumentError(absl::StrCat(
        "advertise_check must be \"warn\" or \"refuse\", got \"", c.advertise_check, "\""));
  }
  RETURN_IF_ERROR(CheckAddress("profiler_service_listen", c.profiler_service_listen, true));
  if (c.workload_profiler.empty()) {
    return absl::InvalidArgumentError("workload.profiler lists no address");
  }
  if (c.recorder_window_ns < 100'000'000 || c.recorder_window_ns > 600'000'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("recorder.window must be 100ms to 10m, got ", c.recorder_window_ns, " ns"));
  }
  if (!(c.recorder_max_slowdown >= 0 && c.recorder_max_slowdown <= 10) ||
      c.recorder_guard_window_ns < 1'000'000'000) {
    return absl::InvalidArgumentError(
        "recorder.max_slowdown must be 0 (no guard) to 10, and recorder.guard_window at least 1s");
  }
  if (c.telemetry_interval_ns < 100'000'000 || c.telemetry_interval_ns > 60'000'000'000) {
    return absl::InvalidArgumentError(absl::StrCat("telemetry.interval must be 100ms to 1m, got ",
                                                   c.telemetry_interval_ns, " ns"));
  }
  if (c.recorder_max_bytes < (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "recorder.max_bytes must be at least 1048576 (1 MiB), got ", c.recorder_max_bytes));
  }
  for (const std::string& a : c.workload_profiler) {
    RETURN_IF_ERROR(CheckAddress("workload.profiler", a, false));
  }
  for (const std::string& a : c.workload_metrics) {
    RETURN_IF_ERROR(CheckAddress("workload.metrics", a, false));
  }
  if (c.counter_interval_ns < 1'000'000 || c.counter_interval_ns > 60'000'000'000) {
    return absl::InvalidArgumentError("workload.counter_interval must be between 1ms and 60s");
  }
  if (c.max_capture_duration_ns < 1'000'000 || c.max_capture_duration_ns > 3'600'000'000'000) {
    return absl::InvalidArgumentError("limits.max_capture_duration must be between 1ms and 1h");
  }
  if (c.max_inflight_bytes < (64 << 10) || c.max_inflight_bytes > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("limits.max_inflight_bytes must be between 64 KiB and 1 GiB");
  }
  if (c.heartbeat_interval_ns < 100'000'000 ||
      c.heartbeat_max_backoff_ns < c.heartbeat_interval_ns) {
    return absl::InvalidArgumentError(
        "heartbeat.interval must be at least 100ms and heartbeat.max_backoff at least the "
        "interval");
  }
  if (c.workload_timeout_ns < 100'000'000) {
    return absl::InvalidArgumentError("limits.workload_timeout must be at least 100ms");
  }
  if (c.drain_timeout_ns < 0) return absl::InvalidArgumentError("drain_timeout is negative");
  for (const std::string& r : c.xprof_allowed_roots) {
    if (r.empty() || r.front() != '/' || absl::StrContains(r, '\0')) {
      return absl::InvalidArgumentError(
          absl::StrCat("xprof.allowed_roots: \"", r, "\" is not an absolute path"));
    }
    if (std::filesystem::path(r).lexically_normal() == "/") {
      return absl::InvalidArgumentError(
          "xprof.allowed_roots: \"/\" would let XProf callers write anywhere; name a directory");
    }
  }
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    return absl::InvalidArgumentError("tls.cert and tls.key must be given together");
  }
  return absl::OkStatus();
}

std::vector<std::string> ApplyReloadable(const AgentConfig& from, AgentConfig* to) {
  std::vector<std::string> changed;
  auto apply = [&](const char* key, auto& dst, const auto& src) {
    if (dst != src) {
      dst = src;
      changed.push_back(key);
    }
  };
  apply("labels", to->labels, from.labels);
  apply("workload.counter_interval", to->counter_interval_ns, from.counter_interval_ns);
  apply("analysis.enabled", to->analyse, from.analyse);
  apply("limits.max_capture_duration", to->max_capture_duration_ns, from.max_capture_duration_ns);
  apply("limits.max_inflight_bytes", to->max_inflight_bytes, from.max_inflight_bytes);
  apply("limits.workload_timeout", to->workload_timeout_ns, from.workload_timeout_ns);
  apply("heartbeat.interval", to->heartbeat_interval_ns, from.heartbeat_interval_ns);
  apply("heartbeat.max_backoff", to->heartbeat_max_backoff_ns, from.heartbeat_max_backoff_ns);
  apply("tls.allowed_aggregators", to->allowed_aggregators, from.allowed_aggregators);
  apply("tls.allowed_profiler_clients", to->allowed_profiler_clients,
        from.allowed_profiler_clients);
  apply("xprof.allowed_roots", to->xprof_allowed_roots, from.xprof_allowed_roots);
  return changed;
}

bool IsLoopbackAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  std::string host = address.substr(0, colon == std::string::npos ? address.size() : colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

bool FacadeUsesTls(const AgentConfig& config) {
  return !config.insecure && !config.profiler_service_listen.empty() &&
         !IsLoopbackAddress(config.profiler_service_listen);
}

}  // namespace podprof::agent
