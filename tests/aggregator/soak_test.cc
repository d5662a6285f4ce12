// Soak: a 16-host pod captured every 10 s for 10 minutes (PODPROF_SOAK_SECONDS and
// PODPROF_SOAK_HOSTS change both), with retention on. Checks that the aggregator's and agents'
// RSS stay flat (the slope of a line fitted through a sample a minute over the second half of
// the run), that their thread and file-descriptor counts do not grow, and that the
// database stays under its retention size. Prints the figures. ctest label `soak`: not in the
// default run; `scripts/bench.sh` runs it.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "harness/capture_watch.h"
#include "harness/wait.h"
#include "launch/pod_launcher.h"
#include "nlohmann/json.hpp"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;
struct Usage {
  long rss_kb = 0;
  int threads = 0, fds = 0;
};

Usage UsageOf(pid_t pid) {
  Usage u;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kb = std::atol(line.c_str() + 6);
    if (line.rfind("Threads:", 0) == 0) u.threads = std::atoi(line.c_str() + 8);
  }
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ++u.fds;
  }
  return u;
}

// Least-squares slope of y over x.
double Slope(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double d = n * sxx - sx * sx;
  return d > 0 ? (n * sxy - sx * sy) / d : 0;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

TEST(SoakTest, SixteenHostsCapturedEveryTenSecondsStayFlat) {
  const int seconds = EnvInt("PODPROF_SOAK_SECONDS", 600);
  const int hosts = EnvInt("PODPROF_SOAK_HOSTS", 16);
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("soak_", getpid());
  fs::remove_all(dir);
  auto P = [&](const std::string& f) { return (dir / f).string(); };
  constexpr int64_t kRetentionBytes = 64 << 20;
  launch::PodOptions options;
  options.bin_dir = PODPROF_BIN_DIR;
  options.dir = dir.string();
  options.hosts = hosts;
  options.chips = 4;
  options.aggregator_config = absl::StrCat(
      "[agents]\nheartbeat_interval = \"1s\"\nprobe_interval = \"5s\"\n[retention]\nmax_bytes = ",
      kRetentionBytes, "\ninterval = \"5s\"\n");
  options.log_files = false;  // the daemons' output in the test's
  launch::Pod pod(options);
  ASSERT_OK(pod.Start());
  const pid_t agg_pid = pod.aggregator_pid(), agent_pid = pod.agent_pid(0);
  auto stub = v1::Aggregator::NewStub(
      grpc::CreateChannel(pod.aggregator_address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(
      testing::WaitFor([&] { return testing::ProbedAgents(*stub) == hosts; }, absl::Seconds(30)))
      << "the agents did not all register and get probed";

  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> minutes, agg_rss, agent_rss;
  Usage agg_first, agent_first;
  int complete = 0, total = 0;
  double next_sample = 60;
  while (elapsed_s() < seconds) {
    const double started = elapsed_s();
    absl::StatusOr<testing::WatchedCapture> c =
        testing::StartAndWatchCapture(*stub, 1000, absl::Minutes(2));
    if (c.ok()) {
      complete += c->last.status() == v1::CAPTURE_STATUS_COMPLETE;
    } else {
      std::printf("capture %d: %s\n", total, c.status().ToString().c_str());
    }
    ++total;
    // A sample a minute, the first after a minute of warm-up.
    if (elapsed_s() >= next_sample || (seconds < 120 && total == 1)) {
      const Usage a = UsageOf(agg_pid), g = UsageOf(agent_pid);
      if (minutes.empty()) {
        agg_first = a;
        agent_first = g;
      }
      minutes.push_back(elapsed_s() / 60);
      agg_rss.push_back(a.rss_kb / 1024.0);
      agent_rss.push_back(g.rss_kb / 1024.0);
      next_sample += 60;
    }
    const double wait = 10 - (elapsed_s() - started);
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
  const Usage agg_last = UsageOf(agg_pid), agent_last = UsageOf(agent_pid);
  minutes.push_back(elapsed_s() / 60);
  agg_rss.push_back(agg_last.rss_kb / 1024.0);
  agent_rss.push_back(agent_last.rss_kb / 1024.0);
  // Steady state: the second half of the run, once the database has filled up to its retention
  // size (and SQLite's page caches with it).
  const size_t half = minutes.size() / 2;
  auto tail = [&](const std::vector<double>& v) {
    return std::vector<double>(v.begin() + static_cast<long>(half), v.end());
  };
  const double agg_slope = Slope(tail(minutes), tail(agg_rss));
  const double agent_slope = Slope(tail(minutes), tail(agent_rss));
  const auto db_bytes = fs::file_size(P("podprof.db"));
  std::printf("soak: %d s, %d hosts, %d/%d captures complete\n", seconds, hosts, complete, total);
  std::printf(
      "aggregator RSS %.1f -> %.1f MB, steady-state slope %.2f MB/min; threads %d -> %d; fds %d -> "
      "%d\n",
      agg_rss.front(), agg_rss.back(), agg_slope, agg_first.threads, agg_last.threads,
      agg_first.fds, agg_last.fds);
  std::printf(
      "agent RSS %.1f -> %.1f MB, steady-state slope %.2f MB/min; threads %d -> %d; fds %d -> %d\n",
      agent_rss.front(), agent_rss.back(), agent_slope, agent_first.threads, agent_last.threads,
      agent_first.fds, agent_last.fds);
  std::printf("database %.1f MB (retention max_bytes %.0f MB)\n", db_bytes / 1e6,
              kRetentionBytes / 1e6);
  EXPECT_EQ(complete, total);
  EXPECT_LT(agg_slope, 1.0) << "aggregator RSS grows";
  EXPECT_LT(agent_slope, 0.5) << "agent RSS grows";
  EXPECT_LE(agg_last.threads, agg_first.threads + 2);
  EXPECT_LE(agent_last.threads, agent_first.threads + 2);
  EXPECT_LE(agg_last.fds, agg_first.fds + 4);
  EXPECT_LE(agent_last.fds, agent_first.fds + 4);
  // Retention keeps the used pages under max_bytes; the file may hold a few free pages more.
  EXPECT_LT(static_cast<int64_t>(db_bytes), kRetentionBytes * 5 / 4);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace podprof
