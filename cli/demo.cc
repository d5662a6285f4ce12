#include "cli/demo.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "cli/exit_codes.h"
#include "cli/export_command.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"

namespace podprof::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The children of one demo, started from the thread that runs the demo (their death signal
// fires when it exits). Signals that would end the demo (Ctrl-C, SIGTERM, SIGHUP) are taken by
// a thread of their own, which stops every child before the demo exits, so no process or port
// outlives it; the children's death signal covers the demo dying some other way.
class Children {
 public:
  Children(bool keep, Clock& clock) : keep_(keep), clock_(clock) {
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
    if (keep_) {
      // --keep: the children run on, in sessions of their own, after the demo.
      absl::MutexLock lock(&mu_);
      for (Subprocess& c : children_) c.Release();
      return;
    }
    StopAll();
    pthread_kill(watcher_.native_handle(), SIGUSR2);
    watcher_.join();
  }

  // Starts `args` (args[0] is the binary) with stdout and stderr in `log`. Errors name the
  // binary and why it could not be started.
  absl::Status Spawn(const std::string& name, const std::vector<std::string>& args,
                     const std::string& log) {
    SubprocessOptions o;
    o.argv = args;
    o.stdout_path = log;
    o.stderr_path = log;
    o.clock = &clock_;
    if (keep_) {
      o.group = ProcessGroup::kNewSession;  // outlives the terminal session of the demo
      o.death_signal = 0;
    } else {
      o.group = ProcessGroup::kOwn;  // Ctrl-C goes to the demo, which stops the children in order
      o.death_signal = SIGTERM;      // the daemons drain if the demo dies some other way
    }
    // Under the lock, so that a signal taken meanwhile stops this child too.
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Subprocess> child = Subprocess::Start(o);
    if (!child.ok()) return child.status();
    children_.push_back(*std::move(child));
    names_.push_back(name);
    return absl::OkStatus();
  }

  // The name of a child that has exited, or "".
  std::string Exited() {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < children_.size(); ++i) {
      if (children_[i].TryWait().has_value()) return names_[i];
    }
    return "";
  }

  std::vector<pid_t> Pids() {
    absl::MutexLock lock(&mu_);
    std::vector<pid_t> out;
    for (const Subprocess& c : children_) out.push_back(c.pid());
    return out;
  }

  // SIGTERM to every child, agents first (they drain), then up to 10 s for them to exit and
  // SIGKILL for any that did not.
  void StopAll() {
    absl::MutexLock lock(&mu_);
    Subprocess::TerminateAll(absl::MakeSpan(children_), absl::Seconds(10));
  }

 private:
  const bool keep_;
  Clock& clock_;
  absl::Mutex mu_;
  std::vector<Subprocess> children_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::thread watcher_;
};

// Starts `args` as child `name` with its output in `log`, then waits up to 30 s for its ready
// file `ready`; fails naming the child and its log when it exits first.
absl::StatusOr<json> StartReady(Children& children, Clock& clock, const std::string& name,
                                const std::vector<std::string>& args, const std::string& log,
                                const std::string& ready) {
  if (absl::Status s = children.Spawn(name, args, log); !s.ok()) return s;
  const int64_t give_up = clock.MonotonicNs() + 30'000'000'000;
  while (true) {
    if (absl::StatusOr<std::string> text = ReadFile(ready); text.ok()) {
      json j = json::parse(*text, nullptr, false);
      if (!j.is_discarded()) return j;
    }
    const std::string gone = children.Exited();
    if (!gone.empty()) {
      return absl::InternalError(absl::StrCat(gone, " exited during start-up; see ", log));
    }
    if (clock.MonotonicNs() >= give_up) break;
    clock.SleepUntilNs(clock.NowNs() + 50'000'000, nullptr);
  }
  return absl::DeadlineExceededError(absl::StrCat(name, " did not start in 30 s; see ", log));
}

