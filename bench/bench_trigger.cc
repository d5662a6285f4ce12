// From a trigger to a stored snapshot (#39): one podprof-aggregator and one podprof-loadgen
// emulating N hosts (64) of 4 chips that report telemetry every second and, from T on, a 1.3x
// longer step. The step-time trigger fires; the benchmark follows the snapshot it took to its
// end and prints how long after the trigger instant the snapshot of every host was stored
// (`trigger_to_stored_s`, the figure: <= 3 s at 64 hosts), and how far the window's end
// (the instant every host's window ends on, on the pod's clock) lies from that instant
// (`window_end_after_trigger_ms`, the issue's: within 1 ms). The baseline of the same run: a
// manual snapshot of the same hosts (`podprof snapshot`'s path), from its request to stored.
//
//   bench_trigger [--agents 64] [--chips 4] [--window-ms 5000]
#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"
#include "proto/grpc_status.h"
#include "proto/podprof_aggregator.grpc.pb.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;

constexpr char kUsage[] =
    "usage: bench_trigger [--agents N (64)] [--chips C (4)] [--window-ms W (5000)]\n"
    "Emulates N hosts reporting telemetry whose step time rises 1.3x, and measures the\n"
    "step-time trigger's snapshot: last line trigger_to_stored_s=<seconds>.\n";

// Follows capture `id` to its end; returns the clock's time then (0 if it did not end well),
// and sets its status and how many hosts its summary lists.
int64_t StoredAt(v1::Aggregator::Stub& stub, const std::string& id, Clock& clock,
                 std::string* status, int* hosts = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock.NowNs(), 120'000'000'000));
  v1::WatchCaptureRequest w;
  w.set_capture_id(id);
  auto reader = stub.WatchCapture(&ctx, w);
  v1::CaptureProgress p, last;
  while (reader->Read(&p)) last = p;
  const int64_t at = clock.NowNs();
  reader->Finish().ok();
  *status = v1::CaptureStatus_Name(last.status());
  if (hosts != nullptr) *hosts = last.summary().hosts_size();
  return last.done() ? at : 0;
}

