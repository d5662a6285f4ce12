// podprof-agent's overhead: CPU and memory of an idle agent process (next to a simulated
// workload), and the cost of converting a capture into chunks against the streaming reader
// alone on the same file, measured in the same run.
//
//   bench_agent_overhead [--idle-seconds 10] [--capture-seconds 10]
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/skewed_clock.h"
#include "common/subprocess.h"
#include "launch/pod_launcher.h"
#include "nlohmann/json.hpp"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "stream/capture_encoder.h"
#include "trace/xspace_reader.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
using bench::CpuTicks;

// Serializes every chunk, as the gRPC stream would.
class SerializingSink final : public stream::ChunkSink {
 public:
  bool Write(const podprof::v1::CaptureChunk& c) override {
    buffer_.clear();
    c.SerializeToString(&buffer_);
    bytes += buffer_.size();
    return true;
  }
  uint64_t bytes = 0;

 private:
  std::string buffer_;
};

constexpr char kUsage[] =
    "usage: bench_agent_overhead [--idle-seconds 10] [--capture-seconds 10]\n";

// Long: the benchmark's two measurements in the order it prints them.
int Main(int argc, char** argv) {
  double idle_seconds = 10, capture_seconds = 10;
  if (const int stop = bench::ParseFlags(
          argc, argv, kUsage,
          {{"--idle-seconds", [&](const char* v) { idle_seconds = std::atof(v); }},
           {"--capture-seconds", [&](const char* v) { capture_seconds = std::atof(v); }}});
      stop >= 0) {
    return stop;
  }
  const std::string bin = fs::path(fs::read_symlink("/proc/self/exe")).parent_path().string();
  const std::string dir = "/tmp/bench_agent_" + std::to_string(getpid());
  RealClock clock;

  // 1. Idle agent beside an idle simulated workload, registered nowhere.
  launch::PodOptions options;
  options.bin_dir = bin;
  options.dir = dir;
  options.aggregator = false;
  options.log_files = false;
  launch::Pod idle_pod(options);
  if (absl::Status s = idle_pod.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const pid_t agent = idle_pod.agent_pid(0);
  // Settling on purpose: the agent's first moments (its threads starting, its first metric
  // reads) are start-up, not the idle cost being measured.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const long ticks0 = CpuTicks(agent);
  const int64_t t0 = clock.MonotonicNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(idle_seconds * 1000)));
  const double wall = (clock.MonotonicNs() - t0) / 1e9;
  const double cpu = (CpuTicks(agent) - ticks0) / static_cast<double>(sysconf(_SC_CLK_TCK));
  const long rss = bench::StatusKb(agent, "VmRSS:");
  idle_pod.StopAll();
  std::printf("idle agent over %.1f s: cpu %.3f%% of one core, rss %.1f MB\n", wall,
              100 * cpu / wall, rss / 1024.0);
  std::printf("idle_cpu_percent=%.3f (target < 0.2)\nidle_rss_mb=%.1f (target < 40)\n",
              100 * cpu / wall, rss / 1024.0);

  // 2. Conversion of a large capture: reader alone vs reader + chunks, same file.
  sim::PodConfig pod;
  pod.chips = 8;
  auto model = sim::PodModel::Create(pod);
  SkewedClock host(clock, 0, 0);
  sim::SessionWindow w;
  w.true_start_ns = clock.NowNs();
  w.true_end_ns = w.true_start_ns + static_cast<int64_t>(capture_seconds * 1e9);
  std::string path = dir + "/capture.xplane.pb";
  {
    std::ofstream out(path, std::ios::binary);
    sim::BuildXSpace(*model, host, w).space.SerializeToOstream(&out);
  }
  const double mb = fs::file_size(path) / 1e6;
  double best_read = 1e300, best_convert = 1e300;
  uint64_t events = 0, chunk_bytes = 0;
  for (int rep = 0; rep < 3; ++rep) {
    int64_t a = clock.MonotonicNs();
    auto c1 = trace::ReadXSpaceFile(path);
    int64_t b = clock.MonotonicNs();
    auto c2 = trace::ReadXSpaceFile(path);
    SerializingSink sink;
    stream::ChunkCounts counts;
    stream::StreamCapture(*c2, {}, {}, 4 << 20, &sink, &counts).IgnoreError();
    int64_t c = clock.MonotonicNs();
    best_read = std::min(best_read, (b - a) / 1e9);
    best_convert = std::min(best_convert, (c - b) / 1e9);
    events = counts.events;
    chunk_bytes = sink.bytes;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::printf(
      "capture %.1f MB, %llu events: reader %.1f MB/s, reader+chunks %.1f MB/s, "
      "%.1f MB of chunks, peak rss %.1f MB\n",
      mb, static_cast<unsigned long long>(events), mb / best_read, mb / best_convert,
      chunk_bytes / 1e6, ru.ru_maxrss / 1024.0);
  std::printf("conversion_over_reader=%.2f\n", best_convert / best_read);
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
