#include "agent/agent.h"

#include <grpcpp/grpcpp.h>
#include <sys/timex.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/agent_metrics.h"
#include "agent/capture_call.h"
#include "agent/workload_channel.h"
#include "analysis/host_summary.h"
#include "common/logging.h"
#include "common/process.h"
#include "podprof_version.h"
#include "proto/grpc_status.h"
#include "security/rpc_guard.h"
#include "trace/chip_catalog.h"

namespace podprof::agent {

int64_t NextBackoffNs(int64_t last_ns, int64_t max_ns) {
  return std::min(max_ns, last_ns <= 0 ? int64_t{1'000'000'000} : last_ns * 2);
}

podprof::v1::ClockSourceState ReadClockSource() {
  podprof::v1::ClockSourceState out;
  struct timex tx = {};
  int state = adjtimex(&tx);
  if (state < 0) {
    out.set_error_message("adjtimex failed");
    return out;
  }
  out.set_synchronized(state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0);
  out.set_estimated_error_ns(static_cast<int64_t>(tx.esterror) * 1000);  // us -> ns
  out.set_max_error_ns(static_cast<int64_t>(tx.maxerror) * 1000);
  return out;
}

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
  for (const std::string& a : config.workload_metrics) {
    // libtpu's metric service accepts local connections only.
    w.metrics_addresses.push_back(a);
    w.metrics_channels.push_back(
        NewWorkloadChannel(a, /*own_connections=*/false, kMaxMetricResponseBytes));
    w.metrics.push_back(
        tpu::monitoring::runtime::RuntimeMetricService::NewStub(w.metrics_channels.back()));
  }
  if (config.recorder_enabled) agent->StartRecorder(config);
  return agent;
}

podprof::v1::RecorderStatus Agent::RecorderStatus() const {
  podprof::v1::RecorderStatus out;
  const Recorder* r = workload_.recorder.get();
  out.set_state(r == nullptr ? "off" : RecorderStateName(r->state()));
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
      !workload_.metrics.empty()) {
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
  std::vector<trace::Chip> chips;
  for (auto& stub : workload_.metrics) {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(clock_.NowNs(), 300'000'000));
    tpu::monitoring::runtime::MetricRequest req;
    req.set_metric_name("tpu.runtime.hbm.memory.total.bytes");
    tpu::monitoring::runtime::MetricResponse resp;
    if (!stub->GetRuntimeMetric(&ctx, req, &resp).ok()) continue;
    for (const auto& m : resp.metric().metrics()) {
      trace::Chip chip;
      chip.ordinal = static_cast<int>(m.attribute().value().int_attr());
      chips.push_back(chip);
    }
  }
  LearnChips(chips);
}

podprof::v1::HostInfo Agent::HostInfo() {
  LearnChipsFromMetrics();
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

namespace rt = tpu::monitoring::runtime;

// The cheapest call of each workload service: proof that it answers.
grpc::Status Monitor(tensorflow::ProfilerService::StubInterface& stub, Clock& clock) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock.NowNs(), 500'000'000));
  tensorflow::MonitorRequest req;
  tensorflow::MonitorResponse resp;
  return stub.Monitor(&ctx, req, &resp);
}

grpc::Status ListMetrics(rt::RuntimeMetricService::StubInterface& stub, Clock& clock) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock.NowNs(), 500'000'000));
  rt::ListSupportedMetricsRequest req;
  rt::ListSupportedMetricsResponse resp;
  return stub.ListSupportedMetrics(&ctx, req, &resp);
}

