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
#include "harness/wait.h"
#include "launch/pod_launcher.h"
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

// Long: the benchmark's steps in the order it prints them, each a few lines over the same pod.
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
  launch::PodOptions options;
  options.bin_dir = bin;
  options.dir = dir;
  options.hosts = hosts;
  options.chips = chips;
  options.counters = counters;
  options.aggregator_config =
      "[agents]\nheartbeat_interval = \"2s\"\nprobe_interval = \"5s\"\n[limits]\n"
      "max_capture_duration = \"10s\"\n";
  options.agent_http_listen = "off";
  options.log_files = false;
  options.host.resize(hosts);
  for (launch::HostOptions& h : options.host) h.workload_metrics = "none";
  // --sim-nice for every host's two processes (they stand for other machines), not the
  // aggregator.
  options.adjust = [sim_nice](const std::string&, int host, SubprocessOptions* o) {
    if (host >= 0) o->nice = sim_nice;
  };
  launch::Pod pod(options);
  absl::Status started = pod.StartAggregator();
  RealClock clock;
  const int64_t t_start = clock.NowNs();
  for (int h = 0; h < hosts && started.ok(); ++h) started = pod.StartHost(h);
  if (!started.ok()) {
    std::fprintf(stderr, "%s\n", started.ToString().c_str());
    return 2;
  }
  const pid_t agg = pod.aggregator_pid();
  auto stub = v1::Aggregator::NewStub(
      grpc::CreateChannel(pod.aggregator_address(), grpc::InsecureChannelCredentials()));
  int online = 0;
  testing::WaitFor(
      [&] {
        online = testing::ProbedAgents(*stub);
        return online >= hosts;
      },
      absl::Minutes(2), absl::Milliseconds(200));
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
  pod.StopAll();
  fs::remove_all(dir);
  std::printf("load_captures_complete=%d/%d\n", complete, captures);
  return complete == captures ? 0 : 1;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
