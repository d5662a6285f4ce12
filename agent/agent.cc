#include "agent/agent.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/workload_channel.h"
#include "analysis/host_summary.h"
#include "common/logging.h"
#include "common/process.h"
#include "podprof_version.h"
#include "proto/grpc_status.h"
#include "proto/recorder_states.h"
#include "trace/chip_catalog.h"

namespace podprof::agent {

Agent::Agent(AgentConfig config, std::vector<DiscoveredChip> discovered, Clock& clock)
    : clock_(clock),
      start_ns_(clock.NowNs()),
      config_(std::move(config)),
      discovered_(std::move(discovered)) {}

absl::StatusOr<std::unique_ptr<Agent>> Agent::Create(const AgentConfig& config, Clock& clock) {
  // The host name and chips are settled before the agent exists, so that every later read of
  // them is under mu_.
  AgentConfig settled = config;
  if (settled.host_name.empty()) settled.host_name = LocalHostName();
  absl::StatusOr<std::vector<DiscoveredChip>> chips = DiscoverChips(config.sysfs_root);
  if (!chips.ok()) return chips.status();
  std::unique_ptr<Agent> agent(new Agent(std::move(settled), *std::move(chips), clock));
  Workload& w = agent->workload_;
  w.profiler_address = config.workload_profiler.front();
  w.profiler_channel = NewWorkloadChannel(w.profiler_address, /*own_connections=*/false);
  w.capture_channel =
      NewWorkloadChannel(w.profiler_address, /*own_connections=*/false, kMaxCaptureResponseBytes);
  w.capture_profiler = tensorflow::ProfilerService::NewStub(w.capture_channel);
  w.profiler = tensorflow::ProfilerService::NewStub(w.profiler_channel);
  if (!config.workload_metrics.empty())
    w.metrics = RuntimeMetrics::Dial(config.workload_metrics, clock);
  if (config.recorder_enabled) agent->StartRecorder(config);
  return agent;
}

podprof::v1::RecorderStatus Agent::RecorderStatus() const {
  podprof::v1::RecorderStatus out;
  const Recorder* r = workload_.recorder.get();
  podprof::v1::SetRecorderState(
      RecorderStateToProto(r == nullptr ? RecorderState::kOff : r->state()), &out);
  if (r == nullptr) {
    out.set_reason("[recorder] enabled is false");
    return out;
  }
  out.set_reason(r->reason());
  out.set_bytes(r->bytes());
  out.set_segments(static_cast<uint32_t>(r->segments()));
  out.set_window_ns(r->window_ns());
  return out;
}

void Agent::StartRecorder(const AgentConfig& config) {
  RecorderOptions o;
  o.window_ns = config.recorder_window_ns;
  o.max_bytes = static_cast<uint64_t>(config.recorder_max_bytes);
  // Every tracer, as a capture asks (capture_runner.cc), and the programs' HLO; the session
  // runs until stopped, so no duration or start.
  tensorflow::ProfileRequest r;
  r.set_host_name("podprof-agent");
  r.set_emit_xspace(true);
  auto* opts = r.mutable_opts();
  opts->set_version(1);
  opts->set_host_tracer_level(2);
  opts->set_device_tracer_level(1);
  opts->set_device_type(tensorflow::ProfileOptions::UNSPECIFIED);
  opts->set_enable_hlo_proto(true);
  // A TPU's tracer keeps a ring of its own when asked (it bounds the device's trace between
  // snapshots); other tracers ignore the key.
  (*opts->mutable_advanced_configuration())["tpu_circular_buffer_tracing"].set_bool_value(true);
  // Snapshots come on a channel of their own that refuses one past max_bytes (and a little for
  // the response around it) before it is parsed: the recorder lets such a one go, and a
  // workload's snapshot of any size costs the agent at most about max_bytes.
  // They arrive as bytes, never parsed into objects (Recorder).
  tensorflow::ProfilerService::StubInterface* profiler = workload_.profiler.get();
  std::shared_ptr<grpc::Channel> snapshots;
  if (workload_.profiler_channel != nullptr) {
    const uint64_t limit = std::min<uint64_t>(o.max_bytes + (64 << 10), INT32_MAX);
    snapshots = NewWorkloadChannel(workload_.profiler_address, /*own_connections=*/false,
                                   static_cast<int>(limit));
    workload_.recorder_profiler = tensorflow::ProfilerService::NewStub(snapshots);
    profiler = workload_.recorder_profiler.get();
  }
  workload_.recorder = std::make_unique<Recorder>(profiler, clock_, o, r, std::move(snapshots));
  RecorderDriver::MayArm may_arm;
  // Guarded where the telemetry gives step times (agent_main.cc starts it on the same terms).
  if (config.recorder_max_slowdown > 0 && config.telemetry_enabled && !config.aggregator.empty() &&
      workload_.metrics != nullptr) {
    recorder_guard_ = std::make_unique<RecorderGuard>(
        workload_.recorder.get(), clock_,
        RecorderGuardOptions{config.recorder_guard_window_ns, config.recorder_max_slowdown});
    may_arm = [guard = recorder_guard_.get()](std::string* why) { return guard->MayArm(why); };
  }
  recorder_driver_ = std::make_unique<RecorderDriver>(workload_.recorder.get(), clock_, 100'000'000,
                                                      10'000'000'000, std::move(may_arm));
}

absl::Status Agent::BeginCapture(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (draining_) return absl::UnavailableError("the agent is shutting down");
  if (!active_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the host is busy with capture \"", active_,
                     "\"; try again when it ends (one capture at a time)"));
  }
  active_ = id;
  return absl::OkStatus();
}

