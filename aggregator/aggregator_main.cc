#include "aggregator/aggregator_main.h"

#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "aggregator/orchestrator.h"
#include "aggregator/registry.h"
#include "aggregator/service.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/logging.h"
#include "common/sd_notify.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "proto/grpc_status.h"
#include "storage/store.h"

namespace podprof::aggregator {
namespace {

constexpr char kDefaultConfig[] = "/etc/podprof/aggregator.toml";

}  // namespace

absl::StatusOr<AggregatorConfig> LoadAggregatorConfig(const std::string& path) {
  AggregatorConfig c;
  ASSIGN_OR_RETURN(ConfigFile f, ConfigFile::Load(path));
  RETURN_IF_ERROR(f.CheckKnownKeys({"listen",
                                    "db",
                                    "retention.max_age",
                                    "retention.max_bytes",
                                    "retention.keep_timelines",
                                    "retention.interval",
                                    "import.spool_dir",
                                    "agents.heartbeat_interval",
                                    "agents.probe_interval",
                                    "insecure",
                                    "tls.cert",
                                    "tls.key",
                                    "tls.ca",
                                    "tls.allowed_agents",
                                    "tls.allowed_operators",
                                    "limits.max_capture_duration",
                                    "limits.max_concurrent_captures",
                                    "limits.max_captures_per_minute",
                                    "limits.max_message_bytes",
                                    "limits.max_concurrent_streams",
                                    "ingest.workers",
                                    "ingest.max_active_hosts"}));
  RETURN_IF_ERROR(f.GetInt("ingest.workers", &c.ingest_workers));
  RETURN_IF_ERROR(f.GetInt("ingest.max_active_hosts", &c.ingest_max_active_hosts));
  if (c.ingest_workers < 0 || c.ingest_workers > 1024 || c.ingest_max_active_hosts < 1 ||
      c.ingest_max_active_hosts > 100'000) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ingest: workers must be 0 (one per core) to 1024, max_active_hosts 1..100000"));
  }
  RETURN_IF_ERROR(f.GetDurationNs("limits.max_capture_duration", &c.max_capture_duration_ns));
  RETURN_IF_ERROR(f.GetInt("limits.max_concurrent_captures", &c.max_concurrent_captures));
  RETURN_IF_ERROR(f.GetInt("limits.max_captures_per_minute", &c.max_captures_per_minute));
  RETURN_IF_ERROR(f.GetInt("limits.max_message_bytes", &c.max_message_bytes));
  RETURN_IF_ERROR(f.GetInt("limits.max_concurrent_streams", &c.max_concurrent_streams));
  if (c.max_capture_duration_ns < 1'000'000 || c.max_concurrent_captures < 1 ||
      c.max_captures_per_minute < 1 || c.max_message_bytes < (64 << 10) ||
      c.max_message_bytes > (1 << 30) || c.max_concurrent_streams < 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": limits: max_capture_duration must be at least 1ms, max_concurrent_captures and "
        "max_captures_per_minute at least 1, max_message_bytes 64 KiB..1 GiB, "
        "max_concurrent_streams at least 4"));
  }
  const std::string default_listen = c.listen;
  RETURN_IF_ERROR(f.GetString("listen", &c.listen));
  c.listen_set = c.listen != default_listen;
  RETURN_IF_ERROR(f.GetBool("insecure", &c.tls.insecure));
  RETURN_IF_ERROR(f.GetString("tls.cert", &c.tls.cert));
  RETURN_IF_ERROR(f.GetString("tls.key", &c.tls.key));
  RETURN_IF_ERROR(f.GetString("tls.ca", &c.tls.ca));
  RETURN_IF_ERROR(f.GetStringList("tls.allowed_agents", &c.allowed_agents));
  RETURN_IF_ERROR(f.GetStringList("tls.allowed_operators", &c.allowed_operators));
  RETURN_IF_ERROR(f.GetString("db", &c.db));
  RETURN_IF_ERROR(f.GetDurationNs("retention.max_age", &c.retention_max_age_ns));
  RETURN_IF_ERROR(f.GetInt("retention.max_bytes", &c.retention_max_bytes));
  RETURN_IF_ERROR(f.GetDurationNs("retention.keep_timelines", &c.retention_keep_timelines_ns));
  RETURN_IF_ERROR(f.GetDurationNs("retention.interval", &c.retention_interval_ns));
  RETURN_IF_ERROR(f.GetString("import.spool_dir", &c.spool_dir));
  RETURN_IF_ERROR(f.GetDurationNs("agents.heartbeat_interval", &c.heartbeat_interval_ns));
  RETURN_IF_ERROR(f.GetDurationNs("agents.probe_interval", &c.probe_interval_ns));
  if (c.heartbeat_interval_ns < 100'000'000 || c.probe_interval_ns < 100'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": agents.heartbeat_interval and agents.probe_interval must be at "
                     "least 100ms"));
  }
  if (c.retention_interval_ns < 1'000'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": retention.interval must be at least 1s"));
  }
  if (c.retention_max_bytes < 0 || c.retention_max_age_ns < 0 ||
      c.retention_keep_timelines_ns < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": retention values cannot be negative"));
  }
  return c;
}

