#include "agent/agent_main.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/agent.h"
#include "agent/capture_runner.h"
#include "common/clock.h"
#include "common/clock_probe.h"
#include "common/logging.h"
#include "common/sd_notify.h"
#include "common/skewed_clock.h"
#include "nlohmann/json.hpp"
#include "proto/grpc_status.h"
#include "security/tls.h"

namespace podprof::agent {
namespace {

constexpr char kDefaultConfig[] = "/etc/podprof/agent.toml";
constexpr int kExitConfig = 2;
constexpr int kExitListen = 1;

int Fail(const std::string& message) {
  std::cerr << "podprof-agent: " << message << "\n";
  return kExitConfig;
}

// The flags scripts need most, each overriding its config key when given.
struct Flags {
  std::string config = kDefaultConfig;
  std::string listen, aggregator, advertise, profiler_service_listen, host_name, sysfs_root,
      temp_dir, counter_interval, ready_file, clock_offset = "0";
  double clock_drift_ppm = 0;
  bool insecure = false;
  std::vector<std::string> workload_profiler, workload_metrics, labels;
};

absl::StatusOr<AgentConfig> BuildConfig(const Flags& flags, bool config_given) {
  AgentConfig config;
  if (config_given || std::filesystem::exists(flags.config)) {
    absl::StatusOr<AgentConfig> loaded = LoadAgentConfig(flags.config);
    if (!loaded.ok()) return loaded.status();
    config = *loaded;
  }
  auto set = [](const std::string& flag, std::string* key) {
    if (!flag.empty()) *key = flag;
  };
  set(flags.listen, &config.listen);
  set(flags.aggregator, &config.aggregator);
  set(flags.advertise, &config.advertise);
  set(flags.profiler_service_listen, &config.profiler_service_listen);
  set(flags.host_name, &config.host_name);
  set(flags.sysfs_root, &config.sysfs_root);
  set(flags.temp_dir, &config.temp_dir);
  if (flags.insecure) config.insecure = true;
  if (!flags.workload_profiler.empty()) config.workload_profiler = flags.workload_profiler;
  if (!flags.workload_metrics.empty()) config.workload_metrics = flags.workload_metrics;
  // "none" turns metric sampling off (a workload without libtpu's service).
  if (config.workload_metrics.size() == 1 && config.workload_metrics[0] == "none") {
    config.workload_metrics.clear();
  }
  if (flags.profiler_service_listen == "none") config.profiler_service_listen.clear();
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
  absl::Status valid = ValidateAgentConfig(config);
  if (!valid.ok()) return valid;
  return config;
}

// The health check behind WATCHDOG=1: the agent's own gRPC server answers a Ping.
bool Healthy(podprof::v1::Agent::Stub& self, Clock& clock) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock.NowNs(), 1'000'000'000));
  podprof::v1::PingRequest req;
  req.set_client_send_ns(clock.NowNs());
  podprof::v1::PingResponse resp;
  return self.Ping(&ctx, req, &resp).ok();
}

}  // namespace

