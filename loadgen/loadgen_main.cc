#include "loadgen/loadgen_main.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/clock_probe.h"
#include "common/logging.h"
#include "loadgen/capture_source.h"
#include "loadgen/emulated_host.h"
#include "loadgen/fleet_registrar.h"
#include "loadgen/fleet_service.h"
#include "nlohmann/json.hpp"
#include "proto/grpc_status.h"

namespace podprof::loadgen {
namespace {

constexpr int kExitConfig = 2;
constexpr int kExitListen = 1;
// The most hosts one process emulates: each costs a TCP and a UDP port and, while the
// aggregator holds it, a connection.
constexpr int kMaxAgents = 20'000;

int Fail(const std::string& message) {
  std::cerr << "podprof-loadgen: " << message << "\n";
  return kExitConfig;
}

struct Flags {
  std::string aggregator, bind = "127.0.0.1", generation = "v5p", max_clock_offset = "50ms",
                          exit_after, truth_file, ready_file, telemetry_interval,
                          telemetry_slowdown;
  int64_t telemetry_interval_ns = 0;
  int64_t slowdown_after_ns = -1;  // --telemetry-slowdown-at's T; -1: none
  double slowdown_factor = 1;
  int agents = 0, chips = 4, first_host = 0, pod_hosts = 0, counters = 1, generator_threads = 2,
      max_streaming = 128, slices = 1;
  uint64_t pod_seed = 1;
  double max_drift_ppm = 50;
  bool insecure = false;
};

// Writes `j` to `path` atomically (readers never see half a file).
void WriteJson(const std::string& path, const nlohmann::json& j) {
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << j.dump() << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

// The ground truth a test compares the aggregator's clock corrections with: the host clock
// reads true time + offset + drift * (true time - epoch).
nlohmann::json Truth(const Flags& flags, const std::vector<std::unique_ptr<EmulatedHost>>& hosts) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& h : hosts) {
    list.push_back({{"host_name", h->name},
                    {"port", h->port},
                    {"clock_probe_port", h->probe_port},
                    {"clock_offset_ns", h->clock.offset_ns()},
                    {"clock_drift_ppm", h->clock.drift_ppm()},
                    {"clock_epoch_ns", h->clock.epoch_ns()}});
  }
  return {{"pod_seed", flags.pod_seed},   {"generation", flags.generation}, {"chips", flags.chips},
          {"pod_hosts", flags.pod_hosts}, {"slices", flags.slices},         {"hosts", list}};
}

// Blocks until SIGTERM/SIGINT (blocked in every thread, see LoadgenMain) or `deadline_ns` on
// `clock` (0: none); returns the signal, or 0 at the deadline.
int WaitForEnd(const sigset_t& signals, Clock& clock, int64_t deadline_ns) {
  while (true) {
    int64_t wait_ns = 1'000'000'000;
    if (deadline_ns > 0) {
      wait_ns = std::min(wait_ns, deadline_ns - clock.NowNs());
      if (wait_ns <= 0) return 0;
    }
    timespec ts{static_cast<time_t>(wait_ns / 1'000'000'000),
                static_cast<long>(wait_ns % 1'000'000'000)};
    const int sig = sigtimedwait(&signals, nullptr, &ts);
    if (sig > 0) return sig;
  }
}

// --telemetry-interval and --telemetry-slowdown-at into `f`; an exit code, or -1 to go on.
int CheckTelemetryFlags(Flags* f) {
  if (!f->telemetry_interval.empty()) {
    absl::StatusOr<int64_t> d = ParseDurationNs(f->telemetry_interval);
    if (!d.ok() || *d < 100'000'000) {
      return Fail("--telemetry-interval must be a duration of at least 100ms, e.g. 1s");
    }
    f->telemetry_interval_ns = *d;
  }
  if (!f->telemetry_slowdown.empty()) {
    const std::vector<std::string> parts = absl::StrSplit(f->telemetry_slowdown, ':');
    absl::StatusOr<int64_t> at = ParseDurationNs(parts[0]);
    if (parts.size() != 2 || !at.ok() || *at < 0 ||
        !absl::SimpleAtod(parts[1], &f->slowdown_factor) || !(f->slowdown_factor > 0)) {
      return Fail("--telemetry-slowdown-at must be T:FACTOR, e.g. 20s:1.3");
    }
    f->slowdown_after_ns = *at;
  }
  return -1;
}

// Parses the flags into `f`; returns an exit code to leave with, or -1 to go on.
int ParseFlags(int argc, char** argv, Flags* f, int64_t* max_offset_ns, int64_t* exit_after_ns) {
  CLI::App app{
      "podprof-loadgen: one process registering as many podprof agents, each with its own "
      "port, clock and capture, to load an aggregator at the size of a real pod"};
  app.name("podprof-loadgen");
  app.add_option("--aggregator", f->aggregator, "Aggregator to register with (host:port)")
      ->required();
  app.add_option("--agents", f->agents, "Agents (hosts) to emulate")->required();
  app.add_option("--chips", f->chips, "Chips per host")->capture_default_str();
  app.add_option("--generation", f->generation, "TPU generation: v4, v5e, v5p, v6e")
      ->capture_default_str();
  app.add_option("--pod-seed", f->pod_seed, "Seed of the pod model and of the hosts' clocks")
      ->capture_default_str();
  app.add_option("--first-host", f->first_host, "Index of the first emulated host (host-<i>)")
      ->capture_default_str();
  app.add_option("--pod-hosts", f->pod_hosts,
                 "Hosts in the whole pod, when several loadgens share one (default: "
                 "first-host + agents)");
  app.add_option("--slices", f->slices,
                 "Slices of a multi-slice job: the pod's hosts split evenly, host index = slice x "
                 "hosts per slice + worker; each agent reports its slice")
      ->capture_default_str();
  app.add_option("--bind", f->bind, "Address every emulated agent listens on")
      ->capture_default_str();
  app.add_option("--max-clock-offset", f->max_clock_offset,
                 "Host clock errors are uniform within +- this")
      ->capture_default_str();
  app.add_option("--max-drift-ppm", f->max_drift_ppm,
                 "Host clock drifts are uniform within +- this")
      ->capture_default_str();
  app.add_option("--counters", f->counters, "1: captures carry hardware counters; 0: not")
      ->capture_default_str();
  app.add_option("--generator-threads", f->generator_threads, "Threads generating captures")
      ->capture_default_str();
  app.add_option("--max-streaming", f->max_streaming,
                 "Hosts holding a generated capture at once (bounds memory)")
      ->capture_default_str();
  app.add_option("--exit-after", f->exit_after, "Exit by itself after this long, e.g. 10m");
  app.add_option("--telemetry-interval", f->telemetry_interval,
                 "Each host reports telemetry of its chips this often, e.g. 1s (default: none)");
  app.add_option("--telemetry-slowdown-at", f->telemetry_slowdown,
                 "From T after start every host reports FACTOR times longer steps, T:FACTOR, "
                 "e.g. 20s:1.3 (the flight recorder's step-time trigger)");
  app.add_option("--truth-file", f->truth_file, "Write every host's clock error here as JSON");
  app.add_option("--ready-file", f->ready_file,
                 "Once listening, write the ports as JSON here (for tests and scripts)");
  app.add_flag("--insecure", f->insecure, "Plaintext gRPC (the only mode; must be given)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitConfig;
  }
  if (!f->insecure) {
    return Fail(
        "podprof-loadgen speaks plaintext gRPC only: pass --insecure (and run the "
        "aggregator with --insecure)");
  }
  if (f->agents < 1 || f->agents > kMaxAgents) {
    return Fail(absl::StrCat("--agents must be 1..", kMaxAgents, ", got ", f->agents));
  }
  if (f->first_host < 0) return Fail("--first-host must not be negative");
  if (f->pod_hosts == 0) f->pod_hosts = f->first_host + f->agents;
  if (f->pod_hosts < f->first_host + f->agents) {
    return Fail("--pod-hosts must cover --first-host + --agents");
  }
  if (f->generator_threads < 1 || f->max_streaming < 1) {
    return Fail("--generator-threads and --max-streaming must be at least 1");
  }
  absl::StatusOr<int64_t> offset = ParseDurationNs(f->max_clock_offset);
  if (!offset.ok()) return Fail(absl::StrCat("--max-clock-offset: ", offset.status().message()));
  if (*offset < 0) return Fail("--max-clock-offset must not be negative");
  *max_offset_ns = *offset;
  if (!f->exit_after.empty()) {
    absl::StatusOr<int64_t> d = ParseDurationNs(f->exit_after);
    if (!d.ok() || *d <= 0) return Fail("--exit-after must be a positive duration, e.g. 10m");
    *exit_after_ns = *d;
  }
  return CheckTelemetryFlags(f);
}

}  // namespace

// Long: one declaration per flag, then each flag checked, in the order --help lists them.
int LoadgenMain(int argc, char** argv) {
  Flags f;
  int64_t max_offset_ns = 0, exit_after_ns = 0;
  if (int code = ParseFlags(argc, argv, &f, &max_offset_ns, &exit_after_ns); code >= 0) {
    return code;
  }
  sim::PodConfig pod;
  pod.generation = f.generation;
  pod.chips = f.chips;
  pod.hosts = f.pod_hosts;
  pod.slices = f.slices;
  pod.pod_seed = f.pod_seed;
  absl::StatusOr<std::unique_ptr<CaptureSource>> source =
      CaptureSource::Create(pod, f.counters != 0);
  if (!source.ok()) return Fail(std::string(source.status().message()));

  // Signals are taken by WaitForEnd only: blocked before any thread starts, so every thread
  // inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  RealClock truth;
  const int64_t started = truth.NowNs();
  std::vector<std::unique_ptr<EmulatedHost>> hosts =
      MakeHosts(f.first_host, f.agents, f.pod_seed, max_offset_ns, f.max_drift_ppm, truth);
  std::vector<EmulatedHost*> borrowed;
  for (const auto& h : hosts) borrowed.push_back(h.get());
  FleetLimits limits;
  limits.generator_threads = f.generator_threads;
  limits.max_streaming = f.max_streaming;
  FleetService service(borrowed, **source, truth, limits);

  // One server with a listening port per host.
  grpc::ServerBuilder builder;
  for (const auto& h : hosts) {
    builder.AddListeningPort(absl::StrCat(f.bind, ":0"), grpc::InsecureServerCredentials(),
                             &h->port);
  }
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::cerr << "podprof-loadgen: cannot listen on " << f.agents << " ports of " << f.bind << "\n";
    return kExitListen;
  }
  // Clock probes on each host's own port number over UDP, as podprof-agent answers them; a
  // number some other UDP socket holds gets a free one (HostInfo says which).
  std::vector<MultiClockProbeResponder::Endpoint> endpoints;
  for (const auto& h : hosts) endpoints.push_back({f.bind, h->port, &h->clock});
  absl::StatusOr<std::unique_ptr<MultiClockProbeResponder>> probes =
      MultiClockProbeResponder::Start(endpoints, /*fallback_to_free_port=*/true);
  if (!probes.ok()) {
    std::cerr << "podprof-loadgen: " << probes.status().message() << "\n";
    server->Shutdown();
    return kExitListen;
  }
  std::vector<podprof::v1::HostInfo> infos;
  for (size_t i = 0; i < hosts.size(); ++i) {
    hosts[i]->probe_port = (*probes)->ports()[i];
    infos.push_back(DescribeHost(*hosts[i], f.bind, (*source)->model()));
  }
  service.Attach(infos);
  if (!f.truth_file.empty()) WriteJson(f.truth_file, Truth(f, hosts));

  FleetRegistrar registrar(borrowed, infos,
                           podprof::v1::Aggregator::NewStub(grpc::CreateChannel(
                               f.aggregator, grpc::InsecureChannelCredentials())),
                           truth, /*max_in_flight=*/64, f.telemetry_interval_ns);
  if (f.slowdown_after_ns >= 0) {
    registrar.SlowTelemetryAt(truth.NowNs() + f.slowdown_after_ns, f.slowdown_factor);
  }
  registrar.Start();
  if (!f.ready_file.empty()) {
    WriteJson(f.ready_file, {{"pid", static_cast<int64_t>(getpid())},
                             {"agents", f.agents},
                             {"first_port", hosts.front()->port},
                             {"last_port", hosts.back()->port}});
  }
  PODPROF_LOG(INFO) << "emulating " << f.agents << " agents (" << hosts.front()->name << " .. "
                    << hosts.back()->name << ") for aggregator " << f.aggregator;

  const int sig = WaitForEnd(signals, truth, exit_after_ns > 0 ? started + exit_after_ns : 0);
  PODPROF_LOG(INFO) << (sig > 0 ? absl::StrCat("signal ", sig) : std::string("--exit-after"))
                    << ": stopping; " << service.captures_delivered() << " captures delivered, "
                    << service.captures_failed() << " failed or refused";
  registrar.Stop();
  if (f.telemetry_interval_ns > 0) {
    PODPROF_LOG(INFO) << "telemetry reports: " << registrar.telemetry_sent() << " accepted, "
                      << registrar.telemetry_failed() << " refused or failed";
  }
  service.Stop();
  // Streams still writing are cancelled after a short grace.
  server->Shutdown(DeadlineAt(truth.NowNs(), 2'000'000'000));
  return 0;
}

}  // namespace podprof::loadgen
