#include "launch/pod_launcher.h"

#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"

namespace podprof::launch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string In(const PodOptions& o, const std::string& file) {
  return (fs::path(o.dir) / file).string();
}
std::string Bin(const PodOptions& o, const char* binary) {
  return (fs::path(o.bin_dir) / binary).string();
}
std::string Ns(int64_t ns) { return absl::StrCat(ns, "ns"); }
std::string FileBase(const std::string& ready_file) {
  return ready_file.substr(0, ready_file.rfind('.'));
}
// A daemon's argv `args` (its binary first) plaintext, with --insecure after the binary, unless
// the pod runs TLS: then its configuration holds its material (without both it refuses to start).
std::vector<std::string> Secured(const PodOptions& o, std::vector<std::string> args) {
  if (!o.tls) args.insert(args.begin() + 1, "--insecure");
  return args;
}
// Where a host's prefix and extra flags go: before the binary, after the launcher's flags.
std::vector<std::string> Assemble(const std::vector<std::string>& prefix,
                                  std::vector<std::string> args,
                                  const std::vector<std::string>& pod_flags,
                                  const std::vector<std::string>& host_flags) {
  args.insert(args.begin(), prefix.begin(), prefix.end());
  args.insert(args.end(), pod_flags.begin(), pod_flags.end());
  args.insert(args.end(), host_flags.begin(), host_flags.end());
  return args;
}

}  // namespace

std::string AggregatorReadyFile(const PodOptions& options) {
  return In(options, "aggregator.json");
}
std::string SimhostReadyFile(const PodOptions& options, int host) {
  return In(options, absl::StrCat("simhost-", host, ".json"));
}
std::string AgentReadyFile(const PodOptions& options, int host) {
  return In(options, absl::StrCat("agent-", host, ".json"));
}
std::string TruthFile(const PodOptions& options, int host) {
  return In(options, absl::StrCat("truth-", host, ".json"));
}

HostOptions HostAt(const PodOptions& options, int host) {
  HostOptions h;
  if (host >= 0 && static_cast<size_t>(host) < options.host.size()) h = options.host[host];
  if (h.name.empty()) h.name = absl::StrCat("host-", host);
  return h;
}

