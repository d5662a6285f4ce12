#include "cli/demo_pod.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"

namespace podprof::cli {

namespace fs = std::filesystem;

launch::PodOptions DemoPod(const DemoOptions& options, const std::string& bin,
                           const std::string& dir, Clock& clock) {
  launch::PodOptions pod;
  pod.bin_dir = bin;
  pod.dir = dir;
  pod.hosts = options.hosts;
  pod.generation = options.generation;
  pod.seed = options.seed;
  pod.aggregator_config =
      "# podprof demo: probe clocks often, so the demo does not wait long\n"
      "[agents]\nheartbeat_interval = \"1s\"\nprobe_interval = \"1s\"\n"
      "# and store the agents' telemetry each second, for the pod page (/pod)\n"
      "[telemetry]\nstore_interval = \"1s\"\n";
  pod.agent_config = "# podprof demo: everything from flags\n";
  if (!options.throttle.empty()) pod.simhost_flags.push_back("--throttle=" + options.throttle);
  if (options.slices > 1) {
    // Each simulated host finds its slice from its index and hands it to its agent.
    pod.simhost_flags.push_back(absl::StrCat("--slices=", options.slices));
    if (!options.dcn_delays.empty() || !options.slow_slices.empty()) {
      // One instant for every host's faults, however long each took to start.
      pod.simhost_flags.push_back(absl::StrCat("--fault-epoch-ns=", clock.NowNs()));
    }
    for (const std::string& d : options.dcn_delays)
      pod.simhost_flags.push_back("--dcn-delay-at=" + d);
    for (const std::string& s : options.slow_slices)
      pod.simhost_flags.push_back("--slow-slice=" + s);
  }
  if (options.keep) {
    pod.group = ProcessGroup::kNewSession;  // outlives the terminal session of the demo
    pod.death_signal = 0;
  } else {
    pod.group = ProcessGroup::kOwn;  // Ctrl-C goes to the demo, which stops the children in order
    pod.death_signal = SIGTERM;      // the daemons drain if the demo dies some other way
  }
  pod.clock = &clock;
  // Milliseconds to 3 decimals, ppm to 2, microseconds to 1: the errors as the demo has always
  // drawn them from its seed.
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> offset_ms(-5, 5), drift_ppm(-20, 20), device_us(-100, 100);
  for (int i = 0; i < options.hosts; ++i) {
    launch::HostOptions h;
    h.clock_offset_ns = std::llround(offset_ms(rng) * 1e3) * 1000;
    h.clock_drift_ppm = std::round(drift_ppm(rng) * 100) / 100;
    // Every other host's device timelines are off its host clock; the aggregator finds that
    // by the collectives the host shares with its slice (aggregator/capture/alignment.h).
    if (i % 2) h.device_clock_offset_ns = std::llround(device_us(rng) * 10) * 100;
    pod.host.push_back(h);
  }
  return pod;
}

StopOnSignal::StopOnSignal(bool keep, launch::Pod& pod) : keep_(keep), pod_(pod) {
  if (keep_) return;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  sigaddset(&set, SIGUSR2);  // how the destructor wakes the thread
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  watcher_ = std::thread([this, set] {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == SIGUSR2) return;  // the demo is over and says so
    pod_.StopAll();
    std::_Exit(128 + sig);
  });
}

StopOnSignal::~StopOnSignal() {
  if (keep_) {
    pod_.Release();
    return;
  }
  pod_.StopAll();
  pthread_kill(watcher_.native_handle(), SIGUSR2);
  watcher_.join();
}

absl::Status WaitForAgents(AggregatorClient& client, Clock& clock, int hosts,
                           const std::string& dir) {
  const int64_t give_up = clock.MonotonicNs() + 30'000'000'000;
  while (true) {
    v1::ListAgentsResponse agents;
    if (client.Call(&v1::Aggregator::StubInterface::ListAgents, v1::ListAgentsRequest(), &agents)
            .ok()) {
      int probed = 0;
      for (const auto& a : agents.agents()) {
        probed += a.state() == v1::AGENT_STATE_ONLINE && a.clock().probe_count() >= 2;
      }
      if (probed == hosts) return absl::OkStatus();
    }
    if (clock.MonotonicNs() >= give_up) break;
    clock.SleepUntilNs(clock.NowNs() + 100'000'000, nullptr);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the agents did not all register in 30 s; see ", dir));
}

absl::StatusOr<std::string> BinDir(const DemoOptions& options) {
  std::string bin = options.bin_dir;
  if (bin.empty()) bin = fs::read_symlink("/proc/self/exe").parent_path().string();
  for (const char* exe : {"podprof-aggregator", "podprof-agent", "podprof-simhost"}) {
    if (!fs::exists(fs::path(bin) / exe)) {
      return absl::NotFoundError(
          absl::StrCat(exe, " is not in ", bin, " (build the project first)"));
    }
  }
  return bin;
}

absl::StatusOr<std::string> DemoDir(const DemoOptions& options) {
  if (!options.dir.empty()) return options.dir;
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/podprof-demo-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError("cannot make a temporary directory");
  }
  return pattern;
}

}  // namespace podprof::cli