// The first capture labelled trigger=`trigger`, waiting up to `wait_s`.
std::optional<v1::CaptureSummary> WaitForTriggered(v1::Aggregator::Stub& stub,
                                                   const std::string& trigger, int wait_s) {
  for (int i = 0; i < wait_s * 20; ++i) {
    grpc::ClientContext ctx;
    v1::ListCapturesRequest req;
    (*req.mutable_label_selector())["trigger"] = trigger;
    v1::ListCapturesResponse resp;
    if (stub.ListCaptures(&ctx, req, &resp).ok() && resp.captures_size() > 0) {
      return resp.captures(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

// A manual snapshot of every host (`podprof snapshot`'s request) of `window_ms`: seconds from its
// request to stored, or -1 when it was refused.
double ManualSnapshotS(v1::Aggregator::Stub& stub, Clock& clock, int window_ms,
                       std::string* status) {
  v1::StartCaptureRequest manual;
  manual.set_snapshot(true);
  manual.set_duration_ms(static_cast<uint64_t>(window_ms));
  manual.mutable_cause()->set_trigger("manual");
  v1::StartCaptureResponse started;
  const int64_t asked = clock.NowNs();
  grpc::ClientContext ctx;
  if (!stub.StartCapture(&ctx, manual, &started).ok()) {
    std::printf("the manual snapshot was refused\n");
    return -1;
  }
  const int64_t stored = StoredAt(stub, started.capture_id(), clock, status);
  return static_cast<double>(stored - asked) / 1e9;
}

int Main(int argc, char** argv) {
  int agents = 64, chips = 4, window_ms = 5000;
  const int parsed =
      bench::ParseFlags(argc, argv, kUsage,
                        {{"--agents", [&](const char* v) { agents = std::atoi(v); }},
                         {"--chips", [&](const char* v) { chips = std::atoi(v); }},
                         {"--window-ms", [&](const char* v) { window_ms = std::atoi(v); }}});
  if (parsed >= 0) return parsed;
  const std::string bin = fs::read_symlink("/proc/self/exe").parent_path().string();
  std::string dir = (fs::temp_directory_path() / "bench_trigger_XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) return 1;
  std::ofstream(dir + "/agg.toml") << "[agents]\nheartbeat_interval = \"2s\"\nprobe_interval = "
                                      "\"2s\"\n[telemetry]\nstore_interval = \"1s\"\n[triggers]\n"
                                      "recent = \"3s\"\nbaseline = \"6s\"\nwindow = \""
                                   << window_ms << "ms\"\n";
  RealClock clock;
  Subprocess agg =
      bench::StartChild({bin + "/podprof-aggregator", "--insecure", "--config=" + dir + "/agg.toml",
                         "--listen=127.0.0.1:0", "--http-listen=off", "--db=" + dir + "/pod.db",
                         "--ready-file=" + dir + "/agg.json"});
  if (!bench::WaitForFile(dir + "/agg.json")) return 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int port = nlohmann::json::parse(ReadFile(dir + "/agg.json").value_or("{}"))["port"];
  // The slowdown comes once the hosts have registered and a baseline has been reported.
  Subprocess loadgen = bench::StartChild(
      {bin + "/podprof-loadgen", "--insecure", absl::StrCat("--aggregator=127.0.0.1:", port),
       absl::StrCat("--agents=", agents), absl::StrCat("--chips=", chips), "--exit-after=1h",
       "--telemetry-interval=1s", "--telemetry-slowdown-at=16s:1.3",
       "--ready-file=" + dir + "/loadgen.json"});
  if (!bench::WaitForFile(dir + "/loadgen.json")) return 1;
  auto stub = v1::Aggregator::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));

  // The baseline: a manual snapshot of the same hosts, from its request to stored.
  std::this_thread::sleep_for(std::chrono::seconds(8));
  std::string manual_status;
  const double manual_s = ManualSnapshotS(*stub, clock, window_ms, &manual_status);
  if (manual_s < 0) return 1;

  const std::optional<v1::CaptureSummary> snap = WaitForTriggered(*stub, "step_time", 60);
  if (!snap) {
    std::printf("the step-time trigger did not fire\n");
    return 1;
  }
  std::string status;
  const long agg_cpu0 = bench::CpuTicks(agg.pid()), gen_cpu0 = bench::CpuTicks(loadgen.pid());
  int hosts = 0;
  const int64_t stored = StoredAt(*stub, snap->capture_id(), clock, &status, &hosts);
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double agg_cpu = static_cast<double>(bench::CpuTicks(agg.pid()) - agg_cpu0) / tick;
  const double gen_cpu = static_cast<double>(bench::CpuTicks(loadgen.pid()) - gen_cpu0) / tick;
  const int64_t fired = snap->cause().trigger_ns();
  if (fired == 0) {
    std::printf("the snapshot's cause has no trigger_ns\n");
    return 1;
  }
  const double trigger_s = static_cast<double>(stored - fired) / 1e9;
  std::printf("%d hosts x %d chips, %d ms windows:\n", agents, chips, window_ms);
  std::printf("  manual snapshot, request to stored:  %.3f s (%s)\n", manual_s,
              manual_status.c_str());
  std::printf("  step-time trigger to stored:         %.3f s (%s, %d hosts; ratio %.2f)\n",
              trigger_s, status.c_str(), hosts, manual_s > 0 ? trigger_s / manual_s : 0);
  std::printf("  reason: %s\n", snap->labels().at("reason").c_str());
  // Where the time went: the emulated hosts producing their windows (on a pod, each agent on its
  // own host), and the aggregator receiving, aligning and storing them.
  std::printf(
      "  while it was stored: podprof-loadgen %.2f CPU-s (every host's window), "
      "aggregator %.2f CPU-s\n",
      gen_cpu, agg_cpu);
  std::printf("window_end_after_trigger_ms=%.3f\n",
              static_cast<double>(snap->end_ns() - fired) / 1e6);
  loadgen.Terminate(absl::Seconds(10));
  agg.Terminate(absl::Seconds(10));
  fs::remove_all(dir);
  std::printf("trigger_to_stored_s=%.3f\n", trigger_s);
  return stored > 0 ? 0 : 1;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