// `call` on the agent's own stub; when that finds the service unreachable, once more on a fresh
// channel that connected within kCheckReconnectDeadlineNs: the agent's channel may still be in
// gRPC's backoff while the service is back (agent/workload_channel.h).
template <typename Service, typename Call>
grpc::Status CheckService(typename Service::StubInterface& stub, const std::string& address,
                          grpc::Channel* shared, Clock& clock, Call call,
                          int max_receive_bytes = std::numeric_limits<int32_t>::max()) {
  grpc::Status s = call(stub, clock);
  if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return s;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> fresh =
      ReconnectWorkload(address, shared, clock, kCheckReconnectDeadlineNs, max_receive_bytes);
  if (!fresh.ok()) return s;
  auto fresh_stub = Service::NewStub(*fresh);
  return call(*fresh_stub, clock);
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
  grpc::Status s = CheckService<tensorflow::ProfilerService>(
      *w.profiler, w.profiler_address, w.profiler_channel.get(), clock_, Monitor);
  out.push_back(
      Endpoint(podprof::v1::WORKLOAD_SERVICE_PROFILER, w.profiler_address, s, clock_.NowNs()));
  for (size_t i = 0; i < w.metrics.size(); ++i) {
    grpc::Channel* shared = i < w.metrics_channels.size() ? w.metrics_channels[i].get() : nullptr;
    s = CheckService<rt::RuntimeMetricService>(*w.metrics[i], w.metrics_addresses[i], shared,
                                               clock_, ListMetrics, kMaxMetricResponseBytes);
    out.push_back(Endpoint(podprof::v1::WORKLOAD_SERVICE_RUNTIME_METRICS, w.metrics_addresses[i], s,
                           clock_.NowNs()));
  }
  return out;
}

grpc::ServerWriteReactor<podprof::v1::CaptureChunk>* AgentService::Capture(
    grpc::CallbackServerContext* context, const podprof::v1::CaptureRequest* request) {
  return new CaptureCall(agent_, metrics_, &refusals_, context, request);
}

grpc::Status AgentService::Ping(grpc::ServerContext*, const podprof::v1::PingRequest* request,
                                podprof::v1::PingResponse* response) {
  return GuardRpc("Agent.Ping", [&]() -> grpc::Status {
    response->set_agent_receive_ns(agent_->clock().NowNs());
    response->set_client_send_ns(request->client_send_ns());
    // Read the clock as late as possible: the offset bound is half the round trip.
    response->set_agent_send_ns(agent_->clock().NowNs());
    return grpc::Status::OK;
  });
}

grpc::Status AgentService::Info(grpc::ServerContext*, const podprof::v1::InfoRequest*,
                                podprof::v1::InfoResponse* response) {
  return GuardRpc("Agent.Info", [&]() -> grpc::Status {
    *response->mutable_host() = agent_->HostInfo();
    for (auto& e : agent_->CheckWorkload()) *response->add_workload_endpoints() = e;
    response->set_active_capture_id(agent_->active_capture());
    response->set_agent_start_ns(agent_->start_ns());
    *response->mutable_clock_source() = ReadClockSource();
    *response->mutable_recorder() = agent_->RecorderStatus();
    return grpc::Status::OK;
  });
}

grpc::Status ProfilerProxy::Admit(const grpc::ServerContext& context) {
  if (!mutual_tls_) return grpc::Status::OK;
  // Profiler clients are workloads, which no certificate role names: with an empty list any
  // certificate of the CA may profile, as the facade's own loopback callers may.
  const security::RoleAcl clients{"", agent_->config().allowed_profiler_clients,
                                  "tls.allowed_profiler_clients", false};
  absl::Status a = clients.Check(context, "an XProf client");
  if (a.ok()) return grpc::Status::OK;
  refusals_->Note(context.peer(), a.message());
  return ToGrpc(a);
}

grpc::Status ProfilerProxy::Claim(const std::string& id) {
  absl::Status claim = agent_->BeginCapture(id);
  if (claim.ok()) return grpc::Status::OK;
  // As the workload's own server answers a second session.
  if (absl::IsFailedPrecondition(claim)) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, std::string(claim.message()));
  }
  return ToGrpc(claim);
}

