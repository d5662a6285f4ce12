// `podprof demo` as a user runs it: the real binary starting real daemons on loopback.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/perfetto_trace.pb.h"
#include "tests/cli/run_podprof.h"
#include "tests/util/files.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
using testing::PodprofResult;
using testing::RunPodprof;

// Processes whose command line mentions `needle` (the demo's directory is on every child's).
int ProcessesMentioning(const std::string& needle) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (std::stoi(name) == getpid()) continue;
    // A process may end while we look: then it mentions nothing.
    std::string cmd = ReadFile(e.path().string() + "/cmdline").value_or("");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(needle) != std::string::npos) {
      // Zombies of our own children would be reaped by us; a defunct process has no cmdline.
      ++n;
    }
  }
  return n;
}

std::string ScratchDir(const std::string& name) {
  fs::path d = fs::path(::testing::TempDir()) / absl::StrCat("demo_", name, "_", getpid());
  fs::remove_all(d);
  return d.string();
}

TEST(DemoTest, JsonResultHasEveryHostsClockAndATraceAndNothingIsLeftRunning) {
  const std::string dir = ScratchDir("json");
  PodprofResult r = RunPodprof("demo --hosts 3 --duration 500ms --format json --dir " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);  // stdout is one JSON object
  EXPECT_EQ(j["state"], "complete");
  EXPECT_TRUE(absl::StartsWith(j["capture_id"].get<std::string>(), "cap-"));
  ASSERT_EQ(j["hosts"].size(), 3u);
  for (const auto& h : j["hosts"]) {
    EXPECT_EQ(h["status"], "complete") << h.dump();
    // The demo gives each host milliseconds of error; alignment recovers it to microseconds.
    const int64_t injected = h["injected_offset_ns"], correction = h["correction_ns"];
    EXPECT_EQ(h["error_ns"].get<int64_t>(), correction - injected);
    EXPECT_LT(std::llabs(h["error_ns"].get<int64_t>()), 50'000) << h.dump();
    EXPECT_GT(h["uncertainty_ns"].get<int64_t>(), 0);
  }
  EXPECT_NE(j["hosts"][0]["injected_offset_ns"], j["hosts"][1]["injected_offset_ns"]);
  ASSERT_FALSE(j["top_kernels"].empty());
  for (const auto& k : j["top_kernels"]) {
    EXPECT_FALSE(k["kernel"].get<std::string>().empty());
    // The verdict the table shows is in the JSON too.
    EXPECT_FALSE(k["insight"]["verdict"].get<std::string>().empty()) << k.dump();
    EXPECT_GT(k["count"].get<int64_t>(), 0);
    EXPECT_GE(k["p99_ps"].get<int64_t>(), k["p50_ps"].get<int64_t>());
    EXPECT_GT(k["total_ps"].get<int64_t>(), 0);
  }
  // The capture's web page, on the aggregator's own free port.
  const std::string page = j["web_url"];
  EXPECT_TRUE(absl::StartsWith(page, "http://127.0.0.1:")) << page;
  EXPECT_TRUE(absl::EndsWith(page, "/captures/" + j["capture_id"].get<std::string>())) << page;
  const std::string trace_path = j["trace_path"];
  ASSERT_TRUE(fs::exists(trace_path)) << trace_path;
  perfetto::protos::Trace trace;
  ASSERT_TRUE(trace.ParseFromString(testing::ReadTestFile(trace_path)));
  int processes = 0, counter_tracks = 0;
  for (const auto& p : trace.packet()) {
    processes += p.track_descriptor().has_process();
    counter_tracks += p.track_descriptor().has_counter();
  }
  EXPECT_EQ(processes, 3);
  EXPECT_GT(counter_tracks, 0) << "the simulated hosts' counters are missing";
  EXPECT_EQ(ProcessesMentioning(dir), 0) << "a child of the demo is still running";
  fs::remove_all(dir);
}

TEST(DemoTest, CtrlCStopsEveryChild) {
  const std::string dir = ScratchDir("sigint");
  SubprocessOptions o;
  o.argv = {std::string(PODPROF_BIN_DIR) + "/podprof",
            "demo",
            "--hosts",
            "2",
            "--duration",
            "30s",
            "--dir",
            dir};
  o.stdout_path = o.stderr_path = "/dev/null";
  absl::StatusOr<Subprocess> demo = Subprocess::Start(o);
  ASSERT_TRUE(demo.ok()) << demo.status();
  // Once both agents are up the pod is complete; then interrupt the demo mid-capture.
  for (int i = 0; i < 400 && !fs::exists(dir + "/agent-1.json"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(fs::exists(dir + "/agent-1.json"));
  // The demo itself, the aggregator, 2 simulated hosts and 2 agents.
  EXPECT_EQ(ProcessesMentioning(dir), 6);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_TRUE(demo->Signal(SIGINT).ok());
  const ExitStatus status = demo->Wait();
  ASSERT_TRUE(status.exited()) << status.ToString();
  EXPECT_EQ(status.code(), 128 + SIGINT);
  EXPECT_EQ(ProcessesMentioning(dir), 0) << "a child of the demo survived Ctrl-C";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace podprof
