#include "aggregator/aggregator_main.h"

#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "aggregator/api/http_api.h"
#include "aggregator/api/observability.h"
#include "aggregator/api/queries.h"
#include "aggregator/api/service.h"
#include "aggregator/capture/orchestrator.h"
#include "aggregator/capture/registry.h"
#include "aggregator/config.h"
#include "aggregator/fleet_link.h"
#include "aggregator/recorder/telemetry.h"
#include "aggregator/recorder/triggers.h"
#include "common/clock.h"
#include "common/daemon.h"
#include "common/daemon_flags.h"
#include "common/json_text.h"
#include "common/logging.h"
#include "common/periodic.h"
#include "common/sd_notify.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "http/server.h"
#include "metrics/grpc_metrics.h"
#include "metrics/registry.h"
#include "nlohmann/json.hpp"
#include "podprof_version.h"
#include "proto/grpc_status.h"
#include "storage/health.h"
#include "storage/retention.h"
#include "storage/store.h"

namespace podprof::aggregator {
namespace {

constexpr int kExitConfig = 2;
constexpr int kExitServe = 1;

// Ingest allocates and frees column buffers of up to tens of MB per host, on several threads.
// Mapping each one on its own (the fixed 256 KiB threshold this had) cost a page fault per
// 4 KiB on every host and an unmap on every free: a quarter of ingest's CPU. They stay in the
// heap instead, which is not shrunk below 256 MiB of free space at its top; four arenas keep
// 16+ threads from spreading that over a heap each. The orchestrator gives the free pages back
// after each capture (malloc_trim).
void TuneHeapForIngest() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_ARENA_MAX, 4);
}

// The command line. An exit code when the process should stop (--help, a bad flag).
std::optional<int> ParseFlags(int argc, char** argv, AggregatorFlags* flags,
                              std::string* ready_file) {
  CLI::App app{"podprof-aggregator: keeps every capture's kernel statistics and answers queries"};
  app.name("podprof-aggregator");
  app.set_version_flag("--version", std::string("podprof-aggregator ") + kVersion);
  CLI::Option* config_opt = app.add_option("--config", flags->config, "TOML configuration file");
  app.add_option("--listen", flags->listen, "podprof.v1.Aggregator address (default 0.0.0.0:7100)");
  app.add_option("--db", flags->db, "SQLite database file (default /var/lib/podprof/podprof.db)");
  app.add_option("--ready-file", *ready_file, "Once listening, write the bound port as JSON here");
  app.add_option("--http-listen", flags->http_listen,
                 "Web pages, JSON API and /metrics here (as [http] listen; default "
                 "127.0.0.1:7180; off turns them off)");
  app.add_option("--clickhouse-url", flags->clickhouse_url,
                 "Replicate captures to the ClickHouse fleet store at this HTTP address (as "
                 "[fleet] clickhouse_url)");
  app.add_flag("--insecure", flags->insecure,
               "Plaintext gRPC without certificates (as insecure = true); listens on loopback "
               "unless --listen says otherwise");
  return ParseDaemonFlags(app, argc, argv, config_opt, &flags->config_given, kExitConfig);
}

// The store, with captures left `running` by the previous process marked interrupted.
absl::StatusOr<std::unique_ptr<storage::Store>> OpenStore(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<storage::Store> store, storage::Store::Open(path));
  if (store->read_only()) {
    // The history is still worth serving; captures and imports fail naming the reason.
    PODPROF_LOG(ERROR) << "the database " << path
                       << " is open for queries only: " << store->read_only_reason()
                       << "; captures and imports will fail until it is writable and the "
                          "aggregator restarts";
    return store;
  }
  ASSIGN_OR_RETURN(const storage::CaptureWriter::Recovery r, store->writer().Recover());
  if (r.interrupted > 0) {
    PODPROF_LOG(WARNING) << r.interrupted
                         << " capture(s) were running when the aggregator last stopped; marked "
                            "interrupted";
  }
  for (const std::string& w : r.warnings) PODPROF_LOG(WARNING) << w;
  if (r.bytes_truncated > 0 || r.files_removed > 0) {
    PODPROF_LOG(INFO) << "store recovery: " << r.bytes_truncated
                      << " torn bytes cut from segment tails, " << r.files_removed
                      << " segment file(s) no capture names removed";
  }
  return store;
}

OrchestratorLimits OrchestratorLimitsFrom(const AggregatorConfig& config) {
  OrchestratorLimits l;
  l.max_duration_ns = config.max_capture_duration_ns;
  l.max_concurrent = static_cast<int>(config.max_concurrent_captures);
  l.max_starts_per_minute = static_cast<int>(config.max_captures_per_minute);
  l.ingest_workers = static_cast<int>(config.ingest_workers);
  l.max_active_hosts = static_cast<int>(config.ingest_max_active_hosts);
  l.max_host_stream_bytes = config.ingest_max_host_stream_bytes;
  l.max_stream_bytes = config.ingest_max_stream_bytes;
  l.refuse_snapshot_without_recorder = config.snapshots_without_recorder == "refuse";
  return l;
}

