// What kernel insight costs on ingest: attributing every counter series to every kernel
// execution and finding the collective waits, against reading the same capture from its XSpace
// bytes (the baseline every capture pays). A simulated host (v5p, 4 chips, counters on) for a
// window of `--window-ms` (default 1000); prints both times, the events and counter samples,
// and `insight_over_read=<ratio>`.
//
// --kernel-profiling (issue #17): a v7x host's kernel-profiling capture instead (4 chips, 1 s,
// the 32 TC_COMPUTATION + TC_MEMORY counters of both dies sampled every 1 us, Pallas scopes;
// bench/kernel_profiling_xspace.h writes its bytes), against what ingest runs per host for it:
// counter and scope attribution, kernel statistics, facts and verdicts. Best of `--reps`
// (default 3); the last line is `kernel_profiling_insight_over_read=<ratio>`, to stay <= 1.0.
// The capture is about 3.2 GB of bytes; the run peaks near 5.2 GB and takes a minute or two.
//
//   bench_insight [--window-ms 1000] [--reps 5]
//   bench_insight --kernel-profiling [--reps 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/kernel_profiling_xspace.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "insight/attribution.h"
#include "insight/collectives.h"
#include "insight/host_insight.h"
#include "insight/verdict.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "trace/byte_source.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof {
namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

constexpr char kUsage[] =
    "usage: bench_insight [--window-ms 1000] [--reps 5]\n"
    "       bench_insight --kernel-profiling [--reps 3]\n";

