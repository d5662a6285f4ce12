#include "agent/agent_main.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "agent/advertise_check.h"
#include "agent/agent.h"
#include "agent/agent_metrics.h"
#include "agent/agent_service.h"
#include "agent/capture_runner.h"
#include "agent/config.h"
#include "agent/profiler_proxy.h"
#include "agent/registrar.h"
#include "agent/telemetry.h"
#include "common/clock.h"
#include "common/clock_probe.h"
#include "common/daemon.h"
#include "common/daemon_flags.h"
#include "common/logging.h"
#include "common/sd_notify.h"
#include "common/skewed_clock.h"
#include "common/status_macros.h"
#include "http/server.h"
#include "metrics/grpc_metrics.h"
#include "metrics/registry.h"
#include "nlohmann/json.hpp"
#include "podprof_version.h"
#include "proto/grpc_status.h"
#include "security/tls.h"

namespace podprof::agent {
namespace {

constexpr int kExitConfig = 2;
constexpr int kExitListen = 1;

int Fail(const std::string& message) {
  std::cerr << "podprof-agent: " << message << "\n";
  return kExitConfig;
}

security::TlsConfig TlsOf(const AgentConfig& config) {
  return {config.insecure, config.tls_cert, config.tls_key, config.tls_ca};
}

// The flags that are not configuration keys.
struct ProcessFlags {
  std::string ready_file;
  std::string clock_offset = "0";
  double clock_drift_ppm = 0;
  int64_t clock_epoch_ns = 0;
};

void AddConfigFlags(CLI::App& app, AgentFlags* flags) {
  app.add_option("--listen", flags->listen, "podprof.v1.Agent address (default 0.0.0.0:7101)");
  app.add_option("--aggregator", flags->aggregator, "Aggregator to register with (host:port)");
  app.add_option("--advertise", flags->advertise, "Address the aggregator should dial");
  app.add_option("--advertise-check", flags->advertise_check,
                 "When the advertised address does not resolve here: warn (default) or refuse "
                 "to start");
  app.add_option("--workload-profiler", flags->workload_profiler,
                 "Workload profiler service (default localhost:9999)");
  app.add_option("--workload-metrics", flags->workload_metrics,
                 "Runtime metric service(s) (default localhost:8431; none to disable)");
  app.add_option(
      "--profiler-service-listen", flags->profiler_service_listen,
      "tensorflow.ProfilerService facade for XProf (default 127.0.0.1:7102, loopback; none "
      "to disable)");
  app.add_option("--http-listen", flags->http_listen,
                 "/metrics here (default 127.0.0.1:7103, loopback; off to disable)");
  app.add_option("--host-name", flags->host_name, "Host name to report");
  app.add_option("--sysfs-root", flags->sysfs_root, "sysfs root for chip discovery");
  app.add_option("--temp-dir", flags->temp_dir, "Where private capture repositories go");
  app.add_option("--counter-interval", flags->counter_interval, "Metric sampling interval");
  app.add_option("--label", flags->labels, "A label key=value (repeatable)");
  app.add_option("--slice", flags->slice,
                 "This host's slice of a multi-slice job (default: $MEGASCALE_SLICE_ID)");
  app.add_option("--slice-worker", flags->slice_worker,
                 "This host's worker id within its slice (default: $TPU_WORKER_ID)");
  app.add_flag("--insecure", flags->insecure,
               "Plaintext gRPC without certificates (as insecure = true)");
}

// The command line. An exit code when the process should stop (--help, a bad flag).
std::optional<int> ParseFlags(int argc, char** argv, AgentFlags* flags, ProcessFlags* process) {
  CLI::App app{
      "podprof-agent: captures kernel timelines and counters from this host's TPU "
      "workload on demand and streams them to the aggregator"};
  app.name("podprof-agent");
  app.set_version_flag("--version", std::string("podprof-agent ") + kVersion);
  CLI::Option* config_opt =
      app.add_option("--config", flags->config, "TOML configuration file")->capture_default_str();
  AddConfigFlags(app, flags);
  // For simulated pods: the agent shares its simulated host's wrong clock, as a real agent
  // shares its host's clock with the workload.
  app.add_option("--clock-offset", process->clock_offset,
                 "Simulate a host clock off by this much (testing), e.g. -37.5ms");
  app.add_option("--clock-drift-ppm", process->clock_drift_ppm,
                 "Simulate a host clock drifting this much (testing), ppm");
  app.add_option("--clock-epoch-ns", process->clock_epoch_ns,
                 "The true time the simulated drift counts from (testing; default: start-up): "
                 "its simulated host's, so that both read one clock");
  app.add_option("--ready-file", process->ready_file,
                 "Once listening, write the bound ports as JSON here (for tests and scripts)");
  return ParseDaemonFlags(app, argc, argv, config_opt, &flags->config_given, kExitConfig);
}

// The agent's servers and the ports they got.
struct Listeners {
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<grpc::Server> proxy_server;
  std::unique_ptr<ClockProbeResponder> probe_responder;
  std::unique_ptr<http::Server> http;
  int agent_port = 0;
  int proxy_port = 0;
};

// /metrics on [http] listen; none when off or when it cannot listen (logged: captures go on).
std::unique_ptr<http::Server> ServeMetrics(const AgentConfig& config, metrics::Registry& m,
                                           Clock& clock) {
  if (config.http_listen.empty()) return nullptr;
  http::ServerOptions o;
  o.listen = config.http_listen;
  o.tls = !config.insecure;
  if (o.tls) {
    absl::StatusOr<security::TlsMaterial> material = security::LoadTlsMaterial(TlsOf(config));
    if (!material.ok()) {
      PODPROF_LOG(ERROR) << "http: " << material.status().message();
      return nullptr;
    }
    o.material = *std::move(material);
  }
  auto router = std::make_shared<http::Router>();
  router->Add("GET", "/metrics", [&m](const http::Request&) {
    return http::Response::Text(200, m.Render(), "text/plain; version=0.0.4");
  });
  absl::StatusOr<std::unique_ptr<http::Server>> s = http::Server::Start(o, router, clock);
  if (!s.ok()) {
    PODPROF_LOG(ERROR) << "http: " << s.status().message() << "; no /metrics";
    return nullptr;
  }
  PODPROF_LOG(INFO) << "/metrics on " << (o.tls ? "https://" : "http://") << config.http_listen
                    << " (port " << (*s)->port() << ")";
  return *std::move(s);
}

// Clock probes on the same port number as the agent, over UDP. Without them the agent still
// works: the aggregator probes with Ping, less precisely, so a failure here is only a warning.
void StartClockProbes(const AgentConfig& config, Agent& agent, Clock& clock, Listeners* l) {
  if (!config.clock_probe) return;
  const std::string host = config.listen.substr(0, config.listen.rfind(':'));
  absl::StatusOr<std::unique_ptr<ClockProbeResponder>> r =
      ClockProbeResponder::Start(host, l->agent_port, clock);
  if (!r.ok()) {
    PODPROF_LOG(WARNING) << "no UDP clock probes, the aggregator will use Ping: "
                         << r.status().message();
    return;
  }
  l->probe_responder = std::move(*r);
  agent.SetClockProbePort(l->probe_responder->port());
}

// Starts the agent's server, its clock probes and the ProfilerService facade. Fails with the
// address that cannot be bound.
absl::StatusOr<Listeners> Listen(const AgentConfig& config, const security::Credentials& creds,
                                 Agent& agent, AgentService& service, ProfilerProxy& proxy,
                                 metrics::Registry& metrics, Clock& clock) {
  Listeners l;
  grpc::ServerBuilder builder;
  builder.experimental().SetInterceptorCreators(metrics::RpcMetricsInterceptors(metrics, clock));
  builder.AddListeningPort(config.listen, creds.server, &l.agent_port);
  builder.RegisterService(&service);
  l.server = builder.BuildAndStart();
  if (l.server == nullptr || l.agent_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", config.listen));
  }
  agent.SetBoundPort(l.agent_port);
  StartClockProbes(config, agent, clock, &l);
  if (!config.profiler_service_listen.empty()) {
    grpc::ServerBuilder pb;
    // Beyond loopback the facade is held to the agent's TLS rules (ProfilerProxy checks roles).
    pb.AddListeningPort(config.profiler_service_listen,
                        FacadeUsesTls(config) ? creds.server : grpc::InsecureServerCredentials(),
                        &l.proxy_port);
    pb.RegisterService(&proxy);
    l.proxy_server = pb.BuildAndStart();
    if (l.proxy_server == nullptr || l.proxy_port == 0) {
      l.server->Shutdown();
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", config.profiler_service_listen));
    }
  }
  l.http = ServeMetrics(config, metrics, clock);
  return l;
}

// The bound ports as JSON, written whole (rename) so a reader never sees half of it.
void WriteReadyFile(const std::string& path, const Listeners& l) {
  nlohmann::json j = {{"agent_port", l.agent_port},
                      {"profiler_service_port", l.proxy_port},
                      {"clock_probe_port", l.probe_responder ? l.probe_responder->port() : 0},
                      {"http_port", l.http ? l.http->port() : 0},
                      {"pid", static_cast<int64_t>(getpid())}};
  std::string tmp = path + ".tmp";
  std::ofstream(tmp) << j.dump() << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

// The health check behind WATCHDOG=1: the agent's own server answers a Ping. In-process
// (`self`), so the check does not depend on the address or the certificate's names.
absl::Status Healthy(podprof::v1::Agent::Stub& self, Clock& clock) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock.NowNs(), 1'000'000'000));
  podprof::v1::PingRequest req;
  req.set_client_send_ns(clock.NowNs());
  podprof::v1::PingResponse resp;
  absl::Status pinged = FromGrpc(self.Ping(&ctx, req, &resp));
  if (pinged.ok()) return pinged;
  return absl::Status(pinged.code(),
                      absl::StrCat("the agent's own server does not answer: ", pinged.message()));
}

// The lifecycle's view of the running agent: heartbeats as its tick, SIGHUP rereads the flags'
// configuration, SIGTERM drains running captures and then the servers.
DaemonHooks AgentHooks(const AgentFlags& flags, Agent& agent, Listeners& l, Registrar* registrar,
                       const security::Credentials& creds, Clock& clock, std::string status) {
  DaemonHooks hooks;
  hooks.status_line = [status = std::move(status)] { return status; };
  hooks.health = [&clock,
                  self = std::shared_ptr<podprof::v1::Agent::Stub>(podprof::v1::Agent::NewStub(
                      l.server->InProcessChannel(grpc::ChannelArguments())))] {
    return Healthy(*self, clock);
  };
  hooks.reload = [&flags, &agent, &creds, &clock, registrar]() -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(AgentConfig fresh, BuildAgentConfig(flags));
    // First, as it can still fail: a refused reload changes nothing.
    ASSIGN_OR_RETURN(std::string rotated,
                     security::RotateCredentials(creds, TlsOf(fresh), clock.NowNs()));
    std::vector<std::string> changed = agent.Reload(fresh);
    if (!rotated.empty()) changed.push_back(absl::StrCat("TLS material (now ", rotated, ")"));
    // A refusal may have been fixed by this reload or by the aggregator's: ask again.
    if (registrar != nullptr) registrar->Retry();
    return ChangedSummary(changed);
  };
  if (registrar != nullptr) hooks.tick = [registrar] { return registrar->Tick(); };
  hooks.drain_timeout_ns = agent.config().drain_timeout_ns;
  // Running captures finish (or hit the drain deadline); new ones are refused from here on.
  hooks.drain = [&agent, &l](int64_t deadline_ns) {
    agent.StartDraining();
    if (l.proxy_server) l.proxy_server->Shutdown(DeadlineAt(deadline_ns, 0));
    l.server->Shutdown(DeadlineAt(deadline_ns, 0));
  };
  return hooks;
}

// [telemetry] enabled: a reporter sampling the workload's metric services, on the registrar's
// channel to the aggregator; null when off or the workload serves no metrics.
std::unique_ptr<TelemetryReporter> StartTelemetry(const AgentConfig& config, Agent& agent,
                                                  const std::shared_ptr<grpc::Channel>& channel,
                                                  Clock& clock) {
  const RuntimeMetrics* metrics = agent.workload().metrics.get();
  if (!config.telemetry_enabled || metrics == nullptr) return nullptr;
  TelemetryReporterOptions options;
  options.interval_ns = config.telemetry_interval_ns;
  if (RecorderGuard* guard = agent.recorder_guard()) {
    options.on_sample = [guard](const podprof::v1::TelemetrySample& s) { guard->Observe(s); };
  }
  PODPROF_LOG(INFO) << "telemetry every " << config.telemetry_interval_ns / 1'000'000 << " ms from "
                    << metrics->size() << " runtime metric service(s)";
  // A host that knows its slice is in a multi-slice job, whose DCN latencies it reads.
  return std::make_unique<TelemetryReporter>(TelemetrySampler(*metrics, clock, config.slice >= 0),
                                             podprof::v1::Aggregator::NewStub(channel),
                                             agent.config().host_name, clock, options);
}

// The advertised host resolved before registering (agent/advertise_check.h): the refusal, or
// OK once a warning is logged and given to the agent for its registrations.
absl::Status CheckAdvertise(Agent& agent) {
  SystemResolver resolver;
  std::string warning;
  RETURN_IF_ERROR(CheckAdvertisedAddress(agent.config(), resolver, &warning));
  if (!warning.empty()) {
    PODPROF_LOG(WARNING) << warning;
    agent.AddStartupWarning(std::move(warning));
  }
  return absl::OkStatus();
}

}  // namespace