// The demo's pod in `dir`: the aggregator, then per host a simulated host and its agent, each
// started once the one before is ready. Each host's clock is wrong by a few milliseconds,
// drifts by some ppm, and every other host's device clock is off by up to 100 us: alignment
// has something to do. Returns the aggregator's address; fills `truth_files` (host name ->
// its simulated host's ground truth).
absl::StatusOr<std::string> StartPod(const DemoOptions& options, const std::string& bin,
                                     const std::string& dir, Children& children, Clock& clock,
                                     std::map<std::string, std::string>* truth_files,
                                     std::string* web_url) {
  absl::StatusOr<json> agg =
      StartReady(children, clock, "podprof-aggregator",
                 {bin + "/podprof-aggregator", "--insecure", "--config=" + dir + "/aggregator.toml",
                  "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                  "--db=" + dir + "/podprof.db", "--ready-file=" + dir + "/aggregator.json"},
                 dir + "/aggregator.log", dir + "/aggregator.json");
  if (!agg.ok()) return agg.status();
  const std::string agg_addr = absl::StrCat("127.0.0.1:", (*agg)["port"].get<int>());
  *web_url = absl::StrCat("http://127.0.0.1:", agg->value("http_port", 0), "/");
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> offset_ms(-5, 5), drift_ppm(-20, 20), device_us(-100, 100);
  for (int i = 0; i < options.hosts; ++i) {
    const std::string n = std::to_string(i), host = "host-" + n;
    const std::string off = absl::StrFormat("%.3fms", offset_ms(rng));
    const std::string drift = absl::StrFormat("%.2f", drift_ppm(rng));
    const std::string dev = i % 2 ? absl::StrFormat("%.1fus", device_us(rng)) : "0";
    // One epoch for the host's two processes: they read one drifting clock, as a real host's
    // workload and agent do.
    const std::string epoch = absl::StrCat("--clock-epoch-ns=", clock.NowNs());
    (*truth_files)[host] = dir + "/truth-" + n + ".json";
    std::vector<std::string> sim_args = {bin + "/podprof-simhost",
                                         "--profiler-port=0",
                                         "--metrics-port=0",
                                         "--generation=" + options.generation,
                                         absl::StrCat("--hosts=", options.hosts),
                                         "--host-index=" + n,
                                         absl::StrCat("--pod-seed=", options.seed),
                                         "--counters",
                                         "--host-name=" + host,
                                         "--clock-offset=" + off,
                                         "--clock-drift-ppm=" + drift,
                                         epoch,
                                         "--device-clock-offset=" + dev,
                                         "--truth-file=" + (*truth_files)[host],
                                         "--ready-file=" + dir + "/simhost-" + n + ".json"};
    if (!options.throttle.empty()) sim_args.push_back("--throttle=" + options.throttle);
    absl::StatusOr<json> sim =
        StartReady(children, clock, "podprof-simhost " + n, sim_args,
                   dir + "/simhost-" + n + ".log", dir + "/simhost-" + n + ".json");
    if (!sim.ok()) return sim.status();
    absl::StatusOr<json> agent = StartReady(
        children, clock, "podprof-agent " + n,
        {bin + "/podprof-agent", "--insecure", "--config=" + dir + "/agent.toml",
         // Each agent's /metrics on a free port: the default, 7103, fits one agent a machine.
         "--listen=127.0.0.1:0", "--advertise=127.0.0.1:0", "--profiler-service-listen=none",
         "--http-listen=127.0.0.1:0", "--host-name=" + host, "--sysfs-root=" + dir + "/sys",
         "--temp-dir=" + dir + "/tmp",
         absl::StrCat("--workload-profiler=127.0.0.1:", (*sim)["profiler_port"].get<int>()),
         absl::StrCat("--workload-metrics=127.0.0.1:", (*sim)["metrics_port"].get<int>()),
         "--aggregator=" + agg_addr, "--clock-offset=" + off, "--clock-drift-ppm=" + drift, epoch,
         "--ready-file=" + dir + "/agent-" + n + ".json"},
        dir + "/agent-" + n + ".log", dir + "/agent-" + n + ".json");
    if (!agent.ok()) return agent.status();
  }
  return agg_addr;
}

// Waits up to 30 s for `hosts` agents online, each with two probe bursts behind it (so its
// clock model has a drift).
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
    json t = json::parse(ReadFile(file->second).value_or(""), nullptr, false);
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

// What to try when the pod could not deliver a capture in time: it shares this machine's
// cores with the aggregator and the agents, and a host's work grows with the window, the
// chips and, under kernel profiling, the sampling rate.
std::string Advice(const DemoOptions& options, const std::string& dir) {
  std::string a =
      absl::StrCat("  the ", options.hosts,
                   " simulated hosts, their agents and the aggregator share this "
                   "machine's ",
                   std::max(1u, std::thread::hardware_concurrency()), " cores; what to try:\n");
  if (options.duration_ns >= 2'000'000) {
    absl::StrAppend(&a, "    a shorter window:  --duration ", options.duration_ns / 2'000'000,
                    "ms\n");
  }
  if (options.hosts > 1)
    absl::StrAppend(&a, "    fewer hosts:       --hosts ", options.hosts / 2, "\n");
  absl::StrAppend(&a, "    more time:         --timeout ",
                  std::max<int64_t>(1, options.timeout_ns / 1'000'000'000) * 2, "s (now ",
                  FormatDurationPs(options.timeout_ns * 1000), ")\n  each process's log is in ",
                  dir, "\n");
  return a;
}

// A capture that brought no data: each host's outcome (the table names every host's error),
// why, and what to try, and nothing that needs data (no trace, no clock table, no queries).
int WriteFailedCapture(const CaptureResult& result, const CaptureOptions& capture,
                       const DemoOptions& options, const std::string& dir, std::ostream& out,
                       std::ostream& err) {
  WriteCaptureResult(result, capture, {{"dir", dir}}, out);
  std::vector<std::string> failed;
  for (const auto& h : result.summary.hosts()) {
    if (h.status() != v1::CAPTURE_STATUS_COMPLETE) failed.push_back(h.host_name());
  }
  err << "podprof demo: capture " << result.capture_id << " " << CaptureStatusName(result.status)
      << ": no host delivered its data (failed: " << absl::StrJoin(failed, ", ") << ")\n"
      << Advice(options, dir);
  return kExitPartial;
}

// The merged timeline. Under kernel profiling only its first part: every kernel execution
// carries its counters (over a hundred per execution on v7x), and the whole window of 4 hosts
// is too much Perfetto trace to open in a browser or to write quickly on 2 cores.
constexpr int64_t kKernelProfilingTraceNs = 200'000'000;
absl::StatusOr<ExportResult> ExportTrace(AggregatorClient& client, const DemoOptions& options,
                                         const std::string& capture_id, const std::string& dir) {
  ExportOptions exp;
  exp.capture_id = capture_id;
  exp.path = (fs::path(dir) / (capture_id + ".pftrace")).string();
  if (options.kernel_profiling && options.duration_ns > kKernelProfilingTraceNs) {
    exp.from_ns = 0;
    exp.to_ns = kKernelProfilingTraceNs;
  }
  return RunExport(client, exp);
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
  RealClock real_clock;
  Clock& clock = options.clock != nullptr ? *options.clock : real_clock;
  Children children(options.keep, clock);
  std::map<std::string, std::string> truth_files;
  std::string web;
  absl::StatusOr<std::string> pod =
      StartPod(options, bin, dir, children, clock, &truth_files, &web);
  if (!pod.ok()) return fail(std::string(pod.status().message()));
  const std::string agg_addr = *pod;
  say(absl::StrCat("podprof demo: aggregator on ", agg_addr, ", ", options.hosts, " simulated TPU ",
                   options.generation, " hosts with agents; files in ", dir));

  // Every agent registered, with two probe bursts behind it (so its clock model has a drift).
  AggregatorTarget target;
  target.address = agg_addr;
  AggregatorClient client(target, clock);
  if (absl::Status s = WaitForAgents(client, clock, options.hosts, dir); !s.ok()) {
    return fail(std::string(s.message()));
  }

  CaptureOptions capture;
  capture.duration_ns = options.duration_ns;
  capture.labels = {{"source", "demo"}};
  capture.format = options.format;
  capture.display = options.display;
  capture.top = 10;
  if (options.kernel_profiling) {
    // XProf's standard kernel profiling: each execution's own counts, as a TPU7x writes them
    // (a `counters_<kernel>` line per execution), not periodic samples.
    capture.profiling.set_kernel_profiling(true);
  }
  capture.timeout_ns = options.timeout_ns;
  absl::StatusOr<CaptureResult> result = RunCapture(client, capture, out, err);
  // Without data there is nothing for --keep to keep: the children stop as they otherwise do.
  if (!result.ok() && absl::IsDeadlineExceeded(result.status())) {
    children.StopAll();
    err << "podprof demo: " << result.status().message() << "\n" << Advice(options, dir);
    return kExitPartial;
  }
  if (!result.ok()) return fail(std::string(result.status().message()));
  if (result->status != v1::CAPTURE_STATUS_COMPLETE &&
      result->status != v1::CAPTURE_STATUS_PARTIAL) {
    children.StopAll();
    return WriteFailedCapture(*result, capture, options, dir, out, err);
  }

  AddClockErrors(*result, truth_files, &capture);
  absl::StatusOr<ExportResult> trace = ExportTrace(client, options, result->capture_id, dir);
  const std::string page = web + "captures/" + result->capture_id;
  json extra = {{"trace_path", trace.ok() ? trace->path : ""}, {"dir", dir}, {"web_url", page}};
  if (options.keep) {
    extra["aggregator"] = agg_addr;
    extra["pids"] = children.Pids();
  }
  WriteCaptureResult(*result, capture, extra, out);
  if (table) {
    WriteClockTable(*result, capture, out);
    if (trace.ok()) {
      out << "\nmerged timeline: " << trace->path << " (" << FormatBytes(trace->bytes) << ")\n"
          << "  open it at https://ui.perfetto.dev\n";
      if (options.kernel_profiling && options.duration_ns > kKernelProfilingTraceNs) {
        out << "  its first " << FormatDurationPs(kKernelProfilingTraceNs * 1000)
            << " only, each kernel execution with its counters (with --keep, podprof export "
            << result->capture_id << " writes the whole window)\n";
      }
    } else {
      out << "\nno trace written: " << trace.status().message() << "\n";
    }
    out << "\nweb page: " << page
        << (options.keep ? "" : "  (it stops with the demo: add --keep to browse it)") << "\n";
    if (options.keep) {
      std::vector<std::string> pids;
      for (pid_t pid : children.Pids()) pids.push_back(absl::StrCat(pid));
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