// Listens and writes `ready_file` ({"port", "pid"}) when asked; null when it cannot listen.
std::unique_ptr<grpc::Server> Serve(const AggregatorConfig& config,
                                    const security::Credentials& creds, grpc::Service* service,
                                    metrics::Registry& metrics, Clock& clock,
                                    const std::string& ready_file, int http_port, int* port) {
  grpc::ServerBuilder builder;
  builder.experimental().SetInterceptorCreators(metrics::RpcMetricsInterceptors(metrics, clock));
  builder.AddListeningPort(config.listen, creds.server, port);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(config.max_concurrent_streams));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) return nullptr;
  if (!ready_file.empty()) {
    std::string tmp = ready_file + ".tmp";
    std::ofstream(tmp) << nlohmann::json({{"port", *port},
                                          {"http_port", http_port},
                                          {"pid", static_cast<int64_t>(getpid())}})
                              .dump()
                       << "\n";
    std::rename(tmp.c_str(), ready_file.c_str());
  }
  return server;
}

// How the triggers take a snapshot: the window before now of every online host, its cause the
// trigger, its reason, the telemetry that fired it and the instant it fired.
TriggerLoop::TakeSnapshot SnapshotTaker(Orchestrator& orchestrator, int64_t window_ns) {
  return [&orchestrator, window_ns](const Firing& f) -> absl::StatusOr<std::string> {
    podprof::v1::StartCaptureRequest r;
    r.set_snapshot(true);
    r.set_duration_ms(static_cast<uint64_t>(window_ns / 1'000'000));
    podprof::v1::SnapshotCause& cause = *r.mutable_cause();
    cause.set_trigger(f.trigger);
    cause.set_reason(TruncateUtf8(f.reason, 1024));
    std::string evidence = JsonText(f.evidence);
    // A cause's field holds 4 kB (it is stored as a label); the series is the part to give up.
    if (evidence.size() > 4096) {
      nlohmann::json shorter = f.evidence;
      shorter.erase("recent");
      evidence = TruncateUtf8(JsonText(shorter), 4096);
    }
    cause.set_evidence_json(std::move(evidence));
    cause.set_trigger_ns(f.at_ns);
    ASSIGN_OR_RETURN(podprof::v1::StartCaptureResponse started, orchestrator.Start(r));
    return started.capture_id();
  };
}

// The web pages, API and /metrics on [http] listen; null when off or when it cannot listen
// (logged: the pod is served regardless).
std::unique_ptr<http::Server> ServeHttp(const AggregatorConfig& config,
                                        const HttpApiSources& sources, Clock& clock) {
  if (config.http.listen.empty()) return nullptr;
  http::ServerOptions o;
  o.listen = config.http.listen;
  o.max_request_bytes = static_cast<uint64_t>(config.http.max_request_bytes);
  o.max_requests_per_second = static_cast<double>(config.http.max_requests_per_second);
  // Handlers run on these threads: SQL statements (up to kMaxSqlStatements at once, each up to
  // its time limit) must leave two for everyone else.
  o.threads = 2 + kMaxSqlStatements;
  o.tls = !config.tls.insecure;
  o.allowed_hosts = config.http.allowed_hosts;
  if (!config.http.external_url.empty()) {
    const std::string origin = http::OriginOf(config.http.external_url);
    o.allowed_origins.push_back(origin);
    o.allowed_hosts.push_back(http::HostName(origin.substr(origin.find("://") + 3)));
  }
  if (o.tls) {
    absl::StatusOr<security::TlsMaterial> m = security::LoadTlsMaterial(config.tls);
    if (!m.ok()) {
      PODPROF_LOG(ERROR) << "http: " << m.status().message();
      return nullptr;
    }
    o.material = *std::move(m);
  }
  absl::StatusOr<std::unique_ptr<http::Server>> s =
      http::Server::Start(o, AggregatorRoutes(sources), clock);
  if (!s.ok()) {
    PODPROF_LOG(ERROR) << "http: " << s.status().message() << "; no web pages, API or /metrics";
    return nullptr;
  }
  PODPROF_LOG(INFO) << (o.tls ? "https" : "http") << " on " << config.http.listen << " (port "
                    << (*s)->port() << "): pages, /api/v1, /metrics";
  return *std::move(s);
}

