// podprof-agent's peak memory against the size of what its workload sends. A real agent
// captures, through a real aggregator, from a simulated host replaying a synthetic XSpace
// with one device plane of --plane-mb MB (240 by default: the plane that once took the agent
// to 564 MiB, over its unit's MemoryMax=512M); the baseline, in the same run, is the same
// capture of a --baseline-mb MB plane. Prints each run's agent peak RSS (VmHWM), the ratio of
// the large run's to the baseline's, and last `agent_peak_rss_mib=<large run>` against the
// bound docs/RELIABILITY.md states (256 MiB).
//
//   bench_agent_memory [--plane-mb 240] [--baseline-mb 8]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "bench/bench_util.h"
#include "bench/synthetic_xspace.h"
#include "launch/pod_launcher.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;

constexpr char kUsage[] = "usage: bench_agent_memory [--plane-mb 240] [--baseline-mb 8]\n";
constexpr double kBoundMib = 256;

struct Run {
  double plane_mb = 0;
  double peak_mib = 0;
  bool captured = false;
};

// One capture of a plane of about `plane_mb` MB; the agent's peak RSS after it.
Run CaptureOnce(const std::string& bin, const std::string& dir, int plane_mb) {
  Run run;
  fs::create_directories(dir);
  const std::string path = dir + "/replayed.xplane.pb";
  {
    // Three quarters of the synthetic bytes are the device plane's.
    const std::string bytes = bench::MakeSyntheticXSpace(plane_mb * 4 / 3, 1);
    run.plane_mb = bytes.size() * 0.75 / 1e6;
    std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
  }
  launch::PodOptions options;
  options.bin_dir = bin;
  options.dir = dir;
  options.simhost_flags = {"--replay", path};
  options.ready_timeout = absl::Seconds(120);
  launch::Pod pod(options);
  if (absl::Status s = pod.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(1);
  }
  Subprocess cli =
      bench::StartChild({bin + "/podprof", "capture", "--aggregator", pod.aggregator_address(),
                         "--duration", "1s", "--timeout", "10m", "--top", "1"});
  run.captured = cli.Wait().success();
  run.peak_mib = bench::StatusKb(pod.agent_pid(0), "VmHWM:") / 1024.0;
  pod.StopAll();
  fs::remove_all(dir);
  return run;
}

int Main(int argc, char** argv) {
  int plane_mb = 240, baseline_mb = 8;
  if (const int stop = bench::ParseFlags(
          argc, argv, kUsage,
          {{"--plane-mb", [&](const char* v) { plane_mb = std::atoi(v); }},
           {"--baseline-mb", [&](const char* v) { baseline_mb = std::atoi(v); }}});
      stop >= 0) {
    return stop;
  }
  const std::string bin = fs::path(fs::read_symlink("/proc/self/exe")).parent_path().string();
  const std::string dir = "/tmp/bench_agent_memory_" + std::to_string(getpid());
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