int AgentMain(int argc, char** argv) {
  CLI::App app{
      "podprof-agent: captures kernel timelines and counters from this host's TPU "
      "workload on demand and streams them to the aggregator"};
  app.name("podprof-agent");
  Flags flags;
  CLI::Option* config_opt =
      app.add_option("--config", flags.config, "TOML configuration file")->capture_default_str();
  app.add_option("--listen", flags.listen, "podprof.v1.Agent address (default 0.0.0.0:7101)");
  app.add_option("--aggregator", flags.aggregator, "Aggregator to register with (host:port)");
  app.add_option("--advertise", flags.advertise, "Address the aggregator should dial");
  app.add_option("--workload-profiler", flags.workload_profiler,
                 "Workload profiler service (default localhost:9999)");
  app.add_option("--workload-metrics", flags.workload_metrics,
                 "Runtime metric service(s) (default localhost:8431; none to disable)");
  app.add_option("--profiler-service-listen", flags.profiler_service_listen,
                 "tensorflow.ProfilerService facade (default 0.0.0.0:7102; none to disable)");
  app.add_option("--host-name", flags.host_name, "Host name to report");
  app.add_option("--sysfs-root", flags.sysfs_root, "sysfs root for chip discovery");
  app.add_option("--temp-dir", flags.temp_dir, "Where private capture repositories go");
  app.add_option("--counter-interval", flags.counter_interval, "Metric sampling interval");
  app.add_option("--label", flags.labels, "A label key=value (repeatable)");
  // For simulated pods: the agent shares its simulated host's wrong clock, as a real agent
  // shares its host's clock with the workload.
  app.add_option("--clock-offset", flags.clock_offset,
                 "Simulate a host clock off by this much (testing), e.g. -37.5ms");
  app.add_option("--clock-drift-ppm", flags.clock_drift_ppm,
                 "Simulate a host clock drifting this much (testing), ppm");
  app.add_flag("--insecure", flags.insecure,
               "Plaintext gRPC without certificates (as insecure = true)");
  app.add_option("--ready-file", flags.ready_file,
                 "Once listening, write the bound ports as JSON here (for tests and scripts)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitConfig;
  }
  const bool config_given = config_opt->count() > 0;
  absl::StatusOr<AgentConfig> config = BuildConfig(flags, config_given);
  if (!config.ok()) return Fail(std::string(config.status().message()));

  absl::StatusOr<int64_t> clock_offset = ParseDurationNs(flags.clock_offset);
  if (!clock_offset.ok())
    return Fail(absl::StrCat("--clock-offset: ", clock_offset.status().message()));
  RealClock real_clock;
  SkewedClock clock(real_clock, *clock_offset, flags.clock_drift_ppm);
  ServiceNotifier notifier;
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(*config, clock);
  if (!agent.ok()) return Fail(std::string(agent.status().message()));

  // A predecessor killed mid-capture leaves its repository behind; nothing of ours runs yet.
  if (int stale = RemoveStaleCaptureDirs((*agent)->Limits().temp_dir); stale > 0) {
    PODPROF_LOG(INFO) << "removed " << stale << " capture directories left by a stopped agent";
  }
  AgentService service(agent->get(), security::RoleAcl{config->allowed_aggregators});
  ProfilerProxy proxy(agent->get());
  int agent_port = 0, proxy_port = 0;
  grpc::ServerBuilder builder;
  security::TlsConfig tls{config->insecure, config->tls_cert, config->tls_key, config->tls_ca};
  absl::StatusOr<security::Credentials> creds = security::DaemonCredentials(tls);
  if (!creds.ok()) return Fail(std::string(creds.status().message()));
  if (config->insecure) {
    PODPROF_LOG(WARNING) << "insecure = true: plaintext gRPC without certificates; anyone who "
                            "reaches "
                         << config->listen << " may start captures on this host";
  }
  builder.AddListeningPort(config->listen, creds->server, &agent_port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || agent_port == 0) {
    std::cerr << "podprof-agent: cannot listen on " << config->listen << "\n";
    return kExitListen;
  }
  (*agent)->SetBoundPort(agent_port);
  // Clock probes on the same port number over UDP. Without them the agent still works: the
  // aggregator probes with Ping, less precisely, so a failure here is only a warning.
  std::unique_ptr<ClockProbeResponder> probe_responder;
  if (config->clock_probe) {
    const std::string host = config->listen.substr(0, config->listen.rfind(':'));
    absl::StatusOr<std::unique_ptr<ClockProbeResponder>> r =
        ClockProbeResponder::Start(host, agent_port, clock);
    if (r.ok()) {
      probe_responder = std::move(*r);
      (*agent)->SetClockProbePort(probe_responder->port());
    } else {
      PODPROF_LOG(WARNING) << "no UDP clock probes, the aggregator will use Ping: "
                           << r.status().message();
    }
  }
  std::unique_ptr<grpc::Server> proxy_server;
  if (!config->profiler_service_listen.empty()) {
    grpc::ServerBuilder pb;
    pb.AddListeningPort(config->profiler_service_listen, grpc::InsecureServerCredentials(),
                        &proxy_port);
    pb.RegisterService(&proxy);
    proxy_server = pb.BuildAndStart();
    if (proxy_server == nullptr || proxy_port == 0) {
      std::cerr << "podprof-agent: cannot listen on " << config->profiler_service_listen << "\n";
      server->Shutdown();
      return kExitListen;
    }
  }
  if (!flags.ready_file.empty()) {
    nlohmann::json j = {{"agent_port", agent_port},
                        {"profiler_service_port", proxy_port},
                        {"clock_probe_port", probe_responder ? probe_responder->port() : 0},
                        {"pid", static_cast<int64_t>(getpid())}};
    std::string tmp = flags.ready_file + ".tmp";
    std::ofstream(tmp) << j.dump() << "\n";
    std::rename(tmp.c_str(), flags.ready_file.c_str());
  }
  const std::string status = absl::StrCat(
      "listening on port ", agent_port, "; workload ", (*agent)->workload().profiler_address, "; ",
      config->aggregator.empty() ? "standalone" : "aggregator " + config->aggregator);
  PODPROF_LOG(INFO) << status;
  absl::Status ready = notifier.Ready(status);
  if (!ready.ok()) PODPROF_LOG(WARNING) << ready.message();

  boost::asio::io_context io;
  boost::asio::signal_set signals(io, SIGTERM, SIGINT, SIGHUP);

  // Registration and heartbeats on a timer of the control loop.
  std::unique_ptr<Registrar> registrar;
  boost::asio::steady_timer heartbeat(io);
  std::function<void(int64_t)> schedule_heartbeat = [&](int64_t delay_ns) {
    heartbeat.expires_after(std::chrono::nanoseconds(delay_ns));
    heartbeat.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      schedule_heartbeat(registrar->Tick());
    });
  };
  if (!config->aggregator.empty()) {
    registrar = std::make_unique<Registrar>(
        agent->get(),
        podprof::v1::Aggregator::NewStub(grpc::CreateChannel(config->aggregator, creds->channel)),
        config->aggregator);
    schedule_heartbeat(0);
  }

  // WATCHDOG=1 only while the agent's own server answers.
  // In-process, so the check does not depend on the address or the certificate's names.
  auto self = podprof::v1::Agent::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  boost::asio::steady_timer watchdog(io);
  std::function<void()> schedule_watchdog = [&] {
    watchdog.expires_after(std::chrono::nanoseconds(notifier.watchdog_ns() / 2));
    watchdog.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      if (Healthy(*self, clock)) {
        notifier.Watchdog().IgnoreError();
      } else {
        PODPROF_LOG(ERROR) << "health check failed: withholding the watchdog ping";
      }
      schedule_watchdog();
    });
  };
  if (notifier.watchdog_ns() > 0) schedule_watchdog();

  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        if (sig == SIGHUP) {
          notifier.Reloading().IgnoreError();
          absl::StatusOr<AgentConfig> fresh = BuildConfig(flags, config_given);
          if (!fresh.ok()) {
            PODPROF_LOG(ERROR) << "reload refused, keeping the running configuration: "
                               << fresh.status().message();
            notifier.Notify("READY=1\nSTATUS=reload refused: bad configuration").IgnoreError();
          } else {
            std::vector<std::string> changed = (*agent)->Reload(*fresh);
            PODPROF_LOG(INFO) << "reloaded; changed: "
                              << (changed.empty() ? "nothing" : absl::StrJoin(changed, ", "));
            notifier.Notify("READY=1\nSTATUS=" + status).IgnoreError();
          }
          signals.async_wait(on_signal);
          return;
        }
        PODPROF_LOG(INFO) << "signal " << sig << ": draining";
        notifier.Stopping("draining").IgnoreError();
        (*agent)->StartDraining();
        io.stop();
      };
  signals.async_wait(on_signal);
  io.run();

  // Running captures finish (or hit the drain deadline); new ones were refused above.
  const int64_t drain_ns = (*agent)->config().drain_timeout_ns;
  if (proxy_server) proxy_server->Shutdown(DeadlineAt(clock.NowNs(), drain_ns));
  server->Shutdown(DeadlineAt(clock.NowNs(), drain_ns));
  PODPROF_LOG(INFO) << "stopped";
  return 0;
}

}  // namespace podprof::agent