// One pass of retention when the configuration asks for it (and the store is writable).
// Returns ns until the next pass: the lifecycle's tick.
int64_t RetentionTick(storage::Store& store, const AggregatorConfig& config, Clock& clock) {
  const bool on = config.retention_max_age_ns > 0 || config.retention_max_bytes > 0 ||
                  config.retention_keep_timelines_ns > 0;
  if (!on || store.read_only()) return config.retention_interval_ns;
  storage::RetentionPolicy p;
  p.max_age_ns = config.retention_max_age_ns;
  p.max_bytes = config.retention_max_bytes;
  p.keep_timelines_ns = config.retention_keep_timelines_ns;
  absl::StatusOr<storage::RetentionResult> r =
      storage::ApplyRetention(store.database(), p, clock.NowNs());
  if (!r.ok()) {
    PODPROF_LOG(ERROR) << "retention: " << r.status().message();
  } else if (r->captures_deleted > 0 || r->timelines_dropped > 0) {
    PODPROF_LOG(INFO) << "retention deleted " << r->captures_deleted << " captures and "
                      << r->timelines_dropped << " timeline blocks";
  }
  return config.retention_interval_ns;
}

// The health check behind WATCHDOG=1: the store's writer can take the write lock and the server
// answers its own RPC, so a wedged store or a stuck server stops the pings and systemd restarts
// us. In-process (`self`): the check exercises the server's threads and handlers without
// depending on the address or the certificate's names. Each part gets `timeout_ns`.
absl::Status Healthy(storage::Store& store, podprof::v1::Aggregator::Stub& self, Clock& clock,
                     int64_t timeout_ns) {
  RETURN_IF_ERROR(storage::CheckWriter(store.database(), timeout_ns));
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock.NowNs(), timeout_ns));
  podprof::v1::ListAgentsResponse agents;
  return FromGrpc(self.ListAgents(&ctx, podprof::v1::ListAgentsRequest(), &agents));
}

// Probes agents' clocks on a thread of its own, so a slow agent never delays an RPC, until
// destroyed.
class Prober {
 public:
  Prober(Registry& registry, Clock& clock)
      : thread_(clock, clock.NowNs() + kEveryNs, [&registry, &clock] {
          constexpr int kBurst = 8;
          registry.ProbeDue(kBurst);
          return PeriodicThread::Every(clock, kEveryNs);
        }) {}

 private:
  static constexpr int64_t kEveryNs = 200'000'000;
  PeriodicThread thread_;  // stopped and joined by its destructor
};

// Who may register and who may operate, from the configuration: the allow lists, or while one
// is empty the certificate role (security/tls.h). Rebuilt on every reload.
AccessControl AccessFrom(const AggregatorConfig& config) {
  AccessControl access;
  access.agents = {security::kAgentRole, config.allowed_agents, "tls.allowed_agents",
                   config.tls.insecure};
  access.operators = {security::kOperatorRole, config.allowed_operators, "tls.allowed_operators",
                      config.tls.insecure};
  return access;
}

}  // namespace

