// podprof-agent's peak memory against the size of what its workload sends. A real agent
// captures, through a real aggregator, from a simulated host replaying a synthetic XSpace
// with one device plane of --plane-mb MB (240 by default: the plane that once took the agent
// to 564 MiB, over its unit's MemoryMax=512M); the baseline, in the same run, is the same
// capture of a --baseline-mb MB plane. Prints each run's agent peak RSS (VmHWM), the ratio of
// the large run's to the baseline's, and last `agent_peak_rss_mib=<large run>` against the
// bound docs/RELIABILITY.md states (256 MiB).
//
// With --snapshot-mb N it measures the flight recorder instead: the simulated host answers
// every snapshot with an N MB XSpace, the agent's recorder (a 2 s window) holds at most
// --max-bytes MiB, and after its ring has turned for 8 s `podprof snapshot` freezes it; the
// baseline is the same with 1 MB snapshots. The last line is then
// `recorder_peak_rss_mib=<the large run>`.
//
//   bench_agent_memory [--plane-mb 240] [--baseline-mb 8]
//   bench_agent_memory --snapshot-mb 14 [--max-bytes 1]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_util.h"
#include "bench/synthetic_xspace.h"
#include "launch/pod_launcher.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] =
    "usage: bench_agent_memory [--plane-mb 240] [--baseline-mb 8]\n"
    "       bench_agent_memory --snapshot-mb 14 [--max-bytes 1]\n";
constexpr double kBoundMib = 256;

struct Run {
  double plane_mb = 0;
  double peak_mib = 0;
  double ring_peak_mib = 0;  // the recorder's runs: the peak before the freeze
  bool captured = false;
};

// A pod of one host whose simulated workload replays a synthetic XSpace with a device plane of
// about `plane_mb` MB (`run->plane_mb` says how large it came out). `recorder_max_mib` > 0
// arms the agent's flight recorder with that budget.
std::unique_ptr<launch::Pod> StartPod(const std::string& bin, const std::string& dir, int plane_mb,
                                      int recorder_max_mib, Run* run) {
  fs::create_directories(dir);
  const std::string path = dir + "/replayed.xplane.pb";
  {
    // Three quarters of the synthetic bytes are the device plane's.
    const std::string bytes = bench::MakeSyntheticXSpace(std::max(1, plane_mb * 4 / 3), 1);
    run->plane_mb = bytes.size() * 0.75 / 1e6;
    std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
  }
  launch::PodOptions options;
  options.bin_dir = bin;
  options.dir = dir;
  options.simhost_flags = {"--replay", path};
  options.ready_timeout = absl::Seconds(120);
  if (recorder_max_mib > 0) {
    options.agent_config = "[recorder]\nenabled = true\nwindow = \"2s\"\nmax_slowdown = 0\n" +
                           std::string("max_bytes = ") +
                           std::to_string(int64_t{recorder_max_mib} << 20) + "\n";
  }
  auto pod = std::make_unique<launch::Pod>(options);
  if (absl::Status s = pod->Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(1);
  }
  return pod;
}

// Runs `podprof <command> <flags>` against the pod, then reads the agent's peak RSS and stops
// the pod.
void Finish(const std::string& bin, const std::string& dir, const std::string& command,
            const std::vector<std::string>& flags, launch::Pod* pod, Run* run) {
  std::vector<std::string> argv = {
      bin + "/podprof", command, "--aggregator", pod->aggregator_address(),
      "--timeout",      "10m",   "--top",        "1"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Subprocess cli = bench::StartChild(argv);
  run->captured = cli.Wait().success();
  run->peak_mib = bench::StatusKb(pod->agent_pid(0), "VmHWM:") / 1024.0;
  pod->StopAll();
  fs::remove_all(dir);
}

// One capture of a plane of about `plane_mb` MB; the agent's peak RSS after it.
Run CaptureOnce(const std::string& bin, const std::string& dir, int plane_mb) {
  Run run;
  std::unique_ptr<launch::Pod> pod = StartPod(bin, dir, plane_mb, 0, &run);
  Finish(bin, dir, "capture", {"--duration", "1s"}, pod.get(), &run);
  return run;
}

// The recorder's ring turned over `snapshot_mb` MB snapshots for 8 s, then frozen by a
// snapshot of its 2 s window; the agent's peak RSS after it. `captured`: the snapshot stored.
Run SnapshotOnce(const std::string& bin, const std::string& dir, int snapshot_mb, int max_mib) {
  Run run;
  std::unique_ptr<launch::Pod> pod = StartPod(bin, dir, snapshot_mb, max_mib, &run);
  // Real time on purpose: the ring turns on the agent's own clock, a rotation a second.
  std::this_thread::sleep_for(std::chrono::seconds(8));
  // The ring's turning alone, before the freeze.
  run.ring_peak_mib = bench::StatusKb(pod->agent_pid(0), "VmHWM:") / 1024.0;
  Finish(bin, dir, "snapshot", {"--window", "2s"}, pod.get(), &run);
  return run;
}

int RecorderMain(const std::string& bin, const std::string& dir, int snapshot_mb, int max_mib) {
  const Run base = SnapshotOnce(bin, dir + "/base", 1, max_mib);
  const Run big = SnapshotOnce(bin, dir + "/big", snapshot_mb, max_mib);
  for (const Run& r : {base, big}) {
    std::printf(
        "snapshots of %.1f MB, recorder.max_bytes %d MiB: snapshot %s, agent peak RSS %.1f MiB "
        "(%.1f MiB before the freeze)\n",
        r.plane_mb / 0.75, max_mib, r.captured ? "stored" : "refused", r.peak_mib, r.ring_peak_mib);
  }
  std::printf("peak_over_baseline=%.2f\n", big.peak_mib / base.peak_mib);
  std::printf("recorder_peak_rss_mib=%.1f\n", big.peak_mib);
  return 0;
}

int Main(int argc, char** argv) {
  int plane_mb = 240, baseline_mb = 8, snapshot_mb = 0, max_mib = 1;
  if (const int stop =
          bench::ParseFlags(argc, argv, kUsage,
                            {{"--plane-mb", [&](const char* v) { plane_mb = std::atoi(v); }},
                             {"--baseline-mb", [&](const char* v) { baseline_mb = std::atoi(v); }},
                             {"--snapshot-mb", [&](const char* v) { snapshot_mb = std::atoi(v); }},
                             {"--max-bytes", [&](const char* v) { max_mib = std::atoi(v); }}});
      stop >= 0) {
    return stop;
  }
  const std::string bin = fs::path(fs::read_symlink("/proc/self/exe")).parent_path().string();
  const std::string dir = "/tmp/bench_agent_memory_" + std::to_string(getpid());
  if (snapshot_mb > 0) return RecorderMain(bin, dir, snapshot_mb, max_mib);
  const Run base = CaptureOnce(bin, dir + "/base", baseline_mb);
  const Run big = CaptureOnce(bin, dir + "/big", plane_mb);
  for (const Run& r : {base, big}) {
    std::printf("device plane %.1f MB: capture %s, agent peak RSS %.1f MiB\n", r.plane_mb,
                r.captured ? "stored" : "FAILED", r.peak_mib);
  }
  std::printf("peak_over_baseline=%.2f (bound %.0f MiB)\n", big.peak_mib / base.peak_mib,
              kBoundMib);
  std::printf("agent_peak_rss_mib=%.1f\n", big.peak_mib);
  return big.captured && base.captured ? 0 : 1;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
