// What kernel insight costs on ingest: attributing every counter series to every kernel
// execution and finding the collective waits, against reading the same capture from its XSpace
// bytes (the baseline every capture pays). A simulated host (v5p, 4 chips, counters on) for a
// window of `--window-ms` (default 1000); prints both times, the events and counter samples,
// and `insight_over_read=<ratio>`.
//
//   bench_insight [--window-ms 1000] [--reps 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "insight/attribution.h"
#include "insight/collectives.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "trace/byte_source.h"
#include "trace/xspace_reader.h"

namespace podprof {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

constexpr char kUsage[] = "usage: bench_insight [--window-ms 1000] [--reps 5]\n";

int Main(int argc, char** argv) {
  int window_ms = 1000, reps = 5;
  if (const int stop =
          bench::ParseFlags(argc, argv, kUsage,
                            {{"--window-ms", [&](const char* v) { window_ms = std::atoi(v); }},
                             {"--reps", [&](const char* v) { reps = std::atoi(v); }}});
      stop >= 0) {
    return stop;
  }
  sim::PodConfig pod;
  pod.generation = "v5p";
  pod.chips = 4;
  pod.hosts = 2;
  auto model = sim::PodModel::Create(pod);
  if (!model.ok()) return 1;
  FakeClock truth(1'800'000'000'000'000'000);
  SkewedClock host(truth, 0, 0);
  sim::SessionWindow w;
  w.true_start_ns = truth.NowNs();
  w.true_end_ns = w.true_start_ns + int64_t{window_ms} * 1'000'000;
  w.counters = true;
  w.host_name = "bench";
  const std::string bytes = sim::BuildXSpace(*model, host, w).space.SerializeAsString();

  std::vector<double> read_s, insight_s;
  size_t events = 0, samples = 0, rows = 0;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    trace::MemorySource src(bytes);
    auto capture = trace::ReadXSpace(src);
    auto t1 = std::chrono::steady_clock::now();
    if (!capture.ok()) return 1;
    std::vector<int64_t> chips(capture->host.chips.size()), kernels(capture->kernels.size());
    for (size_t i = 0; i < chips.size(); ++i) chips[i] = static_cast<int64_t>(i);
    for (size_t i = 0; i < kernels.size(); ++i) kernels[i] = static_cast<int64_t>(i);
    auto attributed = insight::AttributeCounters(*capture);
    insight::CollectiveNames names;
    auto report = insight::AnalyzeCollectives(
        insight::CollectiveRuns(*capture, 0, chips, kernels, &names), names);
    auto t2 = std::chrono::steady_clock::now();
    read_s.push_back(Seconds(t1 - t0));
    insight_s.push_back(Seconds(t2 - t1));
    events = capture->EventCount();
    samples = 0;
    for (const auto& s : capture->counters) samples += s.value.size();
    rows = attributed.size() + report.waits.size();
  }
  std::sort(read_s.begin(), read_s.end());
  std::sort(insight_s.begin(), insight_s.end());
  const double read = read_s[read_s.size() / 2], ins = insight_s[insight_s.size() / 2];
  std::printf("simulated v5p host, 4 chips, %d ms: %zu events, %zu counter samples, %zu bytes\n",
              window_ms, events, samples, bytes.size());
  std::printf(
      "read %.1f ms, insight (attribution + collective waits) %.1f ms, %zu rows "
      "(medians of %d)\n",
      read * 1e3, ins * 1e3, rows, reps);
  std::printf("insight_over_read=%.2f\n", read > 0 ? ins / read : 0);
  return 0;
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
