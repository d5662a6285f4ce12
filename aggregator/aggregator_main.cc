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

int AggregatorMain(int argc, char** argv) {
  // Ingest allocates and frees column buffers of up to tens of MB per host, on several
  // threads. Mapping each one on its own (the fixed 256 KiB threshold this had) cost a page fault
  // per 4 KiB on every host and an unmap on every free: a quarter of ingest's CPU. They stay
  // in the heap instead, which is not shrunk below 256 MiB of free space at its top; four
  // arenas keep 16+ threads from spreading that over a heap each. The orchestrator gives the
  // free pages back after each capture (malloc_trim).
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_ARENA_MAX, 4);
  CLI::App app{"podprof-aggregator: keeps every capture's kernel statistics and answers queries"};
  app.name("podprof-aggregator");
  std::string config_path = kDefaultConfig, listen, db, ready_file;
  bool insecure = false;
  CLI::Option* config_opt = app.add_option("--config", config_path, "TOML configuration file");
  app.add_option("--listen", listen, "podprof.v1.Aggregator address (default 0.0.0.0:7100)");
  app.add_option("--db", db, "SQLite database file (default /var/lib/podprof/podprof.db)");
  app.add_option("--ready-file", ready_file, "Once listening, write the bound port as JSON here");
  app.add_flag("--insecure", insecure,
               "Plaintext gRPC without certificates (as insecure = true); listens on loopback "
               "unless --listen says otherwise");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  AggregatorConfig config;
  if (config_opt->count() > 0 || std::filesystem::exists(config_path)) {
    absl::StatusOr<AggregatorConfig> loaded = LoadAggregatorConfig(config_path);
    if (!loaded.ok()) {
      std::cerr << "podprof-aggregator: " << loaded.status().message() << "\n";
      return 2;
    }
    config = *loaded;
  }
  if (!listen.empty()) {
    config.listen = listen;
    config.listen_set = true;
  }
  if (!db.empty()) config.db = db;
  if (insecure) config.tls.insecure = true;
  if (config.tls.insecure && !config.listen_set) config.listen = "127.0.0.1:7100";
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
  absl::StatusOr<std::unique_ptr<storage::Store>> store = storage::Store::Open(config.db);
  if (!store.ok()) {
    std::cerr << "podprof-aggregator: " << store.status().message() << "\n";
    return 1;
  }
  if ((*store)->read_only()) {
    // The history is still worth serving; captures and imports fail naming the reason.
    PODPROF_LOG(ERROR) << "the database " << config.db
                       << " is open for queries only: " << (*store)->read_only_reason()
                       << "; captures and imports will fail until it is writable and the "
                          "aggregator restarts";
  }
  // Nothing of this process runs yet: captures still `running` died with the previous one.
  absl::StatusOr<int> interrupted =
      (*store)->read_only() ? absl::StatusOr<int>(0) : (*store)->MarkInterrupted();
  if (!interrupted.ok()) {
    std::cerr << "podprof-aggregator: " << interrupted.status().message() << "\n";
    return 1;
  }
  if (*interrupted > 0) {
    PODPROF_LOG(WARNING) << *interrupted
                         << " capture(s) were running when the aggregator last stopped; marked "
                            "interrupted";
  }
  ImportLimits limits;
  limits.spool_dir = config.spool_dir;
  Registry registry(clock, config.heartbeat_interval_ns, config.probe_interval_ns, creds->channel,
                    config.max_message_bytes);
  OrchestratorLimits orchestrator_limits;
  orchestrator_limits.max_duration_ns = config.max_capture_duration_ns;
  orchestrator_limits.max_concurrent = static_cast<int>(config.max_concurrent_captures);
  orchestrator_limits.max_starts_per_minute = static_cast<int>(config.max_captures_per_minute);
  orchestrator_limits.ingest_workers = static_cast<int>(config.ingest_workers);
  orchestrator_limits.max_active_hosts = static_cast<int>(config.ingest_max_active_hosts);
  Orchestrator orchestrator(&registry, store->get(), clock, orchestrator_limits);
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
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.listen, creds->server, &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(config.max_concurrent_streams));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "podprof-aggregator: cannot listen on " << config.listen << "\n";
    return 1;
  }
  if (!ready_file.empty()) {
    std::string tmp = ready_file + ".tmp";
    std::ofstream(tmp)
        << nlohmann::json({{"port", port}, {"pid", static_cast<int64_t>(getpid())}}).dump() << "\n";
    std::rename(tmp.c_str(), ready_file.c_str());
  }
  const std::string status = absl::StrCat("listening on port ", port, "; database ", config.db);
  PODPROF_LOG(INFO) << status;
  notifier.Ready(status).IgnoreError();

  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGTERM, SIGINT, SIGHUP);
  bool retention_scheduled = false;
  boost::asio::steady_timer retention(io);
  std::function<void()> schedule_retention = [&] {
    retention.expires_after(std::chrono::nanoseconds(config.retention_interval_ns));
    retention.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      storage::RetentionPolicy p;
      p.max_age_ns = config.retention_max_age_ns;
      p.max_bytes = config.retention_max_bytes;
      p.keep_timelines_ns = config.retention_keep_timelines_ns;
      absl::StatusOr<storage::RetentionResult> r = (*store)->ApplyRetention(p, clock.NowNs());
      if (!r.ok()) {
        PODPROF_LOG(ERROR) << "retention: " << r.status().message();
      } else if (r->captures_deleted > 0 || r->timelines_dropped > 0) {
        PODPROF_LOG(INFO) << "retention deleted " << r->captures_deleted << " captures and "
                          << r->timelines_dropped << " timeline blocks";
      }
      schedule_retention();
    });
  };
  auto retention_on = [&] {
    if ((*store)->read_only()) return false;
    return config.retention_max_age_ns > 0 || config.retention_max_bytes > 0 ||
           config.retention_keep_timelines_ns > 0;
  };
  if (retention_on()) {
    schedule_retention();
    retention_scheduled = true;
  }

  // WATCHDOG=1 only while the store's writer can take the write lock and the server answers
  // its own RPC: a wedged store or a stuck server stops the pings and systemd restarts us.
  // In-process: the check exercises the server's threads and handlers without depending on
  // the address or the certificate's names.
  auto self = podprof::v1::Aggregator::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  boost::asio::steady_timer watchdog(io);
  std::function<void()> schedule_watchdog = [&] {
    watchdog.expires_after(std::chrono::nanoseconds(notifier.watchdog_ns() / 2));
    watchdog.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      absl::Status healthy = (*store)->HealthCheck(notifier.watchdog_ns() / 4);
      if (healthy.ok()) {
        grpc::ClientContext ctx;
        ctx.set_deadline(DeadlineAt(clock.NowNs(), notifier.watchdog_ns() / 4));
        podprof::v1::ListAgentsResponse agents;
        healthy = FromGrpc(self->ListAgents(&ctx, podprof::v1::ListAgentsRequest(), &agents));
      }
      if (healthy.ok()) {
        notifier.Watchdog().IgnoreError();
      } else {
        PODPROF_LOG(ERROR) << "health check failed, withholding the watchdog ping: "
                           << healthy.message();
      }
      schedule_watchdog();
    });
  };
  if (notifier.watchdog_ns() > 0) schedule_watchdog();

  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (sig == SIGHUP) {
          // Retention is reloadable; the listen address and database need a restart.
          notifier.Reloading().IgnoreError();
          absl::StatusOr<AggregatorConfig> fresh = std::filesystem::exists(config_path)
                                                       ? LoadAggregatorConfig(config_path)
                                                       : absl::StatusOr<AggregatorConfig>(config);
          if (!fresh.ok()) {
            PODPROF_LOG(ERROR) << "reload refused, keeping the running configuration: "
                               << fresh.status().message();
          } else {
            config.retention_max_age_ns = fresh->retention_max_age_ns;
            config.retention_max_bytes = fresh->retention_max_bytes;
            config.retention_keep_timelines_ns = fresh->retention_keep_timelines_ns;
            config.retention_interval_ns = fresh->retention_interval_ns;
            if (retention_on() && !retention_scheduled) {
              schedule_retention();
              retention_scheduled = true;
            }
            PODPROF_LOG(INFO) << "reloaded retention settings from " << config_path;
          }
          notifier.Notify("READY=1\nSTATUS=" + status).IgnoreError();
          signals.async_wait(on_signal);
          return;
        }
        PODPROF_LOG(INFO) << "signal " << sig << ": draining";
        notifier.Stopping("draining").IgnoreError();
        io.stop();
      };
  signals.async_wait(on_signal);
  io.run();
  stop_probing.Notify();
  prober.join();
  // In-flight queries and imports get 10 s to finish.
  server->Shutdown(DeadlineAt(clock.NowNs(), 10'000'000'000));
  return 0;
}

}  // namespace podprof::aggregator
