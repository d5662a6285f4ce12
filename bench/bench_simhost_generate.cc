// How long podprof-simhost takes to produce the XSpace of a 2-second, 8-chip capture (about
// 100k kernel events): model the window, build the XSpace, serialize it. The baseline measured
// in the same run is protobuf's serialization alone of the same XSpace; the budget is 1 s.
// With --slices, that host is one of a job of one host per slice (its DCN ops written too).
// Then the pod-wide part of a step (every chip of a --pod-hosts pod, --slices slices), which a
// process emulating many hosts computes once per step: its time per step.
//
//   bench_simhost_generate [--generation v6e] [--chips 8] [--seconds 2] [--pod-hosts 256]
//                          [--slices 1]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"

namespace podprof::sim {
namespace {

constexpr char kUsage[] =
    "usage: bench_simhost_generate [--generation v6e] [--chips 8] [--seconds 2] "
    "[--pod-hosts 256] [--slices 1]\n";

// The pod-wide part of `steps` steps of a pod of `hosts` hosts of `chips` chips: us per step.
double PodStepUs(const PodConfig& host, int hosts, int chips, int steps, RealClock& clock) {
  PodConfig pod = host;
  pod.hosts = hosts;
  pod.chips = chips;
  auto model = PodModel::Create(pod);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return -1;
  }
  double best = 1e300;
  int64_t sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const int64_t t0 = clock.MonotonicNs();
    for (int s = 0; s < steps; ++s) sink += model->Schedule(1000 + s).collective_ends.back();
    best = std::min(best, (clock.MonotonicNs() - t0) / 1e3 / steps);
  }
  if (sink == 42) std::printf(" ");
  return best;
}

int Main(int argc, char** argv) {
  PodConfig pod;
  pod.chips = 8;
  double seconds = 2;
  int pod_hosts = 256;
  int slices_flag = 1;
  if (const int stop =
          bench::ParseFlags(argc, argv, kUsage,
                            {{"--generation", [&](const char* v) { pod.generation = v; }},
                             {"--chips", [&](const char* v) { pod.chips = std::atoi(v); }},
                             {"--seconds", [&](const char* v) { seconds = std::atof(v); }},
                             {"--pod-hosts", [&](const char* v) { pod_hosts = std::atoi(v); }},
                             {"--slices", [&](const char* v) { slices_flag = std::atoi(v); }}});
      stop >= 0) {
    return stop;
  }
  // With --slices, the generated host is one of a job of one host per slice.
  pod.hosts = slices_flag;
  pod.slices = slices_flag;
  auto model = PodModel::Create(pod);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  RealClock clock;
  SkewedClock host(clock, -37'500'000, 3.0);
  double best_generate = 1e300, best_serialize = 1e300;
  int64_t events = 0;
  size_t bytes = 0;
  for (int rep = 0; rep < 5; ++rep) {
    SessionWindow w;
    w.true_start_ns = clock.NowNs();
    w.true_end_ns = w.true_start_ns + static_cast<int64_t>(seconds * 1e9);
    w.host_name = "bench";
    const int64_t t0 = clock.MonotonicNs();
    BuildResult built = BuildXSpace(*model, host, w);
    std::string out = built.space.SerializeAsString();
    const int64_t t1 = clock.MonotonicNs();
    std::string again = built.space.SerializeAsString();
    const int64_t t2 = clock.MonotonicNs();
    best_generate = std::min(best_generate, (t1 - t0) / 1e9);
    best_serialize = std::min(best_serialize, (t2 - t1) / 1e9);
    events = built.kernel_events;
    bytes = out.size();
  }
  std::printf("window %.1f s, %d chips (%s): %lld kernel events, %.1f MB XSpace\n", seconds,
              model->chips(), model->generation().device_type.c_str(),
              static_cast<long long>(events), bytes / 1e6);
  std::printf("generate+serialize %.3f s, serialize alone %.3f s, ratio %.2fx\n", best_generate,
              best_serialize, best_generate / best_serialize);
  std::printf("events_per_second=%.0f\n", events / best_generate);
  std::printf("generate_over_budget=%.3f\n", best_generate / 1.0);
  PodConfig schedule_pod = pod;
  const double step_us = PodStepUs(schedule_pod, pod_hosts, 4, 200, clock);
  std::printf("pod step (%d hosts x 4 chips, %d slices): %.1f us\n", pod_hosts, slices_flag,
              step_us);
  std::printf("pod_step_us=%.1f\n", step_us);
  return 0;
}

}  // namespace
}  // namespace podprof::sim

int main(int argc, char** argv) { return podprof::sim::Main(argc, argv); }
