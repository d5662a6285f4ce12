// Counter series' two encodings (trace/columns.h) on the same series in the same run: bytes a
// sample, encode and decode speed, and the second encoding's size and encode time at each zstd
// level (what picked counter_v2::kLevel). Inputs: the real captures' numeric event stats (they
// hold no counter series; see tests/trace/counter_columns_test.cc), the simulator's v5p and
// v7x hosts asked for kernel profiling, and what bench_pod_scale stores of a host: a
// podprof-loadgen capture of --loadgen-ms (training steps, counters on), whose counter bytes a
// host-second are printed beside its timelines' in both timeline encodings (and the second at
// zstd level 3 against timeline_v2::kLevel), then as the stream sends them, a chip's series
// sharing its times (`loadgen_counter_bytes_v2_over_v1=<ratio>`).
// Ends with `counter_bytes_v2_over_v1=<ratio>` over all.
//
//   bench_counter_columns [--reps N] [--window-ms MS] [--loadgen-ms MS] [--pod-hosts N]
//                         [--levels 1,3,...]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/skewed_clock.h"
#include "loadgen/capture_source.h"
#include "loadgen/emulated_host.h"
#include "proto/xplane.pb.h"
#include "sim/kernel_profiling.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "trace/byte_source.h"
#include "trace/columns.h"
#include "trace/counter_v2.h"
#include "trace/timeline_v2.h"
#include "trace/xspace_reader.h"

namespace podprof {
namespace {

using trace::CounterSeries;

struct Input {
  std::string name;
  std::vector<CounterSeries> series;
  size_t samples = 0;
  // The capture's timelines as the store keeps them (loadgen input only): events, blob bytes in
  // the second timeline encoding and in the first.
  size_t events = 0, timeline_bytes = 0, timeline_v1_bytes = 0;
  // The same timelines' second encoding at zstd level 3 (the product writes timeline_v2::kLevel).
  size_t timeline_level3_bytes = 0;
  // Its counter blobs as the stream sent them (loadgen input only).
  size_t streamed_bytes = 0;
};

// Per plane, line and numeric stat, the events' start times and the stat's values; per line
// the events' durations (as tests/trace/counter_columns_test.cc reads the fixtures).
std::vector<CounterSeries> FixtureSeries(const std::string& path) {
  tensorflow::profiler::XSpace space;
  const absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok() || !space.ParseFromString(*bytes)) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::map<std::string, std::vector<std::pair<int64_t, double>>> samples;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      const std::string key = plane.name() + "/" + line.name() + "/";
      for (const auto& ev : line.events()) {
        const int64_t t = line.timestamp_ns() + ev.offset_ps() / 1000;
        samples[key + "duration_ps"].emplace_back(t, static_cast<double>(ev.duration_ps()));
        for (const auto& st : ev.stats()) {
          auto m = plane.stat_metadata().find(st.metadata_id());
          if (m == plane.stat_metadata().end()) continue;
          if (st.has_int64_value()) {
            samples[key + m->second.name()].emplace_back(t, static_cast<double>(st.int64_value()));
          } else if (st.has_uint64_value()) {
            samples[key + m->second.name()].emplace_back(t, static_cast<double>(st.uint64_value()));
          } else if (st.has_double_value()) {
            samples[key + m->second.name()].emplace_back(t, st.double_value());
          }
        }
      }
    }
  }
  std::vector<CounterSeries> out;
  for (auto& [key, points] : samples) {
    std::stable_sort(points.begin(), points.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    CounterSeries s;
    s.name = key;
    for (const auto& [t, v] : points) {
      s.time_ns.push_back(t);
      s.value.push_back(v);
    }
    out.push_back(std::move(s));
  }
  return out;
}

// The simulator's host of `generation` (2 chips) asked for kernel profiling (TensorCore
// counters every 5 us where the generation has it) and per-kernel counters.
std::vector<CounterSeries> SimulatedSeries(const char* generation, int64_t window_ns) {
  sim::PodConfig pod;
  pod.generation = generation;
  pod.chips = 2;
  pod.hosts = 1;
  pod.pod_seed = 11;
  absl::StatusOr<sim::PodModel> m = sim::PodModel::Create(pod);
  if (!m.ok()) {
    std::fprintf(stderr, "%s\n", m.status().ToString().c_str());
    std::exit(2);
  }
  FakeClock truth(1'800'000'000'000'000'000);
  SkewedClock host(truth, 0, 0);
  sim::SessionWindow w;
  w.true_start_ns = truth.NowNs();
  w.true_end_ns = w.true_start_ns + window_ns;
  w.host_name = "sim";
  w.counters = true;
  w.kernel_profiling.requested = true;
  w.kernel_profiling.tc = sim::DefaultTcSampling();
  w.kernel_profiling.tc.external_trigger = false;
  w.kernel_profiling.tc.interval_us = 5;
  const std::string bytes = sim::BuildXSpace(*m, host, w).space.SerializeAsString();
  trace::MemorySource src(bytes);
  absl::StatusOr<trace::HostCapture> c = trace::ReadXSpace(src);
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
    std::exit(2);
  }
  return std::move(c->counters);
}

