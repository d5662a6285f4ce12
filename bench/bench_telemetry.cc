// Always-on telemetry's cost (#39), each against a baseline measured in the same run:
//  1. The agent: one simulated host (podprof-simhost) and its agent reporting to an aggregator,
//     with [telemetry] on and then off; the CPU the agent's telemetry thread (podprof-telem)
//     takes as a share of one core, the agent's whole CPU and RSS with and without it.
//  2. The aggregator: podprof-loadgen emulating N hosts of C chips (2,240 x 4, a v5p pod) with
//     heartbeats only, then also reporting telemetry every second: the aggregator's CPU per
//     second of each (as a share of one core), the reports accepted, and the store's growth:
//     the bytes its telemetry rows take (SQLite's dbstat) per row and so per day.
// Last line `telemetry_aggregator_cores=<cores the aggregator spent on telemetry>`; the issue's
// figures are < 1 core there and < 0.5% of a core (`agent_telemetry_core_percent`) per agent.
//
//   bench_telemetry [--agents 2240] [--chips 4] [--seconds 20] [--store-interval-s 10]
#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"
#include "proto/grpc_status.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "storage/sqlite.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;

constexpr char kUsage[] =
    "usage: bench_telemetry [--agents N (2240)] [--chips C (4)] [--seconds S (20)]\n"
    "                       [--store-interval-s I (10)]\n"
    "Measures the CPU and memory always-on telemetry costs one agent, and the CPU and store\n"
    "growth it costs an aggregator with N emulated hosts of C chips reporting every second,\n"
    "each against the same run without telemetry. Last line\n"
    "telemetry_aggregator_cores=<aggregator cores spent on telemetry>.\n";

struct Options {
  int agents = 2240, chips = 4, seconds = 20, store_interval_s = 10;
};

struct Daemon {
  Subprocess process;
  nlohmann::json ready;
};