namespace {

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

// The command line over the configuration file. An exit code when the process should stop.
std::optional<int> Configure(int argc, char** argv, AggregatorConfig* config,
                             std::string* config_path, std::string* ready_file) {
  CLI::App app{"podprof-aggregator: keeps every capture's kernel statistics and answers queries"};
  app.name("podprof-aggregator");
  *config_path = kDefaultConfig;
  std::string listen, db;
  bool insecure = false;
  CLI::Option* config_opt = app.add_option("--config", *config_path, "TOML configuration file");
  app.add_option("--listen", listen, "podprof.v1.Aggregator address (default 0.0.0.0:7100)");
  app.add_option("--db", db, "SQLite database file (default /var/lib/podprof/podprof.db)");
  app.add_option("--ready-file", *ready_file, "Once listening, write the bound port as JSON here");
  app.add_flag("--insecure", insecure,
               "Plaintext gRPC without certificates (as insecure = true); listens on loopback "
               "unless --listen says otherwise");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (config_opt->count() > 0 || std::filesystem::exists(*config_path)) {
    absl::StatusOr<AggregatorConfig> loaded = LoadAggregatorConfig(*config_path);
    if (!loaded.ok()) {
      std::cerr << "podprof-aggregator: " << loaded.status().message() << "\n";
      return 2;
    }
    *config = *loaded;
  }
  if (!listen.empty()) {
    config->listen = listen;
    config->listen_set = true;
  }
  if (!db.empty()) config->db = db;
  if (insecure) config->tls.insecure = true;
  if (config->tls.insecure && !config->listen_set) config->listen = "127.0.0.1:7100";
  return std::nullopt;
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
  ASSIGN_OR_RETURN(const int interrupted, store->MarkInterrupted());
  if (interrupted > 0) {
    PODPROF_LOG(WARNING) << interrupted
                         << " capture(s) were running when the aggregator last stopped; marked "
                            "interrupted";
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
  return l;
}

// Listens and writes `ready_file` ({"port", "pid"}) when asked; null when it cannot listen.
std::unique_ptr<grpc::Server> Serve(const AggregatorConfig& config,
                                    const security::Credentials& creds, grpc::Service* service,
                                    const std::string& ready_file, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.listen, creds.server, port);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(config.max_concurrent_streams));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) return nullptr;
  if (!ready_file.empty()) {
    std::string tmp = ready_file + ".tmp";
    std::ofstream(tmp)
        << nlohmann::json({{"port", *port}, {"pid", static_cast<int64_t>(getpid())}}).dump()
        << "\n";
    std::rename(tmp.c_str(), ready_file.c_str());
  }
  return server;
}