// What bench_pod_scale stores of one host: podprof-loadgen's capture (loadgen::CaptureSource,
// its defaults: a v5p pod of `pod_hosts` hosts of 4 chips, pod seed 1, counters on, the
// clock errors of MakeHosts) of `window_ms` from host 0, its counter series as the stream's
// chunks carry them (StreamSeries' runs, 4 MiB chunks), and its timelines encoded as blocks.
Input LoadgenHost(int pod_hosts, int64_t window_ms) {
  sim::PodConfig pod;
  pod.generation = "v5p";
  pod.chips = 4;
  pod.hosts = pod_hosts;
  pod.pod_seed = 1;
  absl::StatusOr<std::unique_ptr<loadgen::CaptureSource>> source =
      loadgen::CaptureSource::Create(pod, /*counters=*/true);
  if (!source.ok()) {
    std::fprintf(stderr, "%s\n", source.status().ToString().c_str());
    std::exit(2);
  }
  FakeClock truth(1'800'000'000'000'000'000);
  std::vector<std::unique_ptr<loadgen::EmulatedHost>> hosts =
      loadgen::MakeHosts(0, 1, pod.pod_seed, 50'000'000, 50, truth);
  absl::StatusOr<loadgen::GeneratedCapture> c = (*source)->Generate(
      *hosts[0], hosts[0]->clock.NowNs(), window_ms, 4 << 20, false, /*keep_xspace=*/true);
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
    std::exit(2);
  }
  Input in;
  in.name = "loadgen";
  // Decoded as the aggregator does, a chip's series together: the stream's take their times
  // from another series of their chip where they can (trace/counter_v2.h's mode 4).
  trace::HostCapture received;
  for (const podprof::v1::CaptureChunk& chunk : c->chunks) {
    if (!chunk.has_counter_series()) continue;
    CounterSeries s;
    s.chip = chunk.counter_series().chip_ordinal();
    s.name = chunk.counter_series().name();
    s.encoded = chunk.counter_series().samples();
    in.streamed_bytes += s.encoded.size();
    received.counters.push_back(std::move(s));
  }
  if (absl::Status d = trace::DecodeEncodedSeries(&received); !d.ok()) {
    std::fprintf(stderr, "the stream's counter series do not decode: %s\n", d.ToString().c_str());
    std::exit(1);
  }
  for (CounterSeries& s : received.counters) {
    std::string().swap(s.encoded);
    in.series.push_back(std::move(s));
  }
  trace::MemorySource src(c->xspace);
  absl::StatusOr<trace::HostCapture> capture = trace::ReadXSpace(src);
  if (!capture.ok()) {
    std::fprintf(stderr, "%s\n", capture.status().ToString().c_str());
    std::exit(2);
  }
  const std::vector<int64_t> ids = trace::HostKernelNumbers(capture->kernels.size());
  for (const trace::EventBlock& b : capture->blocks) {
    in.events += b.size();
    in.timeline_bytes += trace::EncodeTimeline(b, ids).size();
    in.timeline_v1_bytes += trace::EncodeTimelineV1(b, ids, 0, b.size()).size();
    in.timeline_level3_bytes +=
        trace::timeline_v2::Encode(b, ids, 0, b.size(), trace::kMaxEventsPerByte, 3).size();
  }
  return in;
}

struct Result {
  size_t bytes = 0;
  double encode_s = 1e300, decode_s = 1e300;  // best of the reps
};

