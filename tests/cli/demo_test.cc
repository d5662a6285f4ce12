// `podprof demo` as a user runs it: the real binary starting real daemons on loopback.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "harness/wait.h"
#include "nlohmann/json.hpp"
#include "proto/perfetto_trace.pb.h"
#include "tests/util/files.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"

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

// A line of /proc/PID/status ("VmHWM", "VmRSS") in kB; 0 when the process is gone.
int64_t StatusKb(const std::string& pid, const std::string& field) {
  const std::string text = ReadFile("/proc/" + pid + "/status").value_or("");
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(text, '\n', absl::SkipEmpty()))) {
    if (absl::StartsWith(line, field + ":")) return std::atoll(line.c_str() + field.size() + 1);
  }
  return 0;
}

// Pids of the processes running `binary` whose command line mentions `needle`.
std::vector<std::string> PidsOf(const std::string& binary, const std::string& needle) {
  std::vector<std::string> pids;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = ReadFile(e.path().string() + "/cmdline").value_or("");
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (absl::StrContains(cmd, "/" + binary + " ") && absl::StrContains(cmd, needle)) {
      pids.push_back(name);
    }
  }
  return pids;
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
  // Every agent served /metrics on a port of its own (all of them once tried 7103).
  std::set<int> metrics_ports;
  for (int i = 0; i < 3; ++i) {
    nlohmann::json ready = nlohmann::json::parse(
        ReadFile(dir + "/agent-" + std::to_string(i) + ".json").value_or("{}"), nullptr, false);
    ASSERT_TRUE(ready.contains("http_port")) << ready.dump();
    EXPECT_GT(ready["http_port"].get<int>(), 0) << "agent " << i << " has no /metrics";
    metrics_ports.insert(ready["http_port"].get<int>());
    EXPECT_FALSE(
        absl::StrContains(ReadFile(dir + "/agent-" + std::to_string(i) + ".log").value_or(""),
                          "Address already in use"));
  }
  EXPECT_EQ(metrics_ports.size(), 3u);
  fs::remove_all(dir);
}