// The running daemon's timers and signals on one event loop: retention, the systemd watchdog,
// SIGHUP (reload retention) and SIGTERM/SIGINT (drain).
class DaemonLoop {
 public:
  DaemonLoop(AggregatorConfig& config, const std::string& config_path, storage::Store& store,
             grpc::Server& server, Clock& clock, ServiceNotifier& notifier, std::string status)
      : config_(config),
        config_path_(config_path),
        store_(store),
        clock_(clock),
        notifier_(notifier),
        status_(std::move(status)),
        self_(podprof::v1::Aggregator::NewStub(server.InProcessChannel(grpc::ChannelArguments()))) {
  }

  // Until SIGTERM or SIGINT.
  void Run() {
    StartRetention();
    if (notifier_.watchdog_ns() > 0) ScheduleWatchdog();
    signals_.async_wait(
        [this](const boost::system::error_code& ec, int sig) { OnSignal(ec, sig); });
    io_.run();
  }

 private:
  bool RetentionOn() const {
    if (store_.read_only()) return false;
    return config_.retention_max_age_ns > 0 || config_.retention_max_bytes > 0 ||
           config_.retention_keep_timelines_ns > 0;
  }
  void StartRetention() {
    if (retention_scheduled_ || !RetentionOn()) return;
    retention_scheduled_ = true;
    ScheduleRetention();
  }
  void ScheduleRetention() {
    retention_.expires_after(std::chrono::nanoseconds(config_.retention_interval_ns));
    retention_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      ApplyRetention();
      ScheduleRetention();
    });
  }
  void ApplyRetention() {
    storage::RetentionPolicy p;
    p.max_age_ns = config_.retention_max_age_ns;
    p.max_bytes = config_.retention_max_bytes;
    p.keep_timelines_ns = config_.retention_keep_timelines_ns;
    absl::StatusOr<storage::RetentionResult> r = store_.ApplyRetention(p, clock_.NowNs());
    if (!r.ok()) {
      PODPROF_LOG(ERROR) << "retention: " << r.status().message();
    } else if (r->captures_deleted > 0 || r->timelines_dropped > 0) {
      PODPROF_LOG(INFO) << "retention deleted " << r->captures_deleted << " captures and "
                        << r->timelines_dropped << " timeline blocks";
    }
  }

  // WATCHDOG=1 only while the store's writer can take the write lock and the server answers
  // its own RPC: a wedged store or a stuck server stops the pings and systemd restarts us.
  // In-process: the check exercises the server's threads and handlers without depending on
  // the address or the certificate's names.
  void ScheduleWatchdog() {
    watchdog_.expires_after(std::chrono::nanoseconds(notifier_.watchdog_ns() / 2));
    watchdog_.async_wait([this](const boost::system::error_code& ec) {
      if (ec) return;
      absl::Status healthy = Healthy();
      if (healthy.ok()) {
        notifier_.Watchdog().IgnoreError();
      } else {
        PODPROF_LOG(ERROR) << "health check failed, withholding the watchdog ping: "
                           << healthy.message();
      }
      ScheduleWatchdog();
    });
  }
  absl::Status Healthy() {
    RETURN_IF_ERROR(store_.HealthCheck(notifier_.watchdog_ns() / 4));
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(clock_.NowNs(), notifier_.watchdog_ns() / 4));
    podprof::v1::ListAgentsResponse agents;
    return FromGrpc(self_->ListAgents(&ctx, podprof::v1::ListAgentsRequest(), &agents));
  }

  void OnSignal(const boost::system::error_code& ec, int sig) {
    if (ec) return;
    if (sig != SIGHUP) {
      PODPROF_LOG(INFO) << "signal " << sig << ": draining";
      notifier_.Stopping("draining").IgnoreError();
      io_.stop();
      return;
    }
    ReloadRetention();
    signals_.async_wait([this](const boost::system::error_code& e, int s) { OnSignal(e, s); });
  }
  // Retention is reloadable; the listen address and database need a restart.
  void ReloadRetention() {
    notifier_.Reloading().IgnoreError();
    absl::StatusOr<AggregatorConfig> fresh = std::filesystem::exists(config_path_)
                                                 ? LoadAggregatorConfig(config_path_)
                                                 : absl::StatusOr<AggregatorConfig>(config_);
    if (!fresh.ok()) {
      PODPROF_LOG(ERROR) << "reload refused, keeping the running configuration: "
                         << fresh.status().message();
    } else {
      config_.retention_max_age_ns = fresh->retention_max_age_ns;
      config_.retention_max_bytes = fresh->retention_max_bytes;
      config_.retention_keep_timelines_ns = fresh->retention_keep_timelines_ns;
      config_.retention_interval_ns = fresh->retention_interval_ns;
      StartRetention();
      PODPROF_LOG(INFO) << "reloaded retention settings from " << config_path_;
    }
    notifier_.Notify("READY=1\nSTATUS=" + status_).IgnoreError();
  }

  AggregatorConfig& config_;
  const std::string& config_path_;
  storage::Store& store_;
  Clock& clock_;
  ServiceNotifier& notifier_;
  const std::string status_;
  std::unique_ptr<podprof::v1::Aggregator::Stub> self_;
  boost::asio::io_context io_;
  boost::asio::signal_set signals_{io_, SIGTERM, SIGINT, SIGHUP};
  boost::asio::steady_timer retention_{io_};
  bool retention_scheduled_ = false;
  boost::asio::steady_timer watchdog_{io_};
};

}  // namespace

