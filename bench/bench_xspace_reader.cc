// The streaming XSpace reader (producing kernel statistics) against protobuf's generated full
// parse with an arena, on the same bytes in the same run: the real TPU capture and a large
// synthetic XSpace. Prints MB/s and events/s for both, the peak RSS of a separate process
// reading the large file against what the reader kept, and last `reader_speedup=<ratio>`.
//
//   bench_xspace_reader [--synthetic-mb N] [--fixture PATH]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/synthetic_xspace.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "google/protobuf/arena.h"
#include "proto/xplane.pb.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof {
namespace {

using tensorflow::profiler::XSpace;

struct Timing {
  double seconds = 0;
  size_t events = 0;
};

// Best of `reps` (the least disturbed run on a noisy machine).
template <typename F>
Timing Best(int reps, F f) {
  RealClock clock;
  Timing best;
  best.seconds = 1e300;
  for (int i = 0; i < reps; ++i) {
    int64_t t0 = clock.MonotonicNs();
    size_t events = f();
    double s = static_cast<double>(clock.MonotonicNs() - t0) / 1e9;
    if (s < best.seconds) best = {s, events};
  }
  return best;
}

size_t RunReader(const std::string& bytes) {
  trace::MemorySource source(bytes);
  auto capture = trace::ReadXSpace(source);
  if (!capture.ok()) {
    std::fprintf(stderr, "reader failed: %s\n", std::string(capture.status().message()).c_str());
    std::exit(1);
  }
  auto stats = trace::RollUpByKernel(trace::ComputeKernelStats(*capture));
  // The statistics are part of the work measured; keep them observable.
  return capture->EventCount() + stats.size() * 0;
}

size_t RunFullParse(const std::string& bytes) {
  google::protobuf::Arena arena;
  XSpace* space = google::protobuf::Arena::CreateMessage<XSpace>(&arena);
  if (!space->ParseFromString(bytes)) {
    std::fprintf(stderr, "protobuf parse failed\n");
    std::exit(1);
  }
  size_t events = 0;
  for (const auto& p : space->planes()) {
    for (const auto& l : p.lines()) events += l.events_size();
  }
  return events;
}

double Compare(const char* label, const std::string& bytes, int reps) {
  Timing reader = Best(reps, [&] { return RunReader(bytes); });
  Timing full = Best(reps, [&] { return RunFullParse(bytes); });
  const double mb = static_cast<double>(bytes.size()) / 1e6;
  std::printf(
      "%-10s %8.1f MB  reader:     %8.1f MB/s %12.0f kept events/s (%zu events, stats included)\n",
      label, mb, mb / reader.seconds, reader.events / reader.seconds, reader.events);
  std::printf(
      "%-10s %8.1f MB  full parse: %8.1f MB/s %12.0f events/s      (%zu events, all planes)\n",
      label, mb, mb / full.seconds, full.events / full.seconds, full.events);
  double speedup = full.seconds / reader.seconds;
  std::printf("%-10s speedup %.2fx\n", label, speedup);
  return speedup;
}

// Child mode: read a file with the streaming reader and report peak RSS and kept bytes.
int RssProbe(const std::string& path) {
  auto capture = trace::ReadXSpaceFile(path);
  if (!capture.ok()) {
    std::fprintf(stderr, "%s\n", std::string(capture.status().message()).c_str());
    return 1;
  }
  auto stats = trace::ComputeKernelStats(*capture);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::printf("%ld %zu %zu\n", ru.ru_maxrss * 1024L, capture->KeptBytes(), stats.size());
  return 0;
}

constexpr char kUsage[] = "usage: bench_xspace_reader [--synthetic-mb 256] [--fixture PATH]\n";

int Main(int argc, char** argv) {
  int synthetic_mb = 256;
  std::string fixture = std::string(PODPROF_FIXTURES_DIR) + "/tpu_v6e_4chip_host_offload.xplane.pb";
  // The benchmark runs itself as a child to measure one reader's peak RSS alone.
  if (argc == 3 && std::string(argv[1]) == "--rss-probe") return RssProbe(argv[2]);
  if (const int stop = bench::ParseFlags(
          argc, argv, kUsage,
          {{"--synthetic-mb", [&](const char* v) { synthetic_mb = std::atoi(v); }},
           {"--fixture", [&](const char* v) { fixture = v; }}});
      stop >= 0) {
    return stop;
  }
  absl::StatusOr<std::string> real = ReadFile(fixture);
  if (!real.ok()) {
    std::fprintf(stderr, "cannot read the fixture: %s\n", real.status().ToString().c_str());
    return 1;
  }
  Compare("tpu-fixture", *real, 20);

  std::string big = bench::MakeSyntheticXSpace(synthetic_mb, 8);
  double speedup = Compare("synthetic", big, 3);

  // Peak RSS of a fresh process reading the large file (this one holds the bytes in memory).
  std::string path = "/tmp/bench_xspace_reader_" + std::to_string(getpid()) + ".xplane.pb";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(big.data(), static_cast<std::streamsize>(big.size()));
  }
  const double file_mb = static_cast<double>(big.size()) / 1e6;
  big.clear();
  big.shrink_to_fit();
  std::string cmd = std::string("'") + argv[0] + "' --rss-probe '" + path + "'";
  FILE* p = popen(cmd.c_str(), "r");
  long rss = 0;
  size_t kept = 0, rows = 0;
  if (p == nullptr || std::fscanf(p, "%ld %zu %zu", &rss, &kept, &rows) != 3) {
    std::fprintf(stderr, "rss probe failed\n");
    if (p) pclose(p);
    std::remove(path.c_str());
    return 1;
  }
  pclose(p);
  std::remove(path.c_str());
  std::printf("synthetic  file %.1f MB, kept %.1f MB, peak RSS %.1f MB, rss_over_kept=%.2f\n",
              file_mb, static_cast<double>(kept) / 1e6, static_cast<double>(rss) / 1e6,
              static_cast<double>(rss) / static_cast<double>(kept));
  std::printf("reader_speedup=%.2f\n", speedup);
  return 0;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