void Agent::EndCapture() {
  absl::MutexLock lock(&mu_);
  active_.clear();
}

void Agent::SetBoundPort(int port) {
  absl::MutexLock lock(&mu_);
  bound_port_ = port;
}

void Agent::SetClockProbePort(int port) {
  absl::MutexLock lock(&mu_);
  clock_probe_port_ = port;
}

void Agent::AddStartupWarning(std::string warning) {
  absl::MutexLock lock(&mu_);
  startup_warnings_.push_back(std::move(warning));
}

std::vector<std::string> Agent::startup_warnings() {
  absl::MutexLock lock(&mu_);
  return startup_warnings_;
}

void Agent::StartDraining() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
}

std::string Agent::active_capture() {
  absl::MutexLock lock(&mu_);
  return active_;
}

AgentConfig Agent::config() {
  absl::MutexLock lock(&mu_);
  return config_;
}

RunnerLimits Agent::Limits() {
  absl::MutexLock lock(&mu_);
  RunnerLimits l;
  l.counter_interval_ns = config_.counter_interval_ns;
  l.analyse = config_.analyse;
  l.max_capture_duration_ns = config_.max_capture_duration_ns;
  l.max_chunk_bytes = static_cast<size_t>(config_.max_inflight_bytes);
  l.workload_timeout_ns = config_.workload_timeout_ns;
  l.temp_dir = !config_.temp_dir.empty()          ? config_.temp_dir
               : std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR")
                                                  : "/tmp";
  return l;
}

XprofBounds Agent::XprofLimits() {
  XprofBounds b;
  b.spool_dir = Limits().temp_dir;
  absl::MutexLock lock(&mu_);
  b.max_duration_ns = config_.max_capture_duration_ns;
  b.allowed_roots = config_.xprof_allowed_roots;
  return b;
}

std::vector<std::string> Agent::Reload(const AgentConfig& fresh) {
  absl::MutexLock lock(&mu_);
  return ApplyReloadable(fresh, &config_);
}

void Agent::LearnChips(const std::vector<trace::Chip>& chips) {
  absl::MutexLock lock(&mu_);
  // A capture describes chips fully; a metric reply only names them: never downgrade.
  if (discovered_.empty() && !chips.empty() &&
      (learned_.empty() || !chips.front().device_type.empty())) {
    learned_ = chips;
  }
}

void Agent::LearnChipsFromMetrics() {
  {
    absl::MutexLock lock(&mu_);
    if (!discovered_.empty() || !learned_.empty()) return;
  }
  // Before any capture, libtpu's metric service tells which devices the workload holds.
  if (workload_.metrics == nullptr) return;
  std::vector<trace::Chip> chips;
  for (const int ordinal : workload_.metrics->Chips()) {
    trace::Chip chip;
    chip.ordinal = ordinal;
    chips.push_back(chip);
  }
  LearnChips(chips);
}