// The daemon: its parts made in the order they depend on each other, served, and stopped in
// reverse. Long: one object per line, each owning a part the next ones borrow, so that their
// lifetimes are the scope's; split, the borrowing would cross functions.
int AggregatorMain(int argc, char** argv) {
  TuneHeapForIngest();
  AggregatorFlags flags;
  std::string ready_file;
  if (std::optional<int> exit = ParseFlags(argc, argv, &flags, &ready_file)) return *exit;
  absl::StatusOr<AggregatorConfig> config = BuildAggregatorConfig(flags);
  if (!config.ok()) {
    std::cerr << "podprof-aggregator: " << config.status().message() << "\n";
    return kExitConfig;
  }
  RealClock clock;
  absl::StatusOr<security::Credentials> creds =
      security::DaemonCredentials(config->tls, clock.NowNs());
  if (!creds.ok()) {
    std::cerr << "podprof-aggregator: " << creds.status().message() << "\n";
    return kExitConfig;
  }
  AccessControl access = AccessFrom(*config);
  PODPROF_LOG(INFO) << security::DescribeTls(*creds, {access.agents, access.operators});
  if (std::string roles = security::DescribeDefaultRoles(*creds, {access.agents, access.operators});
      !roles.empty()) {
    PODPROF_LOG(INFO) << roles;
  }
  if (creds->expires_soon) {
    PODPROF_LOG(WARNING) << "the certificate expires within a week: " << creds->description;
  }
  if (config->tls.insecure) {
    PODPROF_LOG(WARNING) << "insecure = true: plaintext gRPC, no client certificates, anyone who "
                            "reaches "
                         << config->listen << " may register agents and start captures";
  }
  ServiceNotifier notifier;
  absl::StatusOr<std::unique_ptr<storage::Store>> store = OpenStore(config->db);
  if (!store.ok()) {
    std::cerr << "podprof-aggregator: " << store.status().message() << "\n";
    return kExitServe;
  }
  ImportLimits limits;
  limits.spool_dir = config->spool_dir;
  Registry registry(clock, config->heartbeat_interval_ns, config->probe_interval_ns, creds->channel,
                    config->max_message_bytes);
  registry.SetAgentHosts(config->agent_hosts);
  Orchestrator orchestrator(&registry, &(*store)->writer(), clock, OrchestratorLimitsFrom(*config));
  const StoreReads reads(**store);
  Queries queries(reads, registry);
  AccessRules access_rules(access);
  AggregatorService service(&queries, reads, &(*store)->writer(), &registry, &orchestrator, &clock,
                            limits, &access_rules);
  security::RouteGrpcLogs(&service.refusals());
  // A fleet store that cannot be used is reported and left: the pod is served regardless.
  absl::StatusOr<std::unique_ptr<fleet::Replicator>> fleet = StartFleet(*config, **store, clock);
  if (!fleet.ok()) {
    PODPROF_LOG(ERROR) << "fleet: " << fleet.status().message()
                       << "; captures are stored here only";
  } else if (*fleet != nullptr) {
    queries.SetFleet(fleet->get());
  }
  // The flight recorder's pod side (docs/RECORDER.md): the agents' telemetry kept and the
  // triggers that take snapshots from it. Destroyed before the orchestrator they use.
  TelemetryHub telemetry((*store)->read_only() ? nullptr : &(*store)->telemetry(),
                         config->telemetry);
  service.SetTelemetry(&telemetry);
  TriggerLoop triggers(&telemetry, clock, config->triggers,
                       SnapshotTaker(orchestrator, config->triggers.window_ns));
  auto prober = std::make_unique<Prober>(registry, clock);
  metrics::Registry metrics;
  MetricSources sources{store->get(),
                        &registry,
                        &orchestrator,
                        fleet.ok() ? fleet->get() : nullptr,
                        config->ingest_max_active_hosts,
                        &queries};
  AddAggregatorMetrics(metrics, sources, clock);
  HttpApiSources api;
  api.queries = &queries;
  api.reads = &reads;
  api.metrics = &metrics;
  api.clock = &clock;
  api.orchestrator = &orchestrator;
  api.access = &access_rules;
  api.perfetto_ui = config->http.perfetto_ui;
  api.writes_refused = HttpWritesRefused(*config);
  api.triggers = &triggers;
  if (fleet.ok() && *fleet != nullptr) api.fleet = &(*fleet)->clickhouse();
  api.fleet_database = config->fleet.database;
  std::unique_ptr<http::Server> web = ServeHttp(*config, api, clock);
  int port = 0;
  std::unique_ptr<grpc::Server> server =
      Serve(*config, *creds, &service, metrics, clock, ready_file, web ? web->port() : 0, &port);
  if (server == nullptr) {
    std::cerr << "podprof-aggregator: cannot listen on " << config->listen << "\n";
    return kExitServe;
  }
  auto self = podprof::v1::Aggregator::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  DaemonHooks hooks;
  hooks.status_line = [&] {
    return absl::StrCat("listening on port ", port, "; database ", config->db);
  };
  hooks.health = [&] { return Healthy(**store, *self, clock, notifier.watchdog_ns() / 4); };
  // Retention, the allow lists, the hosts given to agent identities and the TLS files'
  // contents are reloadable; the listen address, the database and the TLS mode need a restart.
  hooks.reload = [&]() -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(AggregatorConfig fresh, BuildAggregatorConfig(flags));
    // First, as it can still fail: a refused reload changes nothing.
    ASSIGN_OR_RETURN(std::string rotated,
                     security::RotateCredentials(*creds, fresh.tls, clock.NowNs()));
    std::vector<std::string> changed = ApplyReloadable(fresh, &*config);
    if (!rotated.empty()) changed.push_back(absl::StrCat("TLS material (now ", rotated, ")"));
    std::string summary = ChangedSummary(changed);
    registry.SetAgentHosts(config->agent_hosts);
    access_rules.Set(AccessFrom(*config));
    return summary;
  };
  hooks.tick = [&] { return RetentionTick(**store, *config, clock); };
  hooks.first_tick_ns = config->retention_interval_ns;
  // In-flight queries and imports get 10 s to finish.
  hooks.drain_timeout_ns = 10'000'000'000;
  hooks.drain = [&](int64_t deadline_ns) {
    prober.reset();
    web.reset();
    server->Shutdown(DeadlineAt(deadline_ns, 0));
  };
  DaemonLifecycle(std::move(hooks), clock, notifier).Run();
  return 0;
}

}  // namespace podprof::aggregator