// docs/CLI.md's kernel-profiling demo: 4 v7x hosts with their kernels' counters. Each simulated
// host used to build its 2-second session in memory (3.3 GB each, 13 GB in all on a 2-core
// machine), kept it, and answered after the agents' 60 s deadline: every host failed.
TEST(DemoTest, KernelProfilingDemoCompletesWithBoundedSimulatedHosts) {
  const std::string dir = ScratchDir("kp");
  SubprocessOptions o;
  o.argv = {std::string(PODPROF_BIN_DIR) + "/podprof",
            "demo",
            "--generation",
            "v7x",
            "--kernel-profiling",
            "--throttle",
            "1:0:0.3",
            "--format",
            "json",
            "--keep",
            "--dir",
            dir};
  o.stdout_path = dir + ".out";
  o.stderr_path = dir + ".err";
  const auto began = std::chrono::steady_clock::now();
  absl::StatusOr<Subprocess> demo = Subprocess::Start(o);
  ASSERT_OK(demo);
  // The simulated hosts' peak resident memory (VmHWM), read until the demo has printed.
  std::map<std::string, int64_t> peak_kb;
  std::optional<ExitStatus> status;
  while (!(status = demo->TryWait()).has_value()) {
    for (const std::string& pid : PidsOf("podprof-simhost", dir)) {
      peak_kb[pid] = std::max(peak_kb[pid], StatusKb(pid, "VmHWM"));
    }
    // The sampling period (VmHWM keeps the peak between samples), not a wait for something.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  const std::string out = ReadFile(dir + ".out").value_or(""),
                    err = ReadFile(dir + ".err").value_or("");
  ASSERT_TRUE(status->exited() && status->code() == 0) << status->ToString() << "\n" << err;
  nlohmann::json j = nlohmann::json::parse(out);
  std::vector<std::string> pids;
  for (const auto& pid : j["pids"]) pids.push_back(std::to_string(pid.get<int>()));
  // The simulated hosts after their session: what they hold now, then stop everything.
  std::map<std::string, int64_t> after_kb;
  for (const std::string& pid : PidsOf("podprof-simhost", dir)) {
    peak_kb[pid] = std::max(peak_kb[pid], StatusKb(pid, "VmHWM"));
    after_kb[pid] = StatusKb(pid, "VmRSS");
  }
  for (const std::string& pid : pids) kill(std::stoi(pid), SIGTERM);
  testing::WaitFor([&] { return ProcessesMentioning(dir) == 0; }, absl::Seconds(20),
                   absl::Milliseconds(100));

  EXPECT_EQ(j["state"], "complete") << out;
  ASSERT_EQ(j["hosts"].size(), 4u);
  for (const auto& h : j["hosts"]) EXPECT_EQ(h["status"], "complete") << h.dump();
  EXPECT_TRUE(j["options"].value("kernel_profiling", false)) << j["options"].dump();
  // The sampled counters reached the kernels: each compute kernel's units and clocks.
  int profiled = 0;
  for (const auto& k : j["top_kernels"]) {
    const nlohmann::json kp = k["insight"].value("kernel_profile", nlohmann::json::object());
    if (!kp.contains("units")) continue;
    ++profiled;
    EXPECT_GT(kp["units"]["mxu"].get<double>(), 0.3) << k["kernel"];
    // Host-1 chip 0 skips 30% of its clocks: 1 chip of 16, so about 2.6% pod-wide.
    EXPECT_GT(kp["throttled"].get<double>(), 0.01) << k["kernel"];
  }
  EXPECT_GE(profiled, 5) << "kernels with kernel-profiling counters";
  EXPECT_TRUE(fs::exists(j["trace_path"].get<std::string>()));
  // Starting the pod takes a few seconds; the capture about 12 s on 2 cores (it failed after
  // 66 s before).
  EXPECT_LT(seconds, 60) << err;
  ASSERT_EQ(peak_kb.size(), 4u);
  for (const auto& [pid, kb] : peak_kb) {
    EXPECT_GT(kb, 0);
    EXPECT_LT(kb, 256 * 1024) << "simulated host " << pid << " peaked at " << kb / 1024 << " MB";
  }
  for (const auto& [pid, kb] : after_kb) {
    EXPECT_LT(kb, 128 * 1024) << "simulated host " << pid << " holds " << kb / 1024
                              << " MB after its session";
  }
  EXPECT_EQ(ProcessesMentioning(dir), 0);
  fs::remove_all(dir);
  fs::remove(dir + ".out");
  fs::remove(dir + ".err");
}

// A capture past --timeout: the demo says which hosts were not done and what to try, exits 1,
// and prints nothing that needs data (no trace, no clock table, no queries to run).
TEST(DemoTest, TimeoutNamesTheHostsAndWhatToTryAndPrintsNoResult) {
  const std::string dir = ScratchDir("timeout");
  PodprofResult r = RunPodprof("demo --hosts 2 --duration 500ms --timeout 1ms --keep --dir " + dir);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "did not finish within 1.00 ms after its window")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "host-0 (")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "host-1 (")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--duration 250ms")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--hosts 1")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--timeout")) << r.err;
  for (const std::string& text : {r.out, r.err}) {
    EXPECT_FALSE(absl::StrContains(text, ".pftrace")) << text;
    EXPECT_FALSE(absl::StrContains(text, "merged timeline")) << text;
    EXPECT_FALSE(absl::StrContains(text, "podprof kernel")) << text;
    EXPECT_FALSE(absl::StrContains(text, "clock errors")) << text;
  }
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_NE(e.path().extension(), ".pftrace") << e.path();
  }
  // --keep leaves a pod only after a capture that has something to look at.
  testing::WaitFor([&] { return ProcessesMentioning(dir) == 0; }, absl::Seconds(10),
                   absl::Milliseconds(100));
  EXPECT_EQ(ProcessesMentioning(dir), 0) << "a child of a failed demo is still running";
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
  ASSERT_OK(demo);
  // Once both agents are up the pod is complete; then interrupt the demo mid-capture.
  ASSERT_TRUE(testing::WaitFor([&] { return fs::exists(dir + "/agent-1.json"); }, absl::Seconds(20),
                               absl::Milliseconds(50)));
  // The demo itself, the aggregator, 2 simulated hosts and 2 agents.
  EXPECT_EQ(ProcessesMentioning(dir), 6);
  // Mid-capture: the agents have their capture's folders (made when its request arrives).
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        std::error_code ec;
        int dirs = 0;
        for (auto it = fs::directory_iterator(dir + "/tmp", ec);
             !ec && it != fs::directory_iterator(); it.increment(ec)) {
          dirs += it->path().filename().string().rfind("podprof-capture-", 0) == 0;
        }
        return dirs == 2;
      },
      absl::Seconds(30)))
      << "the demo's capture never reached the agents";
  ASSERT_OK(demo->Signal(SIGINT));
  const ExitStatus status = demo->Wait();
  ASSERT_TRUE(status.exited()) << status.ToString();
  EXPECT_EQ(status.code(), 128 + SIGINT);
  EXPECT_EQ(ProcessesMentioning(dir), 0) << "a child of the demo survived Ctrl-C";
  fs::remove_all(dir);
}