grpc::Status ProfilerProxy::Profile(grpc::ServerContext* context,
                                    const tensorflow::ProfileRequest* request,
                                    tensorflow::ProfileResponse* response) {
  return GuardRpc("ProfilerService.Profile", [&]() -> grpc::Status {
    if (grpc::Status admitted = Admit(*context); !admitted.ok()) return admitted;
    const int64_t now = agent_->clock().NowNs();
    tensorflow::ProfileRequest bounded = *request;
    if (absl::Status b = BoundProfileRequest(agent_->XprofLimits(), now, &bounded); !b.ok()) {
      PODPROF_LOG(WARNING) << "XProf capture " << request->session_id() << " for "
                           << context->peer() << " refused: " << b.message();
      return ToGrpc(b);
    }
    // The facade shares the host with podprof's own captures: one session at a time.
    if (grpc::Status claimed = Claim(absl::StrCat("xprof:", bounded.session_id())); !claimed.ok()) {
      return claimed;
    }
    // A capture of the workload by someone other than the aggregator: worth a line.
    const uint64_t duration_ms = std::max(bounded.duration_ms(), bounded.opts().duration_ms());
    PODPROF_LOG(INFO) << "XProf capture " << bounded.session_id() << " for " << context->peer()
                      << ", " << duration_ms << " ms into " << bounded.repository_root();
    {
      absl::MutexLock lock(&mu_);
      session_ = bounded.session_id();
    }
    // As XProf's client waits: max(workload_timeout, 2 x duration) past the start, so a hung
    // workload does not hold the host past the bounds (duration_ms is at most an hour here).
    const RunnerLimits limits = agent_->Limits();
    const int64_t duration_ns = static_cast<int64_t>(duration_ms) * 1'000'000;
    const int64_t start = static_cast<int64_t>(bounded.opts().start_timestamp_ns());
    const int64_t wait_ns = std::max<int64_t>(limits.workload_timeout_ns, 2 * duration_ns) +
                            std::max<int64_t>(0, start - now);
    std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
    ctx->set_deadline(DeadlineAt(now, wait_ns));  // the caller's, when earlier, still applies
    grpc::Status s = agent_->workload().profiler->Profile(ctx.get(), bounded, response);
    {
      absl::MutexLock lock(&mu_);
      session_.reset();
    }
    agent_->EndCapture();
    return s;
  });
}

grpc::Status ProfilerProxy::Terminate(grpc::ServerContext* context,
                                      const tensorflow::TerminateRequest* request,
                                      tensorflow::TerminateResponse* response) {
  return GuardRpc("ProfilerService.Terminate", [&]() -> grpc::Status {
    if (grpc::Status admitted = Admit(*context); !admitted.ok()) return admitted;
    {
      // Only the facade's own session: podprof's captures are not a facade caller's to end.
      absl::MutexLock lock(&mu_);
      if (!session_.has_value() || *session_ != request->session_id()) {
        const std::string active = agent_->active_capture();
        return grpc::Status(
            grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("no XProf session \"", request->session_id(),
                         "\" is running through this agent",
                         active.empty()
                             ? ""
                             : absl::StrCat(" (the host is busy with capture \"", active, "\")")));
      }
    }
    std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
    ctx->set_deadline(DeadlineAt(agent_->clock().NowNs(), agent_->Limits().workload_timeout_ns));
    return agent_->workload().profiler->Terminate(ctx.get(), *request, response);
  });
}

grpc::Status ProfilerProxy::Monitor(grpc::ServerContext* context,
                                    const tensorflow::MonitorRequest* request,
                                    tensorflow::MonitorResponse* response) {
  return GuardRpc("ProfilerService.Monitor", [&]() -> grpc::Status {
    if (grpc::Status admitted = Admit(*context); !admitted.ok()) return admitted;
    if (absl::Status b =
            CheckXprofDuration(request->duration_ms(), agent_->XprofLimits(), "duration_ms");
        !b.ok()) {
      return ToGrpc(b);
    }
    // A Monitor window is a profiling session in the workload too: it waits its turn.
    if (grpc::Status claimed = Claim("xprof monitor"); !claimed.ok()) return claimed;
    const int64_t window_ns = static_cast<int64_t>(request->duration_ms()) * 1'000'000;
    std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
    ctx->set_deadline(
        DeadlineAt(agent_->clock().NowNs(), agent_->Limits().workload_timeout_ns + window_ns));
    grpc::Status s = agent_->workload().profiler->Monitor(ctx.get(), *request, response);
    agent_->EndCapture();
    return s;
  });
}