template <typename Encode>
Result Measure(const Input& in, int reps, Encode encode, bool decode) {
  RealClock clock;
  Result r;
  std::vector<std::string> blobs(in.series.size());
  for (int rep = 0; rep < reps; ++rep) {
    const int64_t t0 = clock.MonotonicNs();
    for (size_t i = 0; i < in.series.size(); ++i) blobs[i] = encode(in.series[i]);
    const int64_t t1 = clock.MonotonicNs();
    r.encode_s = std::min(r.encode_s, (t1 - t0) / 1e9);
    if (!decode) continue;
    CounterSeries out;
    for (size_t i = 0; i < in.series.size(); ++i) {
      if (!trace::DecodeCounters(blobs[i], &out).ok() ||
          out.value.size() != in.series[i].value.size()) {
        std::fprintf(stderr, "%s: series %zu does not decode\n", in.name.c_str(), i);
        std::exit(1);
      }
    }
    r.decode_s = std::min(r.decode_s, (clock.MonotonicNs() - t1) / 1e9);
  }
  for (const std::string& b : blobs) r.bytes += b.size();
  return r;
}

double PerSample(size_t bytes, const Input& in) {
  return static_cast<double>(bytes) / static_cast<double>(in.samples);
}

double MSamplesPerS(double s, const Input& in) { return in.samples / s / 1e6; }

}  // namespace
}  // namespace podprof