int AgentMain(int argc, char** argv) {
  AgentFlags flags;
  ProcessFlags process;
  if (std::optional<int> exit = ParseFlags(argc, argv, &flags, &process)) return *exit;
  absl::StatusOr<AgentConfig> config = BuildAgentConfig(flags);
  if (!config.ok()) return Fail(std::string(config.status().message()));
  absl::StatusOr<int64_t> clock_offset = ParseDurationNs(process.clock_offset);
  if (!clock_offset.ok()) {
    return Fail(absl::StrCat("--clock-offset: ", clock_offset.status().message()));
  }
  RealClock real_clock;
  SkewedClock clock(real_clock, *clock_offset, process.clock_drift_ppm, process.clock_epoch_ns);
  ServiceNotifier notifier;
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(*config, clock);
  if (!agent.ok()) return Fail(std::string(agent.status().message()));
  if (absl::Status s = CheckAdvertise(**agent); !s.ok()) return Fail(std::string(s.message()));

  // A predecessor killed mid-capture leaves its repository behind; nothing of ours runs yet.
  if (int stale = RemoveStaleCaptureDirs((*agent)->Limits().temp_dir); stale > 0) {
    PODPROF_LOG(INFO) << "removed " << stale << " capture directories left by a stopped agent";
  }
  AgentService service(agent->get());
  security::RouteGrpcLogs(&service.refusals());
  ProfilerProxy proxy(agent->get(), FacadeUsesTls(*config), &service.refusals());
  absl::StatusOr<security::Credentials> creds =
      security::DaemonCredentials(TlsOf(*config), clock.NowNs());
  if (!creds.ok()) return Fail(std::string(creds.status().message()));
  // The rules as capture_call.cc and ProfilerProxy apply them, for the start-up lines.
  std::vector<security::RoleAcl> roles = {{security::kAggregatorRole, config->allowed_aggregators,
                                           "tls.allowed_aggregators", config->insecure}};
  if (FacadeUsesTls(*config)) {
    roles.push_back({"", config->allowed_profiler_clients, "tls.allowed_profiler_clients", false});
  }
  PODPROF_LOG(INFO) << security::DescribeTls(*creds, roles);
  if (std::string rule = security::DescribeDefaultRoles(*creds, roles); !rule.empty()) {
    PODPROF_LOG(INFO) << rule;
  }
  if (creds->expires_soon) {
    PODPROF_LOG(WARNING) << "the certificate expires within a week: " << creds->description;
  }
  if (config->insecure) {
    PODPROF_LOG(WARNING) << "insecure = true: plaintext gRPC without certificates; anyone who "
                            "reaches "
                         << config->listen << " may start captures on this host";
  }
  metrics::Registry metrics;
  AddAgentMetrics(metrics, **agent);
  service.SetMetrics(&metrics);
  absl::StatusOr<Listeners> listeners =
      Listen(*config, *creds, **agent, service, proxy, metrics, clock);
  if (!listeners.ok()) {
    std::cerr << "podprof-agent: " << listeners.status().message() << "\n";
    return kExitListen;
  }
  if (!process.ready_file.empty()) WriteReadyFile(process.ready_file, *listeners);
  std::unique_ptr<Registrar> registrar;
  std::unique_ptr<TelemetryReporter> telemetry;
  if (!config->aggregator.empty()) {
    auto channel = grpc::CreateChannel(config->aggregator, creds->channel);
    registrar = std::make_unique<Registrar>(agent->get(), podprof::v1::Aggregator::NewStub(channel),
                                            config->aggregator);
    telemetry = StartTelemetry(*config, **agent, channel, clock);
  }
  std::string status =
      absl::StrCat("listening on port ", listeners->agent_port, "; workload ",
                   (*agent)->workload().profiler_address, "; ",
                   config->aggregator.empty() ? "standalone" : "aggregator " + config->aggregator);
  DaemonLifecycle(
      AgentHooks(flags, **agent, *listeners, registrar.get(), *creds, clock, std::move(status)),
      clock, notifier)
      .Run();
  return 0;
}

}  // namespace podprof::agent