int AggregatorMain(int argc, char** argv) {
  TuneHeapForIngest();
  AggregatorConfig config;
  std::string config_path, ready_file;
  if (std::optional<int> exit = Configure(argc, argv, &config, &config_path, &ready_file)) {
    return *exit;
  }
  absl::StatusOr<security::Credentials> creds = security::DaemonCredentials(config.tls);
  if (!creds.ok()) {
    std::cerr << "podprof-aggregator: " << creds.status().message() << "\n";
    return 2;
  }
  if (config.tls.insecure) {
    PODPROF_LOG(WARNING) << "insecure = true: plaintext gRPC, no client certificates, anyone who "
                            "reaches "
                         << config.listen << " may register agents and start captures";
  }
  RealClock clock;
  ServiceNotifier notifier;
  absl::StatusOr<std::unique_ptr<storage::Store>> store = OpenStore(config.db);
  if (!store.ok()) {
    std::cerr << "podprof-aggregator: " << store.status().message() << "\n";
    return 1;
  }
  ImportLimits limits;
  limits.spool_dir = config.spool_dir;
  Registry registry(clock, config.heartbeat_interval_ns, config.probe_interval_ns, creds->channel,
                    config.max_message_bytes);
  Orchestrator orchestrator(&registry, store->get(), clock, OrchestratorLimitsFrom(config));
  AccessControl access;
  access.agents.identities = config.allowed_agents;
  access.operators.identities = config.allowed_operators;
  AggregatorService service(store->get(), &registry, &orchestrator, &clock, limits, access);
  // Clock probes run on their own thread so a slow agent never delays an RPC.
  absl::Notification stop_probing;
  std::thread prober([&] {
    constexpr int kBurst = 8;
    while (clock.SleepUntilNs(clock.NowNs() + 200'000'000, &stop_probing)) {
      registry.ProbeDue(kBurst);
    }
  });
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(config, *creds, &service, ready_file, &port);
  if (server == nullptr) {
    std::cerr << "podprof-aggregator: cannot listen on " << config.listen << "\n";
    stop_probing.Notify();
    prober.join();
    return 1;
  }
  const std::string status = absl::StrCat("listening on port ", port, "; database ", config.db);
  PODPROF_LOG(INFO) << status;
  notifier.Ready(status).IgnoreError();
  DaemonLoop(config, config_path, **store, *server, clock, notifier, status).Run();
  stop_probing.Notify();
  prober.join();
  // In-flight queries and imports get 10 s to finish.
  server->Shutdown(DeadlineAt(clock.NowNs(), 10'000'000'000));
  return 0;
}

}  // namespace podprof::aggregator