// Long: the flags, then each input's v1 and v2 figures and the level sweep, printed in the order
// the benchmark reports them, each a few lines over the same inputs.
int main(int argc, char** argv) {
  using namespace podprof;
  int reps = 5;
  int64_t window_ms = 20, loadgen_ms = 1000;
  int pod_hosts = 2240;
  std::vector<int> levels = {-5, -1, 1, 2, 3, 4, 5, 7, 9, 12, 19};
  const char* usage =
      "bench_counter_columns [--reps N] [--window-ms MS] [--loadgen-ms MS (1000)]\n"
      "                      [--pod-hosts N (2240)] [--levels 1,3,...]\n";
  const int stop = bench::ParseFlags(
      argc, argv, usage,
      {{"--reps", [&](const char* v) { reps = std::max(1, std::atoi(v)); }},
       {"--window-ms", [&](const char* v) { window_ms = std::max(1, std::atoi(v)); }},
       {"--loadgen-ms", [&](const char* v) { loadgen_ms = std::max(1, std::atoi(v)); }},
       {"--pod-hosts", [&](const char* v) { pod_hosts = std::max(1, std::atoi(v)); }},
       {"--levels", [&](const char* v) {
          levels.clear();
          for (absl::string_view l : absl::StrSplit(v, ',')) {
            int level;
            if (absl::SimpleAtoi(l, &level)) levels.push_back(level);
          }
        }}});
  if (stop >= 0) return stop;

  const std::string dir = PODPROF_FIXTURES_DIR;
  std::vector<Input> inputs;
  inputs.push_back({"tpu_v6e", FixtureSeries(dir + "/tpu_v6e_4chip_host_offload.xplane.pb")});
  inputs.push_back({"gpu_8xv100", FixtureSeries(dir + "/gpu_8xv100_34.83.195.179_6003.xplane.pb")});
  inputs.push_back({"sim_v5p", SimulatedSeries("v5p", window_ms * 1'000'000)});
  inputs.push_back({"sim_v7x", SimulatedSeries("v7x", window_ms * 1'000'000)});
  inputs.push_back(LoadgenHost(pod_hosts, loadgen_ms));

  size_t all_v1 = 0, all_v2 = 0;
  double encode_v1 = 0, encode_v2 = 0, decode_v1 = 0, decode_v2 = 0;
  std::map<int, std::pair<size_t, double>> by_level;           // level -> bytes, encode s over all
  std::pair<const Input*, std::pair<size_t, size_t>> loadgen;  // its v1 and v2 bytes
  for (Input& in : inputs) {
    for (const CounterSeries& s : in.series) in.samples += s.value.size();
    const Result v1 = Measure(
        in, reps,
        [](const CounterSeries& s) {
          return trace::EncodeCountersV1(s.time_ns.data(), s.value.data(), 0, s.value.size());
        },
        true);
    const Result v2 = Measure(
        in, reps, [](const CounterSeries& s) { return trace::EncodeCounters(s); }, true);
    all_v1 += v1.bytes;
    all_v2 += v2.bytes;
    if (in.events > 0) loadgen = {&in, {v1.bytes, v2.bytes}};
    encode_v1 += v1.encode_s, encode_v2 += v2.encode_s;
    decode_v1 += v1.decode_s, decode_v2 += v2.decode_s;
    std::printf(
        "%-11s %4zu series %8zu samples  bytes/sample v1 %.3f v2 %.3f (%.3f)  "
        "encode Msamples/s v1 %.1f v2 %.1f (%.2f)  decode Msamples/s v1 %.1f v2 %.1f "
        "(%.2f)\n",
        in.name.c_str(), in.series.size(), in.samples, PerSample(v1.bytes, in),
        PerSample(v2.bytes, in), static_cast<double>(v2.bytes) / v1.bytes,
        MSamplesPerS(v1.encode_s, in), MSamplesPerS(v2.encode_s, in), v1.encode_s / v2.encode_s,
        MSamplesPerS(v1.decode_s, in), MSamplesPerS(v2.decode_s, in), v1.decode_s / v2.decode_s);
    std::printf("  v2 by zstd level (bytes/sample, encode Msamples/s):");
    for (int level : levels) {
      const Result r = Measure(
          in, reps,
          [level](const CounterSeries& s) {
            return trace::counter_v2::Encode(s.time_ns.data(), s.value.data(), 0, s.value.size(),
                                             level);
          },
          false);
      by_level[level].first += r.bytes;
      by_level[level].second += r.encode_s;
      std::printf(" %d: %.3f %.1f;", level, PerSample(r.bytes, in), MSamplesPerS(r.encode_s, in));
    }
    std::printf("\n");
  }
  std::printf("all inputs, v2 by zstd level (bytes vs level %d, encode time vs level %d):\n",
              trace::counter_v2::kLevel, trace::counter_v2::kLevel);
  const auto& base = by_level.count(trace::counter_v2::kLevel) ? by_level[trace::counter_v2::kLevel]
                                                               : by_level.begin()->second;
  for (const auto& [level, r] : by_level) {
    std::printf("  level %3d: bytes %.3f time %.2f\n", level,
                static_cast<double>(r.first) / base.first, r.second / base.second);
  }
  std::printf("all inputs: bytes v2/v1 %.3f, encode time v2/v1 %.2f, decode time v2/v1 %.2f\n",
              static_cast<double>(all_v2) / all_v1, encode_v2 / encode_v1, decode_v2 / decode_v1);
  if (const Input* in = loadgen.first) {
    // What issue #58 asks of a host-second on disk: the counters with the timelines.
    const double host_s = loadgen_ms / 1000.0;
    const auto [v1, v2] = loadgen.second;
    // Both halves in their first encodings against both in their second.
    const double before = static_cast<double>(in->timeline_v1_bytes + v1);
    const double after = static_cast<double>(in->timeline_bytes + v2);
    std::printf(
        "loadgen host-second (%.1f s): %.0f events, timelines v1 %.0f bytes (%.3f an event), v2 "
        "%.0f (%.3f, %.3f of v1); %.0f counter samples, v1 %.0f bytes (%.3f a sample), v2 %.0f "
        "(%.3f); host v1 %.0f bytes, v2 %.0f (%.3f)\n",
        host_s, in->events / host_s, in->timeline_v1_bytes / host_s,
        static_cast<double>(in->timeline_v1_bytes) / in->events, in->timeline_bytes / host_s,
        static_cast<double>(in->timeline_bytes) / in->events,
        static_cast<double>(in->timeline_bytes) / in->timeline_v1_bytes, in->samples / host_s,
        v1 / host_s, PerSample(v1, *in), v2 / host_s, PerSample(v2, *in), before / host_s,
        after / host_s, after / before);
    std::printf("loadgen timelines at level 3: %.3f of level %d's bytes\n",
                static_cast<double>(in->timeline_level3_bytes) / in->timeline_bytes,
                trace::timeline_v2::kLevel);
    // What the stream sends and the store keeps: each series in its own blobs, as above, but
    // most taking their times from their chip's series with the most samples.
    const double streamed = static_cast<double>(in->timeline_bytes + in->streamed_bytes);
    std::printf(
        "loadgen host-second as streamed (times shared within a chip): counters %.0f bytes "
        "(%.3f a sample, %.3f of v2 alone); host %.0f bytes (%.3f of v1)\n",
        in->streamed_bytes / host_s, PerSample(in->streamed_bytes, *in),
        static_cast<double>(in->streamed_bytes) / v2, streamed / host_s, streamed / before);
    std::printf("loadgen_counter_bytes_v2_over_v1=%.4f\n", static_cast<double>(v2) / v1);
  }
  std::printf("counter_bytes_v2_over_v1=%.4f\n", static_cast<double>(all_v2) / all_v1);
  return 0;
}
