// Load: N agents (default 256), each with its simulated host, registered to one aggregator and
// heartbeating, with pod-wide captures back to back. Prints, per capture, its state, events and
// how long after its window all of it was stored; the aggregator's CPU and peak RSS; the ingest
// rate; and the latency of queries made during ingest against the same queries on an idle
// aggregator (`query_p99_over_idle`). Last line `load_captures_complete=<k>/<n>`.
// `--counters 0` runs the simulated hosts without hardware counters. `--sim-nice N` runs the
// simulated hosts and their agents at nice N: they stand for other machines, and at the
// aggregator's priority 512 of them converting at once starve all of its threads alike (see
// docs/RELIABILITY.md for what each setting shows on two cores).
//
//   bench_load [--hosts 256] [--captures 4] [--duration-ms 500] [--chips 2] [--counters 1]
//              [--sim-nice 0]
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "harness/capture_watch.h"
#include "nlohmann/json.hpp"
#include "proto/podprof_aggregator.grpc.pb.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;

// How long `call` takes, ms.
template <typename F>
double TimedMs(F call) {
  const auto t0 = std::chrono::steady_clock::now();
  call();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Latency of one ListCaptures and one GetKernelStats, ms.
double QueryMs(v1::Aggregator::Stub& stub, const std::string& capture) {
  return TimedMs([&] {
    {
      grpc::ClientContext ctx;
      v1::ListCapturesResponse r;
      stub.ListCaptures(&ctx, v1::ListCapturesRequest(), &r);
    }
    if (!capture.empty()) {
      grpc::ClientContext ctx;
      v1::GetKernelStatsRequest req;
      req.set_capture_id(capture);
      req.set_top_n(20);
      v1::GetKernelStatsResponse r;
      stub.GetKernelStats(&ctx, req, &r);
    }
  });
}

// Latency of one ListAgents, ms: an answer from memory that never touches the store, the
// reference that tells a slow store from a starved process.
double NoStoreMs(v1::Aggregator::Stub& stub) {
  return TimedMs([&] {
    grpc::ClientContext ctx;
    v1::ListAgentsResponse r;
    stub.ListAgents(&ctx, v1::ListAgentsRequest(), &r);
  });
}

// Prints capture `c`'s outcome from its last progress message: its state, hosts, events, when
// it was stored, and why hosts failed. Returns its events.
uint64_t ReportCapture(int c, const v1::CaptureProgress& last, int hosts, double after_s) {
  uint64_t events = 0;
  int ok = 0;
  std::map<std::string, int> reasons;
  for (const auto& h : last.summary().hosts()) {
    events += h.event_count();
    if (h.status() == v1::CAPTURE_STATUS_COMPLETE) {
      ++ok;
    } else {
      ++reasons[h.error_message().substr(0, 100)];
    }
  }
  std::printf("capture %d: %s, %d/%d hosts, %llu events, all stored %.2f s after the window\n", c,
              v1::CaptureStatus_Name(last.status()).c_str(), ok, hosts,
              static_cast<unsigned long long>(events), after_s);
  for (const auto& [why, n] : reasons) std::printf("  %d hosts failed: %s\n", n, why.c_str());
  if (last.summary().hosts_size() != hosts) {
    std::printf("  only %d of the %d agents were online to be captured\n",
                last.summary().hosts_size(), hosts);
  }
  return events;
}

// Query latency during ingest against idle, and against queries answered from memory.
void PrintQueryLatency(const std::vector<double>& busy, const std::vector<double>& busy_nostore,
                       const std::vector<double>& idle) {
  std::printf(
      "query latency during ingest p50 %.1f ms p99 %.1f ms (%zu queries); idle p50 %.1f "
      "ms p99 %.1f ms; query_p99_over_idle=%.1f\n",
      bench::Percentile(busy, 0.5), bench::Percentile(busy, 0.99), busy.size(),
      bench::Percentile(idle, 0.5), bench::Percentile(idle, 0.99),
      bench::Percentile(idle, 0.99) > 0
          ? bench::Percentile(busy, 0.99) / bench::Percentile(idle, 0.99)
          : 0);
  std::printf(
      "ListAgents (answered from memory, no store) during ingest p50 %.1f ms p99 %.1f ms; "
      "query_p99_over_nostore_p99=%.2f\n",
      bench::Percentile(busy_nostore, 0.5), bench::Percentile(busy_nostore, 0.99),
      bench::Percentile(busy_nostore, 0.99) > 0
          ? bench::Percentile(busy, 0.99) / bench::Percentile(busy_nostore, 0.99)
          : 0);
}

constexpr char kUsage[] =
    "usage: bench_load [--hosts 256] [--captures 4] [--duration-ms 500] [--chips 2]\n"
    "                  [--counters 1] [--sim-nice 0]\n";

int Main(int argc, char** argv) {
  int hosts = 256, captures = 4, duration_ms = 500, chips = 2;
  bool counters = true;
  int sim_nice = 0;
  if (const int stop =
          bench::ParseFlags(argc, argv, kUsage,
                            {{"--hosts", [&](const char* v) { hosts = std::atoi(v); }},
                             {"--captures", [&](const char* v) { captures = std::atoi(v); }},
                             {"--duration-ms", [&](const char* v) { duration_ms = std::atoi(v); }},
                             {"--chips", [&](const char* v) { chips = std::atoi(v); }},
                             {"--counters", [&](const char* v) { counters = std::atoi(v) != 0; }},
                             {"--sim-nice", [&](const char* v) { sim_nice = std::atoi(v); }}});
      stop >= 0) {
    return stop;
  }
  const std::string bin = fs::read_symlink("/proc/self/exe").parent_path().string();
  const std::string dir = "/tmp/bench_load_" + std::to_string(getpid());
  fs::create_directories(dir + "/nosys");
  std::ofstream(dir + "/empty.toml") << "";
  std::ofstream(dir + "/agg.toml") << "[agents]\nheartbeat_interval = \"2s\"\n"
                                      "probe_interval = \"5s\"\n[limits]\n"
                                      "max_capture_duration = \"10s\"\n";
  // The aggregator first: it is stopped last.
  std::vector<Subprocess> children;
  children.push_back(
      bench::StartChild({bin + "/podprof-aggregator", "--insecure", "--config=" + dir + "/agg.toml",
                         "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                         "--db=" + dir + "/pod.db", "--ready-file=" + dir + "/agg.json"}));
  const pid_t agg = children.front().pid();
  bench::WaitForFile(dir + "/agg.json");
  const int port = nlohmann::json::parse(ReadFile(dir + "/agg.json").value_or(""))["port"];
  RealClock clock;
  const int64_t t_start = clock.NowNs();
  for (int h = 0; h < hosts; ++h) {
    const std::string n = std::to_string(h);
    children.push_back(bench::StartChild(
        {bin + "/podprof-simhost", "--profiler-port=0", "--metrics-port=0",
         absl::StrCat("--chips=", chips), absl::StrCat("--hosts=", hosts), "--host-index=" + n,
         counters ? "--counters" : "--no-counters", "--ready-file=" + dir + "/sim" + n + ".json"},
        -1, sim_nice));
    bench::WaitForFile(dir + "/sim" + n + ".json");
    const int profiler =
        nlohmann::json::parse(ReadFile(dir + "/sim" + n + ".json").value_or(""))["profiler_port"];
    children.push_back(bench::StartChild(
        {bin + "/podprof-agent", "--insecure", "--config=" + dir + "/empty.toml",
         "--listen=127.0.0.1:0", "--advertise=127.0.0.1:0", "--http-listen=off",
         "--profiler-service-listen=none", "--host-name=host-" + n,
         "--sysfs-root=" + dir + "/nosys", absl::StrCat("--workload-profiler=127.0.0.1:", profiler),
         "--workload-metrics=none", absl::StrCat("--aggregator=127.0.0.1:", port),
         "--ready-file=" + dir + "/agent" + n + ".json"},
        -1, sim_nice));
    bench::WaitForFile(dir + "/agent" + n + ".json");
  }
  auto stub = v1::Aggregator::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  int online = 0;
  for (int i = 0; i < 600 && online < hosts; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    grpc::ClientContext ctx;
    v1::ListAgentsResponse resp;
    stub->ListAgents(&ctx, v1::ListAgentsRequest(), &resp);
    online = 0;
    for (const auto& a : resp.agents()) {
      online += a.state() == v1::AGENT_STATE_ONLINE && a.clock().probe_count() > 0;
    }
  }
  std::printf("%d hosts x %d chips started and registered in %.1f s (%d online and probed)\n",
              hosts, chips, (clock.NowNs() - t_start) / 1e9, online);

  const long ticks0 = bench::CpuTicks(agg);
  std::atomic<bool> ingesting{false}, stop{false};
  std::vector<double> busy, busy_nostore;
  std::string last_capture;
  std::mutex mu;
  std::thread querier([&] {
    while (!stop) {
      std::string c;
      {
        std::lock_guard<std::mutex> l(mu);
        c = last_capture;
      }
      if (ingesting) {
        double ms = QueryMs(*stub, c);
        double ref_ms = NoStoreMs(*stub);
        std::lock_guard<std::mutex> l(mu);
        busy.push_back(ms);
        busy_nostore.push_back(ref_ms);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  int complete = 0;
  uint64_t total_events = 0;
  double ingest_s = 0;
  for (int c = 0; c < captures; ++c) {
    v1::StartCaptureRequest req;
    req.set_duration_ms(duration_ms);
    auto window_end = [&](const v1::StartCaptureResponse& started) {
      return started.start_ns() + int64_t{duration_ms} * 1'000'000;
    };
    // Queries count as "during ingest" from the window's end until the capture is stored.
    absl::StatusOr<testing::WatchedCapture> watched = testing::StartAndWatchCapture(
        *stub, req, absl::Milliseconds(duration_ms) + absl::Minutes(10),
        [&](const v1::StartCaptureResponse& started, const v1::CaptureProgress&) {
          if (!ingesting && clock.NowNs() >= window_end(started)) ingesting = true;
        });
    ingesting = false;
    if (!watched.ok()) {
      std::printf("capture %d: %s\n", c, watched.status().ToString().c_str());
      continue;
    }
    const double after_s = (clock.NowNs() - window_end(watched->started)) / 1e9;
    total_events += ReportCapture(c, watched->last, hosts, after_s);
    complete += watched->last.status() == v1::CAPTURE_STATUS_COMPLETE;
    ingest_s += after_s;
    std::lock_guard<std::mutex> l(mu);
    last_capture = watched->started.capture_id();
  }
  stop = true;
  querier.join();
  // The same queries on the same data with nothing ingesting: the baseline.
  std::vector<double> idle;
  for (int i = 0; i < 20; ++i) idle.push_back(QueryMs(*stub, last_capture));
  const double cpu_s = (bench::CpuTicks(agg) - ticks0) / static_cast<double>(sysconf(_SC_CLK_TCK));
  std::printf("aggregator: %.1f CPU-seconds over the captures, RSS %ld MB now, peak %ld MB\n",
              cpu_s, bench::StatusKb(agg, "VmRSS:") / 1024, bench::StatusKb(agg, "VmHWM:") / 1024);
  std::printf("ingest: %.0f events/s (events over the time from window end to stored)\n",
              ingest_s > 0 ? total_events / ingest_s : 0);
  PrintQueryLatency(busy, busy_nostore, idle);
  Subprocess::TerminateAll(absl::MakeSpan(children), absl::Seconds(10));
  fs::remove_all(dir);
  std::printf("load_captures_complete=%d/%d\n", complete, captures);
  return complete == captures ? 0 : 1;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
