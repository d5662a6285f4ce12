#include "cli/demo.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "cli/exit_codes.h"
#include "cli/export_command.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"

namespace podprof::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The children of one demo. Signals that would end the demo (Ctrl-C, SIGTERM, SIGHUP) are
// taken by a thread of their own, which stops every child before the demo exits, so no
// process or port outlives it; PR_SET_PDEATHSIG covers the demo dying some other way.
class Children {
 public:
  explicit Children(bool keep) : keep_(keep) {
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
      StopAll();
      std::_Exit(128 + sig);
    });
  }
  ~Children() {
    if (!keep_) {
      StopAll();
      pthread_kill(watcher_.native_handle(), SIGUSR2);
      watcher_.join();
    }
  }

  // Starts `args` with stdout and stderr in `log`. Returns the pid, or -1.
  pid_t Spawn(const std::string& name, const std::vector<std::string>& args,
              const std::string& log) {
    absl::MutexLock lock(&mu_);
    pid_t pid = fork();
    if (pid == 0) {
      if (keep_) {
        setsid();  // outlives the terminal session of the demo
      } else {
        setpgid(0, 0);  // Ctrl-C goes to the demo, which stops the children in order
        prctl(PR_SET_PDEATHSIG, SIGTERM);
      }
      sigset_t none;
      sigemptyset(&none);
      pthread_sigmask(SIG_SETMASK, &none, nullptr);
      int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    if (pid > 0) children_.push_back({name, pid});
    return pid;
  }

  // The name of a child that has exited, or "".
  std::string Exited() {
    absl::MutexLock lock(&mu_);
    for (auto& c : children_) {
      if (c.pid > 0 && waitpid(c.pid, nullptr, WNOHANG) == c.pid) {
        c.pid = -1;
        return c.name;
      }
    }
    return "";
  }

  std::vector<std::pair<std::string, pid_t>> List() {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<std::string, pid_t>> out;
    for (const auto& c : children_) out.emplace_back(c.name, c.pid);
    return out;
  }

  // SIGTERM to every child, agents first (they drain), then up to 10 s for them to exit and
  // SIGKILL for any that did not.
  void StopAll() {
    absl::MutexLock lock(&mu_);
    for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
      if (it->pid > 0) kill(it->pid, SIGTERM);
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (auto& c : children_) {
      while (c.pid > 0) {
        if (waitpid(c.pid, nullptr, WNOHANG) == c.pid) {
          c.pid = -1;
        } else if (std::chrono::steady_clock::now() > give_up) {
          kill(c.pid, SIGKILL);
          waitpid(c.pid, nullptr, 0);
          c.pid = -1;
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    }
  }

 private:
  struct Child {
    std::string name;
    pid_t pid;
  };
  const bool keep_;
  absl::Mutex mu_;
  std::vector<Child> children_ ABSL_GUARDED_BY(mu_);
  std::thread watcher_;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits for a daemon's ready file; fails naming the child and its log when it exits first.
absl::StatusOr<json> WaitReady(Children& children, const std::string& name, const std::string& path,
                               const std::string& log) {
  for (int i = 0; i < 600; ++i) {
    if (fs::exists(path)) {
      json j = json::parse(Slurp(path), nullptr, false);
      if (!j.is_discarded()) return j;
    }
    const std::string gone = children.Exited();
    if (!gone.empty()) {
      return absl::InternalError(absl::StrCat(gone, " exited during start-up; see ", log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat(name, " did not start in 30 s; see ", log));
}

// Waits up to 30 s for `hosts` agents online, each with two probe bursts behind it (so its
// clock model has a drift).
absl::Status WaitForAgents(AggregatorClient& client, int hosts, const std::string& dir) {
  bool ready = false;
  for (int i = 0; i < 300 && !ready; ++i) {
    v1::ListAgentsResponse agents;
    if (client.Call(&v1::Aggregator::StubInterface::ListAgents, v1::ListAgentsRequest(), &agents)
            .ok()) {
      int probed = 0;
      for (const auto& a : agents.agents()) {
        probed += a.state() == v1::AGENT_STATE_ONLINE && a.clock().probe_count() >= 2;
      }
      ready = probed == hosts;
    }
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (ready) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("the agents did not all register in 30 s; see ", dir));
}

// Each host's clock error at the window's middle, from the simulated hosts' ground truth, next
// to the correction the aggregator found, as the hosts' extra output fields.
void AddClockErrors(const CaptureResult& result,
                    const std::map<std::string, std::string>& truth_files,
                    CaptureOptions* capture) {
  const int64_t mid =
      result.summary.start_ns() + (result.summary.end_ns() - result.summary.start_ns()) / 2;
  for (const auto& h : result.summary.hosts()) {
    auto file = truth_files.find(h.host_name());
    if (file == truth_files.end()) continue;
    json t = json::parse(Slurp(file->second), nullptr, false);
    if (t.is_discarded() || !t.contains("clock_offset_ns")) continue;
    const double truth = t["clock_offset_ns"].get<double>() +
                         t["clock_drift_ppm"].get<double>() * 1e-6 *
                             (static_cast<double>(mid) - t["clock_epoch_ns"].get<double>()) +
                         t["device_clock_offset_ns"].get<double>();
    const int64_t injected = std::llround(truth);
    capture->host_extras[h.host_name()] = {
        {"injected_offset_ns", injected},
        {"error_ns",
         h.status() == v1::CAPTURE_STATUS_COMPLETE ? h.clock_offset_ns() - injected : 0}};
  }
}

// The clock errors given to the simulated hosts next to what the aggregator recovered.
void WriteClockTable(const CaptureResult& result, const CaptureOptions& capture,
                     std::ostream& out) {
  out << "\nclock errors given to the simulated hosts and what the aggregator recovered\n";
  TextTable t({{"HOST"},
               {"GIVEN", TextTable::Align::kRight},
               {"CORRECTION", TextTable::Align::kRight},
               {"ERROR", TextTable::Align::kRight},
               {"+-", TextTable::Align::kRight}});
  for (const auto& h : result.summary.hosts()) {
    auto it = capture.host_extras.find(h.host_name());
    if (it == capture.host_extras.end() || h.status() != v1::CAPTURE_STATUS_COMPLETE) continue;
    t.AddRow({h.host_name(), FormatSignedNs(it->second["injected_offset_ns"].get<int64_t>()),
              FormatSignedNs(h.clock_offset_ns()),
              FormatSignedNs(it->second["error_ns"].get<int64_t>()),
              FormatSignedNs(h.clock_uncertainty_ns())});
  }
  t.Write(out);
}

}  // namespace

int RunDemo(const DemoOptions& options, std::ostream& out, std::ostream& err) {
  auto fail = [&](const std::string& message) {
    err << "podprof demo: " << message << "\n";
    return kExitBadInput;
  };
  if (options.hosts < 1 || options.hosts > 64) return fail("--hosts must be 1..64");
  std::string bin = options.bin_dir;
  if (bin.empty()) bin = fs::read_symlink("/proc/self/exe").parent_path().string();
  for (const char* exe : {"podprof-aggregator", "podprof-agent", "podprof-simhost"}) {
    if (!fs::exists(fs::path(bin) / exe)) {
      return fail(absl::StrCat(exe, " is not in ", bin, " (build the project first)"));
    }
  }
  std::string dir = options.dir;
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/podprof-demo-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) return fail("cannot make a temporary directory");
    dir = pattern;
  }
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "sys", ec);
  fs::create_directories(fs::path(dir) / "tmp", ec);
  if (ec) return fail(absl::StrCat("cannot use ", dir, ": ", ec.message()));
  std::ofstream(fs::path(dir) / "aggregator.toml")
      << "# podprof demo: probe clocks often, so the demo does not wait long\n"
         "[agents]\nheartbeat_interval = \"1s\"\nprobe_interval = \"1s\"\n";
  std::ofstream(fs::path(dir) / "agent.toml") << "# podprof demo: everything from flags\n";

  const bool table = options.format == OutputFormat::kTable;
  auto say = [&](const std::string& line) {
    // Status lines go to the terminal in table mode and to stderr otherwise, so json output
    // stays one object.
    (table ? out : err) << line << "\n";
    (table ? out : err).flush();
  };
  Children children(options.keep);
  const std::string agg_log = (fs::path(dir) / "aggregator.log").string();
  children.Spawn("podprof-aggregator",
                 {bin + "/podprof-aggregator", "--insecure", "--config=" + dir + "/aggregator.toml",
                  "--listen=127.0.0.1:0", "--db=" + dir + "/podprof.db",
                  "--ready-file=" + dir + "/aggregator.json"},
                 agg_log);
  absl::StatusOr<json> agg =
      WaitReady(children, "podprof-aggregator", dir + "/aggregator.json", agg_log);
  if (!agg.ok()) return fail(std::string(agg.status().message()));
  const int agg_port = (*agg)["port"].get<int>();
  const std::string agg_addr = absl::StrCat("127.0.0.1:", agg_port);

  // Each host's clock is wrong by a few milliseconds, drifts by some ppm, and every other
  // host's device clock is off by up to 100 us: alignment has something to do.
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> offset_ms(-5, 5), drift_ppm(-20, 20), device_us(-100, 100);
  std::map<std::string, std::string> truth_files;
  for (int i = 0; i < options.hosts; ++i) {
    const std::string n = std::to_string(i), host = "host-" + n;
    const std::string off = absl::StrFormat("%.3fms", offset_ms(rng));
    const std::string drift = absl::StrFormat("%.2f", drift_ppm(rng));
    const std::string dev = i % 2 ? absl::StrFormat("%.1fus", device_us(rng)) : "0";
    const std::string sim_log = dir + "/simhost-" + n + ".log";
    truth_files[host] = dir + "/truth-" + n + ".json";
    children.Spawn("podprof-simhost " + n,
                   {bin + "/podprof-simhost", "--profiler-port=0", "--metrics-port=0",
                    "--generation=" + options.generation, absl::StrCat("--hosts=", options.hosts),
                    "--host-index=" + n, absl::StrCat("--pod-seed=", options.seed), "--counters",
                    "--host-name=" + host, "--clock-offset=" + off, "--clock-drift-ppm=" + drift,
                    "--device-clock-offset=" + dev, "--truth-file=" + truth_files[host],
                    "--ready-file=" + dir + "/simhost-" + n + ".json"},
                   sim_log);
    absl::StatusOr<json> sim =
        WaitReady(children, "podprof-simhost " + n, dir + "/simhost-" + n + ".json", sim_log);
    if (!sim.ok()) return fail(std::string(sim.status().message()));
    const std::string agent_log = dir + "/agent-" + n + ".log";
    children.Spawn(
        "podprof-agent " + n,
        {bin + "/podprof-agent", "--insecure", "--config=" + dir + "/agent.toml",
         "--listen=127.0.0.1:0", "--advertise=127.0.0.1:0", "--profiler-service-listen=none",
         "--host-name=" + host, "--sysfs-root=" + dir + "/sys", "--temp-dir=" + dir + "/tmp",
         absl::StrCat("--workload-profiler=127.0.0.1:", (*sim)["profiler_port"].get<int>()),
         absl::StrCat("--workload-metrics=127.0.0.1:", (*sim)["metrics_port"].get<int>()),
         "--aggregator=" + agg_addr, "--clock-offset=" + off, "--clock-drift-ppm=" + drift,
         "--ready-file=" + dir + "/agent-" + n + ".json"},
        agent_log);
    absl::StatusOr<json> ag =
        WaitReady(children, "podprof-agent " + n, dir + "/agent-" + n + ".json", agent_log);
    if (!ag.ok()) return fail(std::string(ag.status().message()));
  }
  say(absl::StrCat("podprof demo: aggregator on ", agg_addr, ", ", options.hosts, " simulated TPU ",
                   options.generation, " hosts with agents; files in ", dir));

  // Every agent registered, with two probe bursts behind it (so its clock model has a drift).
  RealClock clock;
  AggregatorTarget target;
  target.address = agg_addr;
  AggregatorClient client(target, clock);
  if (absl::Status s = WaitForAgents(client, options.hosts, dir); !s.ok()) {
    return fail(std::string(s.message()));
  }

  CaptureOptions capture;
  capture.duration_ns = options.duration_ns;
  capture.labels = {{"source", "demo"}};
  capture.format = options.format;
  capture.display = options.display;
  capture.top = 10;
  absl::StatusOr<CaptureResult> result = RunCapture(client, capture, out, err);
  if (!result.ok()) return fail(std::string(result.status().message()));

  AddClockErrors(*result, truth_files, &capture);
  ExportOptions exp;
  exp.capture_id = result->capture_id;
  exp.path = (fs::path(dir) / (result->capture_id + ".pftrace")).string();
  absl::StatusOr<std::string> trace = RunExport(client, exp, err);
  json extra = {{"trace_path", trace.ok() ? *trace : ""}, {"dir", dir}};
  if (options.keep) {
    extra["aggregator"] = agg_addr;
    json pids = json::array();
    for (const auto& [name, pid] : children.List()) pids.push_back(pid);
    extra["pids"] = pids;
  }
  WriteCaptureResult(*result, capture, extra, out);
  if (table) {
    WriteClockTable(*result, capture, out);
    if (trace.ok()) {
      out << "\nmerged timeline: " << *trace << "\n  open it at https://ui.perfetto.dev\n";
    } else {
      out << "\nno trace written: " << trace.status().message() << "\n";
    }
    if (options.keep) {
      std::vector<std::string> pids;
      for (const auto& [name, pid] : children.List()) pids.push_back(absl::StrCat(pid));
      out << "\nstill running (--keep): try\n  podprof agents --aggregator " << agg_addr
          << "\n  podprof captures --aggregator " << agg_addr << "\n  podprof stats "
          << result->capture_id << " --aggregator " << agg_addr << "\n  podprof stragglers "
          << result->capture_id << " --aggregator " << agg_addr
          << "\n  podprof kernel flash_attention --aggregator " << agg_addr
          << "\nstop them with\n  kill " << absl::StrJoin(pids, " ") << "\n";
    }
  }
  out.flush();
  return result->status == v1::CAPTURE_STATUS_COMPLETE ? 0 : kExitPartial;
}

}  // namespace podprof::cli