int SimulatedHostMain(int window_ms, int reps) {
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

// The capture read back is the one written: every chip with one series per counter, each of
// every sample, and the kernels and scopes the writer counted.
absl::Status CheckKernelProfilingCapture(const trace::HostCapture& capture,
                                         const bench::KernelProfilingXSpace& written, int chips) {
  if (static_cast<int>(capture.host.chips.size()) != chips) {
    return absl::InternalError(absl::StrCat(capture.host.chips.size(), " chips read"));
  }
  std::map<std::pair<int, std::string>, size_t> got;
  for (const trace::CounterSeries& s : capture.counters) got[{s.chip, s.name}] += s.value.size();
  if (got.size() != static_cast<size_t>(chips) * written.series.size()) {
    return absl::InternalError(
        absl::StrCat(got.size(), " series read, expected ", chips * written.series.size()));
  }
  for (int chip = 0; chip < chips; ++chip) {
    for (const std::string& name : written.series) {
      auto it = got.find({chip, name});
      if (it == got.end() || it->second != static_cast<size_t>(written.samples_per_series)) {
        return absl::InternalError(absl::StrCat("chip ", chip, " series ", name, ": ",
                                                it == got.end() ? 0 : it->second, " samples"));
      }
    }
  }
  int64_t executions = 0, scopes = 0;
  for (const trace::EventBlock& b : capture.blocks) {
    if (trace::IsKernelLine(b.kind)) executions += static_cast<int64_t>(b.size());
    if (b.kind == trace::LineKind::kScopes) scopes += static_cast<int64_t>(b.size());
  }
  if (executions != written.executions || scopes != written.scope_events) {
    return absl::InternalError(absl::StrCat(executions, " executions and ", scopes,
                                            " scopes read, expected ", written.executions, " and ",
                                            written.scope_events));
  }
  return absl::OkStatus();
}

// What ingest computes per host of a kernel-profiling capture (ingest/capture_ingest.cc
// AnalyseHost), and the verdicts on it: the number of rows, so nothing is optimised away.
size_t KernelProfilingInsight(const trace::HostCapture& capture) {
  const std::vector<insight::KernelCounter> counters = insight::AttributeCounters(capture);
  const std::vector<trace::KernelScope> scopes = insight::AttributeScopes(capture);
  const std::vector<trace::KernelStats> stats = trace::ComputeKernelStats(capture);
  const std::vector<insight::KernelFacts> facts = insight::HostFacts(capture, stats);
  size_t verdicts = 0;
  for (const insight::KernelFacts& f : facts) {
    verdicts += insight::Decide(f).bound != insight::Bound::kUnknown;
  }
  return counters.size() + scopes.size() + stats.size() + verdicts;
}

int KernelProfilingMain(int reps) {
  bench::KernelProfilingSpec spec;
  const auto b0 = std::chrono::steady_clock::now();
  absl::StatusOr<bench::KernelProfilingXSpace> space = bench::BuildKernelProfilingXSpace(spec);
  if (!space.ok()) {
    std::fprintf(stderr, "%s\n", space.status().ToString().c_str());
    return 1;
  }
  const double build_s = Seconds(std::chrono::steady_clock::now() - b0);
  double read = 0, ins = 0;
  size_t samples = 0, events = 0, rows = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    trace::MemorySource src(space->bytes);
    absl::StatusOr<trace::HostCapture> capture = trace::ReadXSpace(src);
    const auto t1 = std::chrono::steady_clock::now();
    if (!capture.ok()) {
      std::fprintf(stderr, "read: %s\n", capture.status().ToString().c_str());
      return 1;
    }
    if (r == 0) {
      if (absl::Status ok = CheckKernelProfilingCapture(*capture, *space, spec.chips); !ok.ok()) {
        std::fprintf(stderr, "the capture read back differs: %s\n", ok.ToString().c_str());
        return 1;
      }
    }
    rows = KernelProfilingInsight(*capture);
    const auto t2 = std::chrono::steady_clock::now();
    read = r == 0 ? Seconds(t1 - t0) : std::min(read, Seconds(t1 - t0));
    ins = r == 0 ? Seconds(t2 - t1) : std::min(ins, Seconds(t2 - t1));
    events = capture->EventCount();
    samples = 0;
    for (const trace::CounterSeries& s : capture->counters) samples += s.value.size();
  }
  const double mb = static_cast<double>(space->bytes.size()) / 1e6;
  std::printf(
      "v7x host, %d chips, %.0f ms, %zu counters/chip every %lld ns: %zu bytes (%.1f s to "
      "write), %zu kernel and scope events (%lld Pallas executions), %zu counter samples in "
      "%zu series of %lld (%s .. %s)\n",
      spec.chips, spec.window_ns / 1e6, space->series.size(),
      static_cast<long long>(spec.interval_ns), space->bytes.size(), build_s, events,
      static_cast<long long>(space->pallas_executions), samples,
      static_cast<size_t>(spec.chips) * space->series.size(),
      static_cast<long long>(space->samples_per_series), space->series.front().c_str(),
      space->series.back().c_str());
  std::printf(
      "read %.1f ms (%.0f MB/s, %.1f M samples/s), insight (counters + scopes + kernel stats "
      "+ facts + verdicts) %.1f ms (%.1f M samples/s), %zu rows (best of %d)\n",
      read * 1e3, mb / read, samples / read / 1e6, ins * 1e3, samples / ins / 1e6, rows, reps);
  std::printf("kernel_profiling_insight_over_read=%.2f\n", read > 0 ? ins / read : 0);
  return 0;
}

int Main(int argc, char** argv) {
  // --kernel-profiling takes no value: take it out before the `--name value` flags.
  bool kernel_profiling = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strcmp(argv[i], "--kernel-profiling") == 0) {
      kernel_profiling = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  int window_ms = 1000, reps = kernel_profiling ? 3 : 5;
  if (const int stop =
          bench::ParseFlags(static_cast<int>(args.size()), args.data(), kUsage,
                            {{"--window-ms", [&](const char* v) { window_ms = std::atoi(v); }},
                             {"--reps", [&](const char* v) { reps = std::atoi(v); }}});
      stop >= 0) {
    return stop;
  }
  if (reps < 1) reps = 1;
  return kernel_profiling ? KernelProfilingMain(reps) : SimulatedHostMain(window_ms, reps);
}

}  // namespace
}  // namespace podprof

int main(int argc, char** argv) { return podprof::Main(argc, argv); }