podprof::v1::HostInfo Agent::HostInfo() {
  absl::MutexLock lock(&mu_);
  podprof::v1::HostInfo h;
  h.set_host_name(config_.host_name);
  // The address the aggregator dials: `advertise`, else this host's name; port 0 (or none)
  // means the port actually bound.
  std::string advertise =
      config_.advertise.empty()
          ? absl::StrCat(config_.host_name, config_.listen.substr(config_.listen.rfind(':')))
          : config_.advertise;
  if (bound_port_ > 0 && absl::EndsWith(advertise, ":0")) {
    advertise = absl::StrCat(advertise.substr(0, advertise.size() - 1), bound_port_);
  }
  h.set_agent_address(advertise);
  // An advertised port of its own means the aggregator reaches this agent through a forward
  // (NAT, a proxy): the UDP probes take the same port number there, forwarded likewise.
  int probe_port = clock_probe_port_;
  int advertised_port = 0;
  if (probe_port > 0 && !config_.advertise.empty() &&
      absl::SimpleAtoi(advertise.substr(advertise.rfind(':') + 1), &advertised_port) &&
      advertised_port > 0) {
    probe_port = advertised_port;
  }
  h.set_clock_probe_port(static_cast<uint32_t>(probe_port));
  for (const auto& [k, v] : config_.labels) (*h.mutable_labels())[k] = v;
  if (config_.slice >= 0) h.set_slice(config_.slice);
  if (config_.slice_worker >= 0) h.set_slice_worker(config_.slice_worker);
  h.set_agent_version(absl::StrCat("podprof-agent ", kVersion));
  if (config_.analyse) h.set_analysis_version(analysis::kAnalysisVersion);
  for (size_t i = 0; i < discovered_.size(); ++i) {
    auto* c = h.add_chips();
    c->set_ordinal(static_cast<int32_t>(i));
    c->set_global_chip_id(-1);
    c->set_generation(discovered_[i].generation);
    c->set_pci_address(discovered_[i].pci_address);
    if (const trace::ChipGeneration* g = trace::FindGenerationByName(discovered_[i].generation)) {
      c->set_device_type_string(g->device_type);
      c->set_peak_tflops(g->peak_tflops);
      c->set_peak_hbm_gbps(g->peak_hbm_gbps);
      c->set_hbm_bytes(static_cast<uint64_t>(g->hbm_bytes));
    }
  }
  if (discovered_.empty()) {
    for (const trace::Chip& chip : learned_) {
      auto* c = h.add_chips();
      c->set_ordinal(chip.ordinal);
      c->set_global_chip_id(static_cast<int32_t>(chip.global_id));
      c->set_generation(chip.generation);
      c->set_device_type_string(chip.device_type);
      c->set_peak_tflops(chip.peak_tflops);
      c->set_peak_hbm_gbps(chip.peak_hbm_gbps);
      if (const trace::ChipGeneration* g = trace::FindGenerationByName(chip.generation)) {
        c->set_hbm_bytes(static_cast<uint64_t>(g->hbm_bytes));
      }
    }
  }
  return h;
}

namespace {

// Whether the workload's profiler answers: Monitor, its cheapest call, on the agent's own
// stub; when that finds it unreachable, once more on a fresh channel that connected within
// kCheckReconnectDeadlineNs: the agent's channel may still be in gRPC's backoff while the
// profiler is back (agent/workload_channel.h). The metric services' check is
// RuntimeMetrics::Check.
grpc::Status CheckProfiler(const Workload& w, Clock& clock) {
  const auto monitor = [&clock](tensorflow::ProfilerService::StubInterface& stub) {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(clock.NowNs(), 500'000'000));
    tensorflow::MonitorRequest req;
    tensorflow::MonitorResponse resp;
    return stub.Monitor(&ctx, req, &resp);
  };
  const grpc::Status s = monitor(*w.profiler);
  if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return s;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> fresh =
      ReconnectWorkload(w.profiler_address, w.profiler_channel.get(), clock,
                        kCheckReconnectDeadlineNs, std::numeric_limits<int32_t>::max());
  if (!fresh.ok()) return s;
  return monitor(*tensorflow::ProfilerService::NewStub(*fresh));
}

podprof::v1::WorkloadEndpoint Endpoint(podprof::v1::WorkloadService kind,
                                       const std::string& address, const grpc::Status& s,
                                       int64_t now_ns) {
  podprof::v1::WorkloadEndpoint e;
  e.set_service(kind);
  e.set_address(address);
  // UNIMPLEMENTED still proves a server answers there.
  e.set_reachable(s.ok() || s.error_code() == grpc::StatusCode::UNIMPLEMENTED);
  if (!e.reachable()) e.set_error_message(s.error_message());
  e.set_checked_ns(now_ns);
  return e;
}

}  // namespace

std::vector<podprof::v1::WorkloadEndpoint> Agent::CheckWorkload() {
  std::vector<podprof::v1::WorkloadEndpoint> out;
  const Workload& w = workload_;
  out.push_back(Endpoint(podprof::v1::WORKLOAD_SERVICE_PROFILER, w.profiler_address,
                         CheckProfiler(w, clock_), clock_.NowNs()));
  for (size_t i = 0; w.metrics != nullptr && i < w.metrics->size(); ++i) {
    out.push_back(Endpoint(podprof::v1::WORKLOAD_SERVICE_RUNTIME_METRICS, w.metrics->address(i),
                           w.metrics->Check(i), clock_.NowNs()));
  }
  return out;
}

}  // namespace podprof::agent