int64_t Registrar::Tick() {
  const AgentConfig config = agent_->config();
  if (retry_.exchange(false)) refused_ = false;
  if (refused_) return kRefusedWaitNs;
  // Whether this agent reaches its workload, for `podprof agents`: an agent the aggregator
  // reaches is no use if it cannot reach what it profiles. Checked before the call's deadline
  // starts: it takes up to 0.7 s a service while the workload is away, time the wait for the
  // next heartbeat gives back, so that the aggregator does not see the agent go stale.
  const int64_t check_start = agent_->clock().MonotonicNs();
  const std::vector<podprof::v1::WorkloadEndpoint> endpoints = agent_->CheckWorkload();
  const int64_t check_ns = agent_->clock().MonotonicNs() - check_start;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(agent_->clock().NowNs(), 2'000'000'000));
  grpc::Status s;
  // The aggregator may set the period; until it does, the configured one applies.
  int64_t interval =
      aggregator_interval_ns_ > 0 ? aggregator_interval_ns_ : config.heartbeat_interval_ns;
  if (!registered_) {
    podprof::v1::RegisterRequest req;
    *req.mutable_host() = agent_->HostInfo();
    req.set_agent_start_ns(agent_->start_ns());
    for (const auto& e : endpoints) *req.add_workload_endpoints() = e;
    for (const std::string& w : agent_->startup_warnings()) req.add_warnings(w);
    podprof::v1::RegisterResponse resp;
    s = stub_->Register(&ctx, req, &resp);
    if (s.ok()) {
      registered_ = true;
      registered_address_ = req.host().agent_address();
      PODPROF_LOG(INFO) << "registered with the aggregator at " << address_;
      if (resp.heartbeat_interval_ms() > 0) {
        interval = aggregator_interval_ns_ = resp.heartbeat_interval_ms() * 1'000'000LL;
      }
    }
  } else {
    podprof::v1::HeartbeatRequest req;
    req.set_host_name(config.host_name);
    req.set_active_capture_id(agent_->active_capture());
    *req.mutable_recorder() = agent_->RecorderStatus();
    req.set_agent_address(registered_address_);
    for (const auto& e : endpoints) *req.add_workload_endpoints() = e;
    podprof::v1::HeartbeatResponse resp;
    s = stub_->Heartbeat(&ctx, req, &resp);
    if (s.ok() && resp.reregister()) registered_ = false;
    if (s.ok() && resp.heartbeat_interval_ms() > 0) {
      interval = aggregator_interval_ns_ = resp.heartbeat_interval_ms() * 1'000'000LL;
    }
  }
  if (s.ok()) {
    backoff_ns_ = 0;
    return registered_ ? std::max<int64_t>(0, interval - check_ns) : 0;
  }
  registered_ = false;
  if (s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
    // The aggregator refuses this certificate or host name: asking again changes nothing until
    // a certificate or a configuration does, and those come with a reload.
    PODPROF_LOG(ERROR) << "the aggregator at " << address_
                       << " refused this agent: " << s.error_message()
                       << "; not asking again until this agent is reloaded (SIGHUP) or restarted";
    refused_ = true;
    backoff_ns_ = 0;
    return kRefusedWaitNs;
  }
  if (backoff_ns_ == 0) {
    const std::string why =
        config.insecure ? "" : security::ExplainTlsDialFailure(s.error_message());
    PODPROF_LOG(WARNING) << "aggregator at " << address_ << " unreachable: " << s.error_message()
                         << (why.empty() ? "" : absl::StrCat(" (", why, ")"))
                         << "; retrying with backoff";
  }
  registered_ = false;
  backoff_ns_ = NextBackoffNs(backoff_ns_, config.heartbeat_max_backoff_ns);
  return backoff_ns_;
}

}  // namespace podprof::agent