// Starts `args` with --ready-file=<dir>/<name>.json and waits for it.
std::optional<Daemon> Start(std::vector<std::string> args, const std::string& dir,
                            const std::string& name) {
  const std::string ready = dir + "/" + name + ".json";
  args.push_back("--ready-file=" + ready);
  Subprocess p = bench::StartChild(std::move(args));
  if (!bench::WaitForFile(ready)) {
    std::printf("%s did not start\n", name.c_str());
    return std::nullopt;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the file is whole
  return Daemon{std::move(p), nlohmann::json::parse(ReadFile(ready).value_or("{}"))};
}

double CpuSeconds(pid_t pid) {
  return static_cast<double>(bench::CpuTicks(pid)) / sysconf(_SC_CLK_TCK);
}

struct AgentRun {
  double telem_core_percent = 0, agent_core_percent = 0;
  long rss_kb = 0;
};

// One simhost and its agent, reporting to `agg_port`, measured over `seconds` after a warm-up.
AgentRun MeasureAgent(const std::string& bin, const std::string& dir, int agg_port, bool telemetry,
                      int seconds) {
  const std::string conf = dir + (telemetry ? "/agent-on.toml" : "/agent-off.toml");
  std::ofstream(conf) << "[telemetry]\nenabled = " << (telemetry ? "true" : "false") << "\n";
  std::optional<Daemon> sim =
      Start({bin + "/podprof-simhost", "--profiler-port=0", "--metrics-port=0", "--hosts=1",
             "--generation=v5p", "--chips=4"},
            dir, telemetry ? "sim-on" : "sim-off");
  if (!sim) std::exit(1);
  std::optional<Daemon> agent =
      Start({bin + "/podprof-agent", "--insecure", "--config=" + conf, "--listen=127.0.0.1:0",
             absl::StrCat("--aggregator=127.0.0.1:", agg_port),
             absl::StrCat("--workload-profiler=127.0.0.1:", sim->ready["profiler_port"].get<int>()),
             absl::StrCat("--workload-metrics=127.0.0.1:", sim->ready["metrics_port"].get<int>()),
             "--profiler-service-listen=none", "--http-listen=off",
             telemetry ? "--host-name=bench-on" : "--host-name=bench-off"},
            dir, telemetry ? "agent-on" : "agent-off");
  if (!agent) std::exit(1);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const pid_t pid = agent->process.pid();
  const double cpu0 = CpuSeconds(pid);
  const int64_t telem0 = bench::ThreadCpuNs(pid, "podprof-telem");
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  AgentRun r;
  r.agent_core_percent = 100 * (CpuSeconds(pid) - cpu0) / seconds;
  r.telem_core_percent =
      100 * static_cast<double>(bench::ThreadCpuNs(pid, "podprof-telem") - telem0) / 1e9 / seconds;
  r.rss_kb = bench::StatusKb(pid, "VmRSS:");
  agent->process.Terminate(absl::Seconds(10));
  sim->process.Terminate(absl::Seconds(10));
  return r;
}

// Bytes the telemetry table takes in `db` (its pages, SQLite's dbstat), and its rows.
std::pair<int64_t, int64_t> TelemetryFootprint(const std::string& db) {
  absl::StatusOr<std::unique_ptr<storage::Connection>> c = storage::Connection::OpenReadOnly(db);
  if (!c.ok()) return {0, 0};
  int64_t bytes = 0, rows = 0;
  auto one = [&](const char* sql, int64_t* out) {
    absl::StatusOr<std::unique_ptr<storage::Statement>> q = storage::Statement::Prepare(**c, sql);
    if (!q.ok()) {
      std::printf("note: %s\n", q.status().ToString().c_str());
      return;
    }
    absl::StatusOr<bool> row = (*q)->Step();
    if (row.ok() && *row) *out = (*q)->Int(0);
  };
  one("SELECT SUM(pgsize) FROM dbstat WHERE name = 'telemetry'", &bytes);
  one("SELECT COUNT(*) FROM telemetry", &rows);
  return {bytes, rows};
}

struct FleetRun {
  double agg_cores = 0;
  int64_t reports = 0;
};

// podprof-loadgen with `agents` hosts against the aggregator at `port`, with or without
// telemetry, the aggregator's CPU measured over `seconds` once every host is registered.
FleetRun MeasureFleet(const std::string& bin, const std::string& dir, int port, pid_t agg_pid,
                      const Options& o, bool telemetry) {
  std::vector<std::string> args = {bin + "/podprof-loadgen",
                                   "--insecure",
                                   absl::StrCat("--aggregator=127.0.0.1:", port),
                                   absl::StrCat("--agents=", o.agents),
                                   absl::StrCat("--chips=", o.chips),
                                   absl::StrCat("--first-host=", telemetry ? 0 : o.agents),
                                   "--exit-after=1h"};
  if (telemetry) args.push_back("--telemetry-interval=1s");
  std::optional<Daemon> loadgen = Start(args, dir, telemetry ? "loadgen-on" : "loadgen-off");
  if (!loadgen) std::exit(1);
  // Registration of thousands of hosts takes a while; then a few seconds to settle.
  std::this_thread::sleep_for(std::chrono::seconds(std::max(10, o.agents / 200)));
  const double cpu0 = CpuSeconds(agg_pid);
  std::this_thread::sleep_for(std::chrono::seconds(o.seconds));
  FleetRun r;
  r.agg_cores = (CpuSeconds(agg_pid) - cpu0) / o.seconds;
  loadgen->process.Terminate(absl::Seconds(20));
  return r;
}

int Main(int argc, char** argv) {
  Options o;
  const int parsed = bench::ParseFlags(
      argc, argv, kUsage,
      {{"--agents", [&](const char* v) { o.agents = std::atoi(v); }},
       {"--chips", [&](const char* v) { o.chips = std::atoi(v); }},
       {"--seconds", [&](const char* v) { o.seconds = std::atoi(v); }},
       {"--store-interval-s", [&](const char* v) { o.store_interval_s = std::atoi(v); }}});
  if (parsed >= 0) return parsed;
  const std::string bin = fs::read_symlink("/proc/self/exe").parent_path().string();
  std::string dir = (fs::temp_directory_path() / "bench_telemetry_XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return 1;
  std::ofstream(dir + "/agg.toml") << "[agents]\nheartbeat_interval = \"10s\"\nprobe_interval = "
                                      "\"60s\"\n[telemetry]\nstore_interval = \""
                                   << o.store_interval_s << "s\"\n";
  std::optional<Daemon> agg =
      Start({bin + "/podprof-aggregator", "--insecure", "--config=" + dir + "/agg.toml",
             "--listen=127.0.0.1:0", "--http-listen=off", "--db=" + dir + "/pod.db"},
            dir, "agg");
  if (!agg) return 1;
  const int port = agg->ready["port"];

  const AgentRun off = MeasureAgent(bin, dir, port, false, o.seconds);
  const AgentRun on = MeasureAgent(bin, dir, port, true, o.seconds);
  std::printf("agent, one v5p host of 4 chips, %d s each:\n", o.seconds);
  std::printf("  telemetry off: agent %.3f%% of a core, RSS %ld kB\n", off.agent_core_percent,
              off.rss_kb);
  std::printf(
      "  telemetry on:  agent %.3f%% of a core (its podprof-telem thread %.3f%%), RSS %ld kB\n",
      on.agent_core_percent, on.telem_core_percent, on.rss_kb);
  std::printf("  added: %.3f%% of a core, %ld kB\n", on.agent_core_percent - off.agent_core_percent,
              on.rss_kb - off.rss_kb);

  const auto before = TelemetryFootprint(dir + "/pod.db");
  const FleetRun quiet = MeasureFleet(bin, dir, port, agg->process.pid(), o, false);
  const FleetRun busy = MeasureFleet(bin, dir, port, agg->process.pid(), o, true);
  std::this_thread::sleep_for(std::chrono::seconds(o.store_interval_s + 2));  // the last rows
  const auto after = TelemetryFootprint(dir + "/pod.db");
  const int64_t rows = after.second - before.second;
  const double per_row = rows > 0 ? static_cast<double>(after.first - before.first) / rows : 0;
  const double rows_per_day = 86400.0 / o.store_interval_s * o.agents * o.chips;
  std::printf("aggregator, %d hosts x %d chips, %d s each:\n", o.agents, o.chips, o.seconds);
  std::printf("  heartbeats only:        %.3f cores\n", quiet.agg_cores);
  std::printf("  + telemetry every 1 s:  %.3f cores (ratio %.2f)\n", busy.agg_cores,
              quiet.agg_cores > 0 ? busy.agg_cores / quiet.agg_cores : 0);
  std::printf(
      "store: %lld telemetry rows, %.1f bytes each; at a %d s store_interval %.0f rows "
      "a day, %.2f GB a day\n",
      static_cast<long long>(rows), per_row, o.store_interval_s, rows_per_day,
      rows_per_day * per_row / 1e9);
  std::printf("agent_telemetry_core_percent=%.4f\n", on.telem_core_percent);
  std::printf("telemetry_store_bytes_per_day=%.0f\n", rows_per_day * per_row);
  agg->process.Terminate(absl::Seconds(20));
  fs::remove_all(dir);
  std::printf("telemetry_aggregator_cores=%.3f\n", busy.agg_cores - quiet.agg_cores);
  return 0;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