absl::Status WritePodFiles(const PodOptions& options) {
  std::error_code ec;
  fs::create_directories(fs::path(options.dir) / "sys", ec);
  if (!ec) fs::create_directories(fs::path(options.dir) / "tmp", ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot use ", options.dir, ": ", ec.message()));
  for (const auto& [file, text] : {std::pair{"aggregator.toml", &options.aggregator_config},
                                   std::pair{"agent.toml", &options.agent_config}}) {
    std::ofstream out(In(options, file));
    out << *text;
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", In(options, file)));
  }
  return absl::OkStatus();
}

std::vector<std::string> AggregatorArgs(const PodOptions& options) {
  std::vector<std::string> args = Secured(
      options,
      {Bin(options, "podprof-aggregator"), "--config=" + In(options, "aggregator.toml"),
       "--listen=" + options.aggregator_listen, "--http-listen=127.0.0.1:0",
       "--db=" + In(options, "podprof.db"), "--ready-file=" + AggregatorReadyFile(options)});
  args.insert(args.end(), options.aggregator_flags.begin(), options.aggregator_flags.end());
  return args;
}

std::vector<std::string> SimhostArgs(const PodOptions& options, int host, int64_t epoch_ns) {
  const HostOptions h = HostAt(options, host);
  std::vector<std::string> args = {Bin(options, "podprof-simhost"),
                                   "--profiler-port=0",
                                   "--metrics-port=0",
                                   "--generation=" + options.generation,
                                   absl::StrCat("--hosts=", options.hosts),
                                   absl::StrCat("--host-index=", host),
                                   absl::StrCat("--pod-seed=", options.seed),
                                   options.counters ? "--counters" : "--no-counters",
                                   "--host-name=" + h.name,
                                   "--clock-offset=" + Ns(h.clock_offset_ns),
                                   absl::StrFormat("--clock-drift-ppm=%.6g", h.clock_drift_ppm),
                                   absl::StrCat("--clock-epoch-ns=", epoch_ns),
                                   "--device-clock-offset=" + Ns(h.device_clock_offset_ns),
                                   "--truth-file=" + TruthFile(options, host),
                                   "--ready-file=" + SimhostReadyFile(options, host)};
  if (options.chips > 0) args.push_back(absl::StrCat("--chips=", options.chips));
  if (h.slice >= 0) args.push_back(absl::StrCat("--slice=", h.slice));
  return Assemble(h.prefix, std::move(args), options.simhost_flags, h.simhost_flags);
}

std::vector<std::string> AgentArgs(const PodOptions& options, int host, int64_t epoch_ns,
                                   const json& simhost_ready, const std::string& aggregator) {
  const HostOptions h = HostAt(options, host);
  auto port = [&](const char* key) {
    return absl::StrCat("127.0.0.1:", simhost_ready.value(key, 0));
  };
  const std::string config =
      h.agent_config_file.empty() ? In(options, "agent.toml") : h.agent_config_file;
  std::vector<std::string> args = {
      Bin(options, "podprof-agent"), "--config=" + config, "--listen=" + h.agent_listen,
      "--advertise=" + h.agent_advertise,
      "--profiler-service-listen=" + h.agent_profiler_service_listen,
      // Each agent's /metrics on a free port: the default, 7103, fits one agent a machine.
      "--http-listen=" + options.agent_http_listen, "--host-name=" + h.name,
      "--sysfs-root=" + In(options, "sys"), "--temp-dir=" + In(options, "tmp"),
      "--workload-profiler=" +
          (h.workload_profiler.empty() ? port("profiler_port") : h.workload_profiler),
      "--workload-metrics=" +
          (h.workload_metrics.empty() ? port("metrics_port") : h.workload_metrics),
      "--clock-offset=" + Ns(h.clock_offset_ns),
      absl::StrFormat("--clock-drift-ppm=%.6g", h.clock_drift_ppm),
      absl::StrCat("--clock-epoch-ns=", epoch_ns), "--ready-file=" + AgentReadyFile(options, host)};
  // No aggregator: a standalone agent, asked for captures directly.
  const std::string registers_with = h.aggregator.empty() ? aggregator : h.aggregator;
  if (!registers_with.empty()) args.push_back("--aggregator=" + registers_with);
  return Assemble(h.prefix, Secured(options, std::move(args)), options.agent_flags, h.agent_flags);
}

std::vector<std::string> AgentEnvironment(const json& simhost_ready) {
  std::vector<std::string> env;
  const auto it = simhost_ready.find("environment");
  if (it == simhost_ready.end() || !it->is_object()) return env;
  for (const auto& item : it->items()) {
    if (item.value().is_string()) {
      env.push_back(absl::StrCat(item.key(), "=", item.value().get<std::string>()));
    }
  }
  return env;
}

Pod::Pod(PodOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : real_clock_),
      simhost_ready_(std::max(options_.hosts, 0)),
      agent_ready_(std::max(options_.hosts, 0)) {}

Pod::~Pod() {
  {
    absl::MutexLock lock(&mu_);
    if (released_) return;
  }
  StopAll();
}

absl::Status Pod::Start() {
  if (absl::Status s = StartAggregator(); !s.ok()) return s;
  for (int i = 0; i < options_.hosts; ++i) {
    if (absl::Status s = StartHost(i); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Pod::StartAggregator() {
  if (absl::Status s = WritePodFiles(options_); !s.ok()) return s;
  if (!options_.aggregator) return absl::OkStatus();
  absl::StatusOr<json> ready =
      StartReady("podprof-aggregator", -1, AggregatorArgs(options_), AggregatorReadyFile(options_));
  if (!ready.ok()) return ready.status();
  aggregator_ready_ = *std::move(ready);
  aggregator_address_ = absl::StrCat("127.0.0.1:", aggregator_ready_.value("port", 0));
  return absl::OkStatus();
}

absl::Status Pod::StartHost(int host) {
  if (host < 0 || host >= options_.hosts) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", host, " is not in a pod of ", options_.hosts));
  }
  // One epoch for the host's two processes: they read one drifting clock.
  const int64_t epoch = clock_.NowNs();
  absl::StatusOr<json> sim =
      StartReady(absl::StrCat("podprof-simhost ", host), host, SimhostArgs(options_, host, epoch),
                 SimhostReadyFile(options_, host));
  if (!sim.ok()) return sim.status();
  simhost_ready_[host] = *std::move(sim);
  if (!options_.agents) return absl::OkStatus();
  absl::StatusOr<json> agent =
      StartReady(absl::StrCat("podprof-agent ", host), host,
                 AgentArgs(options_, host, epoch, simhost_ready_[host], aggregator_address_),
                 AgentReadyFile(options_, host), AgentEnvironment(simhost_ready_[host]));
  if (!agent.ok()) return agent.status();
  agent_ready_[host] = *std::move(agent);
  return absl::OkStatus();
}

absl::StatusOr<json> Pod::StartReady(const std::string& name, int host,
                                     const std::vector<std::string>& args, const std::string& file,
                                     std::vector<std::string> env) {
  const std::string log = FileBase(file) + ".log";
  SubprocessOptions o;
  o.argv = args;
  o.env = std::move(env);
  if (options_.log_files) {
    o.stdout_path = log;
    o.stderr_path = log;
  }
  o.group = options_.group;
  o.death_signal = options_.death_signal;
  o.clock = &clock_;
  if (options_.adjust) options_.adjust(name, host, &o);
  const std::string see = options_.log_files ? "; see " + log : "";
  {
    // Under the lock, so that a StopAll meanwhile stops this child too.
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Subprocess> child = Subprocess::Start(o);
    if (!child.ok()) return child.status();
    children_.push_back(*std::move(child));
    names_.push_back(name);
  }
  const int64_t give_up = clock_.MonotonicNs() + absl::ToInt64Nanoseconds(options_.ready_timeout);
  while (true) {
    // A ready file is written whole, but may be read while it is being written: parse until
    // it is complete.
    if (absl::StatusOr<std::string> text = ReadFile(file); text.ok()) {
      json j = json::parse(*text, nullptr, false);
      if (!j.is_discarded()) return j;
    }
    const std::string gone = Exited();
    if (!gone.empty()) {
      return absl::InternalError(absl::StrCat(gone, " exited during start-up", see));
    }
    if (clock_.MonotonicNs() >= give_up) break;
    clock_.SleepUntilNs(clock_.NowNs() + 50'000'000, nullptr);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      name, " did not start in ", absl::ToInt64Seconds(options_.ready_timeout), " s", see));
}

const json& Pod::simhost_ready(int host) const { return simhost_ready_.at(host); }
const json& Pod::agent_ready(int host) const { return agent_ready_.at(host); }

pid_t Pod::PidOf(const std::string& name) {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < children_.size(); ++i) {
    if (names_[i] == name) return children_[i].pid();
  }
  return -1;
}
pid_t Pod::simhost_pid(int host) { return PidOf(absl::StrCat("podprof-simhost ", host)); }
pid_t Pod::agent_pid(int host) { return PidOf(absl::StrCat("podprof-agent ", host)); }
pid_t Pod::aggregator_pid() { return PidOf("podprof-aggregator"); }

std::string Pod::Exited() {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < children_.size(); ++i) {
    if (children_[i].TryWait().has_value()) return names_[i];
  }
  return "";
}

std::vector<pid_t> Pod::Pids() {
  absl::MutexLock lock(&mu_);
  std::vector<pid_t> out;
  for (const Subprocess& c : children_) out.push_back(c.pid());
  return out;
}

void Pod::StopAll() {
  absl::MutexLock lock(&mu_);
  Subprocess::TerminateAll(absl::MakeSpan(children_), absl::Seconds(10));
}

void Pod::Release() {
  absl::MutexLock lock(&mu_);
  for (Subprocess& c : children_) c.Release();
  released_ = true;
}

}  // namespace podprof::launch