// `demo --slices` (#56): a 2-slice job, two hosts a slice by default, with slice 0's link slow;
// the JSON carries the DCN view `podprof dcn --format json` gives, naming that link.
TEST(DemoTest, SlicesRunAMultiSliceJobAndShowItsDcnView) {
  const std::string dir = ScratchDir("slices");
  PodprofResult r = RunPodprof(
      "demo --slices 2 --duration 300ms --dcn-delay-at 0s:0:300 --format json --dir " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["hosts"].size(), 4u);
  const nlohmann::json& dcn = j["dcn"];
  ASSERT_TRUE(dcn.is_object()) << r.out.substr(0, 2000);
  EXPECT_EQ(dcn["capture"], j["capture_id"]);
  EXPECT_EQ(dcn["slices"], 2);
  EXPECT_GT(dcn["transfers"].get<int64_t>(), 0);
  EXPECT_TRUE(
      absl::StartsWith(dcn["verdict"].get<std::string>(), "the link slice 0 -> slice 1 is slow"))
      << dcn["verdict"];
  std::vector<std::string> named;
  for (const auto& l : dcn["links"]) {
    if (l["named"].get<bool>()) named.push_back(l["link"]);
  }
  EXPECT_EQ(named, std::vector<std::string>{"0->1"});
  EXPECT_EQ(ProcessesMentioning(dir), 0);
  fs::remove_all(dir);
}

// Multi-slice flags that cannot work are refused before anything starts, saying why.
TEST(DemoTest, SlicesRefuseHostsThatDoNotSplitAndFaultsOutsideTheJob) {
  const std::pair<std::string, std::string> cases[] = {
      {"--slices 4 --hosts 6", "6 hosts do not split evenly into 4 slices"},
      {"--slices 1", "--slices must be 2..64"},
      {"--slices 4 --dcn-delay-at 0s:4:300", "with SLICE in 0..3"},
      {"--slices 2 --slow-slice 1", "is not SLICE:FACTOR"},
      {"--slow-slice 1:1.3", "need --slices"},
      {"--slices 2 --recorder", "not --recorder"}};
  for (const auto& [flags, says] : cases) {
    const std::string dir = ScratchDir("slices_refused");
    PodprofResult r = RunPodprof("demo " + flags + " --dir " + dir);
    EXPECT_EQ(r.exit_code, 2) << flags;
    EXPECT_TRUE(absl::StrContains(r.err, says)) << flags << ": " << r.err;
    EXPECT_FALSE(fs::exists(fs::path(dir) / "podprof.db")) << flags;
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace podprof
