// Counter series' encodings (trace/columns.h, trace/counter_v2.h): every series of the real
// captures and of the simulator's v5p and v7x kernel-profiling captures round-trips bit for bit,
// the edge cases of doubles and int64 times too; blobs of the first encoding still read; damaged
// and hostile blobs of the second are DataLoss; chunks stay within MaxCounterBytesWithin's limit.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/skewed_clock.h"
#include "common/zstd_codec.h"
#include "gtest/gtest.h"
#include "loadgen/capture_source.h"
#include "loadgen/emulated_host.h"
#include "proto/xplane.pb.h"
#include "sim/kernel_profiling.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "tests/util/files.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/byte_source.h"
#include "trace/columns.h"
#include "trace/counter_v2.h"
#include "trace/varint.h"
#include "trace/xspace_reader.h"

namespace podprof::trace {
namespace {

using ::podprof::testing::FixturePath;

constexpr uint64_t kMaxReceived = 64 << 20;  // what the capture decoder allows a blob

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}

double FromBits(uint64_t b) {
  double v;
  std::memcpy(&v, &b, 8);
  return v;
}

CounterSeries Series(std::vector<int64_t> t, std::vector<double> v) {
  CounterSeries s;
  s.time_ns = std::move(t);
  s.value = std::move(v);
  return s;
}

// The first encoding as the previous release's agents and aggregators wrote it, from the format
// alone (not the product's encoder): the count, then per sample the zigzag time delta and the
// value's bytes, one zstd frame at level 1 with the first 10 bytes in a block of their own.
std::string V1Blob(const CounterSeries& s) {
  std::string raw;
  PutVarint(s.value.size(), &raw);
  int64_t prev = 0;
  for (size_t i = 0; i < s.value.size(); ++i) {
    PutVarint(ZigZag(s.time_ns[i] - prev), &raw);
    prev = s.time_ns[i];
    raw.append(reinterpret_cast<const char*>(&s.value[i]), 8);
  }
  return ZstdCompress(raw, 1, 10);
}

// Both columns equal bit for bit (NaN payloads and -0.0 included); the first difference named.
::testing::AssertionResult SameSamples(const CounterSeries& want, const CounterSeries& got) {
  if (want.value.size() != got.value.size() || got.time_ns.size() != got.value.size()) {
    return ::testing::AssertionFailure() << got.time_ns.size() << " times and " << got.value.size()
                                         << " values, want " << want.value.size();
  }
  for (size_t i = 0; i < want.value.size(); ++i) {
    if (want.time_ns[i] != got.time_ns[i] || Bits(want.value[i]) != Bits(got.value[i])) {
      return ::testing::AssertionFailure()
             << "sample " << i << ": (" << got.time_ns[i] << ", 0x" << std::hex
             << Bits(got.value[i]) << std::dec << "), want (" << want.time_ns[i] << ", 0x"
             << std::hex << Bits(want.value[i]) << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// `s` encoded, checked, counted and decoded as the agent, aggregator and readers do.
::testing::AssertionResult RoundTrips(const CounterSeries& s) {
  const std::string blob = EncodeCounters(s);
  if (blob.empty()) return ::testing::AssertionFailure() << "no encoding";
  if (absl::Status c = CheckCounters(blob, kMaxReceived); !c.ok()) {
    return ::testing::AssertionFailure() << "CheckCounters: " << c;
  }
  absl::StatusOr<uint64_t> n = EncodedCount(blob, "series");
  if (!n.ok() || *n != s.value.size()) {
    return ::testing::AssertionFailure() << "EncodedCount " << n.status() << " " << n.value_or(0);
  }
  CounterSeries got;
  got.time_ns = {1, 2, 3};  // replaced, not appended to
  if (absl::Status d = DecodeCounters(blob, &got, kMaxReceived); !d.ok()) {
    return ::testing::AssertionFailure() << "DecodeCounters: " << d;
  }
  return SameSamples(s, got);
}

// A capture's counter series as the production reader gives them.
std::vector<CounterSeries> ReadSeries(const std::string& bytes) {
  MemorySource src(bytes);
  absl::StatusOr<HostCapture> c = ReadXSpace(src);
  EXPECT_OK(c);
  return c.ok() ? std::move(c->counters) : std::vector<CounterSeries>();
}

// The real captures hold no counter series (the reader finds none in them), so their numeric
// event stats stand in for them: per plane, line and stat, the events' start times (ns) and the
// stat's values, and per line the events' durations (ps). Real irregular times and real values:
// what is least like a grid.
std::vector<CounterSeries> FixtureSeries(const char* name) {
  tensorflow::profiler::XSpace space;
  EXPECT_TRUE(space.ParseFromString(::podprof::testing::ReadTestFile(FixturePath(name))));
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
          double v;
          if (st.has_int64_value()) {
            v = static_cast<double>(st.int64_value());
          } else if (st.has_uint64_value()) {
            v = static_cast<double>(st.uint64_value());
          } else if (st.has_double_value()) {
            v = st.double_value();
          } else {
            continue;
          }
          samples[key + m->second.name()].emplace_back(t, v);
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

// The simulator's host of `generation` asked for kernel profiling (TensorCore counters sampled
// every 5 us, where the generation has it: v7x) and the per-kernel counters, over 20 ms.
std::vector<CounterSeries> SimulatedSeries(const char* generation) {
  sim::PodConfig pod;
  pod.generation = generation;
  pod.chips = 2;
  pod.hosts = 1;
  pod.pod_seed = 11;
  absl::StatusOr<sim::PodModel> m = sim::PodModel::Create(pod);
  EXPECT_OK(m);
  if (!m.ok()) return {};
  FakeClock truth(1'800'000'000'000'000'000);
  SkewedClock host(truth, 0, 0);
  sim::SessionWindow w;
  w.true_start_ns = truth.NowNs();
  w.true_end_ns = w.true_start_ns + 20'000'000;
  w.host_name = "sim";
  w.counters = true;
  w.kernel_profiling.requested = true;
  w.kernel_profiling.tc = sim::DefaultTcSampling();
  w.kernel_profiling.tc.external_trigger = false;
  w.kernel_profiling.tc.interval_us = 5;
  return ReadSeries(sim::BuildXSpace(*m, host, w).space.SerializeAsString());
}

// The counter series of a stream's chunks, decoded as the aggregator does: a chip's together
// (DecodeEncodedSeries), since some take their times from another of the chip's.
std::vector<CounterSeries> DecodeChunks(const std::vector<podprof::v1::CaptureChunk>& chunks) {
  HostCapture received;
  for (const podprof::v1::CaptureChunk& chunk : chunks) {
    if (!chunk.has_counter_series()) continue;
    CounterSeries& s = received.counters.emplace_back();
    s.chip = chunk.counter_series().chip_ordinal();
    s.name = chunk.counter_series().name();
    s.encoded = chunk.counter_series().samples();
  }
  EXPECT_OK(DecodeEncodedSeries(&received));
  for (CounterSeries& s : received.counters) s.encoded.clear();
  return std::move(received.counters);
}

// What bench_pod_scale stores of a host: podprof-loadgen's capture of 1 s (its defaults: a v5p
// pod of 2,240 hosts of 4 chips, pod seed 1, counters on) from host 0, as the stream sends its
// series: gauges sampled where their level changes at kernel boundaries, energy totals at every
// boundary, times jittered by the kernels' noise.
std::vector<CounterSeries> LoadgenSeries() {
  sim::PodConfig pod;
  pod.generation = "v5p";
  pod.chips = 4;
  pod.hosts = 2240;
  pod.pod_seed = 1;
  absl::StatusOr<std::unique_ptr<loadgen::CaptureSource>> source =
      loadgen::CaptureSource::Create(pod, /*counters=*/true);
  EXPECT_OK(source);
  if (!source.ok()) return {};
  FakeClock truth(1'800'000'000'000'000'000);
  std::vector<std::unique_ptr<loadgen::EmulatedHost>> hosts =
      loadgen::MakeHosts(0, 1, pod.pod_seed, 50'000'000, 50, truth);
  absl::StatusOr<loadgen::GeneratedCapture> c =
      (*source)->Generate(*hosts[0], hosts[0]->clock.NowNs(), 1000, 4 << 20);
  EXPECT_OK(c);
  if (!c.ok()) return {};
  return DecodeChunks(c->chunks);
}

struct Capture {
  const char* name;
  std::vector<CounterSeries> (*series)();
  // The most the second encoding may take a sample on it (what it measured with mode 3, with
  // 4% room): the first took 5.96, 3.43, 5.70, 2.55 and 4.83.
  double most_bytes_per_sample;
};

class CaptureSeriesTest : public ::testing::TestWithParam<Capture> {};

// Every series round-trips; bytes per sample of both encodings are printed. The second takes
// at most 2% more than the first on any capture (7% less on the simulated v5p's per-kernel
// gauges, 15-23% less on the real captures, 26% less on the loadgen's host, 90% less on the v7x
// sampling).
TEST_P(CaptureSeriesTest, EverySeriesRoundTripsExactly) {
  const std::vector<CounterSeries> all = GetParam().series();
  ASSERT_FALSE(all.empty());
  uint64_t samples = 0, v1_bytes = 0, v2_bytes = 0;
  for (const CounterSeries& s : all) {
    EXPECT_TRUE(RoundTrips(s)) << s.name;
    samples += s.value.size();
    v1_bytes += V1Blob(s).size();
    v2_bytes += EncodeCounters(s).size();
  }
  ASSERT_GT(samples, 0u);
  const double v1 = static_cast<double>(v1_bytes) / samples;
  const double v2 = static_cast<double>(v2_bytes) / samples;
  std::printf("NOTE %s: %zu series, %llu samples, bytes/sample v1 %.3f v2 %.3f (v2/v1 %.3f)\n",
              GetParam().name, all.size(), static_cast<unsigned long long>(samples), v1, v2,
              v2 / v1);
  EXPECT_LE(static_cast<double>(v2_bytes), 1.02 * static_cast<double>(v1_bytes));
  EXPECT_LE(v2, GetParam().most_bytes_per_sample);
}

INSTANTIATE_TEST_SUITE_P(
    Captures, CaptureSeriesTest,
    ::testing::Values(
        Capture{"tpu_v6e", [] { return FixtureSeries(::podprof::testing::kTpuFixture); }, 5.29},
        Capture{"gpu_8xv100", [] { return FixtureSeries(::podprof::testing::kGpuFixture); }, 2.76},
        Capture{"sim_v5p", [] { return SimulatedSeries("v5p"); }, 5.51},
        Capture{"sim_v7x", [] { return SimulatedSeries("v7x"); }, 0.274},
        Capture{"loadgen", LoadgenSeries, 3.72}),
    [](const ::testing::TestParamInfo<Capture>& p) { return std::string(p.param.name); });

TEST(CounterColumnsTest, EdgeCasesRoundTripExactly) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double nan_payload = FromBits(0x7FF0000000000ABCull);  // signalling, with a payload
  const double negative_nan = FromBits(0xFFF8000000001234ull);
  const double two53 = 9007199254740992.0;
  const std::vector<CounterSeries> cases = {
      Series({}, {}),
      Series({0}, {0}),
      Series({1'800'000'000'000'000'000}, {-0.0}),
      Series({1, 2, 3, 4}, {-0.0, 0.0, -0.0, 0.0}),
      Series({1, 2, 3, 4, 5}, {nan_payload, negative_nan, std::nan(""), kInf, -kInf}),
      Series({kMin, kMax, kMin, 0, kMax, kMax, kMin}, {1, 2, 3, 4, 5, 6, 7}),
      Series({kMax, kMin}, {0.5, 0.25}),
      Series({0, 1, 1 << 30, int64_t{1} << 62, -(int64_t{1} << 62), 7}, {1, 1, 1, 1, 1, 1}),
      // Alternating values: integers, fractions, integer with fraction, across 2^53.
      Series({0, 10, 20, 30, 40, 50}, {0, 1, 0, 1, 0, 1}),
      Series({0, 10, 20, 30, 40, 50}, {0.5, 1.5, 0.5, 1.5, 0.5, 1.5}),
      Series({0, 10, 20, 30, 40, 50}, {3, 0.1, 3, 0.1, 3, 0.1}),
      Series({0, 10, 20, 30, 40, 50}, {two53, -two53, two53 + 2, two53 - 1, -two53 - 2, 1e300}),
      Series({0, 1, 2, 3},
             {std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max(),
              std::numeric_limits<double>::lowest(), 5e-324}),
      // Times repeated and going back.
      Series({5, 5, 5, 4, 3, 3}, {1, 2, 3, 4, 5, 6}),
  };
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_TRUE(RoundTrips(cases[i])) << "case " << i;
}

// Long runs: a level on a grid, a steady running total, a grid with a gap, random walks.
TEST(CounterColumnsTest, RunsAndNoiseRoundTripExactly) {
  std::mt19937_64 rng(7);
  for (int shape = 0; shape < 6; ++shape) {
    CounterSeries s;
    int64_t t = 1'700'000'000'000'000'000;
    double v = 0;
    for (int i = 0; i < 20'000; ++i) {
      switch (shape) {
        case 0:  // a level changing now and then
          t += 1000;
          if (i % 997 == 0) v = static_cast<double>(rng() % 100) / 7;
          break;
        case 1:  // a running total at a steady rate, then another
          t += 5000;
          v += i < 10'000 ? 9500 : 1234;
          break;
        case 2:  // a grid with gaps
          t += (i % 100 == 0) ? 1'000'000 : 1000;
          v = (i / 50) % 2;
          break;
        case 3:  // jittered times, noisy gauge
          t += 1000 + static_cast<int64_t>(rng() % 37);
          v = std::sin(i * 0.01) * 100 + static_cast<double>(rng() % 1000) / 1000;
          break;
        case 4:  // any bits at all
          t += static_cast<int64_t>(rng() >> 1) - (int64_t{1} << 61);
          v = FromBits(rng());
          break;
        default:  // an integer counter that wraps at 2^32
          t += 1000;
          v = static_cast<double>((static_cast<uint64_t>(i) * 2'000'000'017ull) & 0xFFFFFFFF);
      }
      s.time_ns.push_back(t);
      s.value.push_back(v);
    }
    EXPECT_TRUE(RoundTrips(s)) << "shape " << shape;
  }
}

// Rows stored before, and series from agents of the previous release, hold the first encoding.
TEST(CounterColumnsTest, FirstEncodingStillReads) {
  const CounterSeries s = Series({1'000, 2'000, 2'500, 9'000}, {1.5, -0.0, 7, 1e300});
  for (const std::string& blob :
       {V1Blob(s), EncodeCountersV1(s.time_ns.data(), s.value.data(), 0, s.value.size())}) {
    EXPECT_EQ(static_cast<uint8_t>(blob[0]), 0x28) << "a zstd frame";
    EXPECT_FALSE(counter_v2::Is(blob));
    EXPECT_OK(CheckCounters(blob, kMaxReceived));
    EXPECT_EQ(EncodedCount(blob, "series").value_or(0), 4u);
    CounterSeries got;
    ASSERT_OK(DecodeCounters(blob, &got));
    EXPECT_TRUE(SameSamples(s, got));
  }
  EXPECT_EQ(V1Blob(s), EncodeCountersV1(s.time_ns.data(), s.value.data(), 0, s.value.size()));
  // The second encoding starts with a skippable frame's magic, variant 2, never a zstd frame's.
  const std::string v2 = EncodeCounters(s);
  EXPECT_EQ(v2.substr(0, 4), std::string("\x52\x2A\x4D\x18", 4));
}

// A blob of the second encoding with `body` compressed after a header of `count` and `padding`.
std::string V2Blob(uint64_t count, const std::string& body, const std::string& padding = "") {
  std::string header;
  PutVarint(count, &header);
  header += padding;
  std::string out("\x52\x2A\x4D\x18", 4);
  const uint32_t size = static_cast<uint32_t>(header.size());
  out.append(reinterpret_cast<const char*>(&size), 4);  // little-endian hosts only, as podprof
  return out + header + ZstdCompress(body, 3);
}

std::string Body(std::initializer_list<uint64_t> varints, uint8_t mode = 1) {
  std::string out(1, static_cast<char>(mode));
  for (uint64_t v : varints) PutVarint(v, &out);
  return out;
}

void ExpectDataLoss(const std::string& blob, const std::string& why) {
  CounterSeries got;
  const absl::Status d = DecodeCounters(blob, &got, kMaxReceived);
  EXPECT_EQ(d.code(), absl::StatusCode::kDataLoss) << why << ": " << d;
  EXPECT_TRUE(got.value.empty()) << why;
}

TEST(CounterColumnsTest, DamagedSecondEncodingIsDataLoss) {
  // The hand-made blob reads when whole: 3 samples 10 ns apart counting up from 1 (the first
  // two samples' delta of delta is 10, their delta, the third's 0).
  const std::string good =
      V2Blob(3, Body({(1u << 3) | 4 | 1, ZigZag(10), ZigZag(1), 1, ZigZag(1)}));
  CounterSeries ok;
  ASSERT_OK(DecodeCounters(good, &ok, kMaxReceived));
  EXPECT_TRUE(SameSamples(Series({10, 20, 30}, {1, 2, 3}), ok));

  for (size_t cut = 0; cut < good.size(); ++cut) {
    ExpectDataLoss(good.substr(0, cut), "cut at " + std::to_string(cut));
  }
  ExpectDataLoss(good + good, "two blobs");
  ExpectDataLoss(good + '\0', "a byte past the frame");
  ExpectDataLoss(V2Blob(3, Body({(1u << 3) | 4 | 1, ZigZag(10), ZigZag(1), 1, ZigZag(1)}), "\x01"),
                 "header holding more than padding");
  ExpectDataLoss(V2Blob(4, Body({(1u << 3) | 4 | 1, ZigZag(10), ZigZag(1), 1, ZigZag(1)})),
                 "fewer samples than counted");
  ExpectDataLoss(V2Blob(1, Body({(1u << 3) | 4 | 1, ZigZag(10), ZigZag(1)})),
                 "a run past the count");
  ExpectDataLoss(V2Blob(1, Body({0, 0})), "a byte past the samples");
  ExpectDataLoss(V2Blob(1, Body({3})), "a kind that is none");
  ExpectDataLoss(V2Blob(1, Body({0}, 7)), "a mode that is none");
  ExpectDataLoss(V2Blob(1, ""), "no mode");
  ExpectDataLoss(V2Blob(1, Body({2, 0x78})), "an XOR of more than 8 bytes");
  ExpectDataLoss(V2Blob(2, Body({2, 0x07, 0x3F, 1, ZigZag(1)})),  // 2^-7, then + 1
                 "an integer step from a non-integer");
  ExpectDataLoss(V2Blob(1, Body({1, ZigZag(int64_t{1} << 54)})), "an integer past 2^53");
  ExpectDataLoss(V2Blob(2, Body({(1u << 3) | 1, ZigZag(int64_t{1} << 53)})),
                 "integers stepping past 2^53");
  ExpectDataLoss(V2Blob(1, Body({1 | 4, 9})), "a record cut short");
  ExpectDataLoss(V2Blob(1, Body({0}, 0)), "plain mode cut short");
  ExpectDataLoss(good.substr(0, 9) + "not a zstd frame", "no zstd frame after the header");

  // Any single byte changed: a clean error or samples, never a crash or more than counted.
  const CounterSeries real = Series({1000, 2000, 3000, 4000, 5000}, {1, 2, 2.5, 2.5, 1e9});
  const std::string blob = EncodeCounters(real);
  for (size_t i = 0; i < blob.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = blob;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      CounterSeries got;
      const absl::Status d = DecodeCounters(flipped, &got, kMaxReceived);
      if (d.ok()) {
        EXPECT_EQ(got.value.size(), *EncodedCount(flipped, "s"));
      } else {
        EXPECT_EQ(d.code(), absl::StatusCode::kDataLoss) << d;
      }
    }
  }
}

// The mode byte of a blob of the second encoding (its body's first byte).
int BodyMode(const std::string& blob) {
  uint32_t header;
  std::memcpy(&header, blob.data() + 4, 4);
  absl::StatusOr<std::string> body = ZstdDecompress(blob.substr(8 + header), 1 << 30, "body");
  return body.ok() && !body->empty() ? static_cast<uint8_t>((*body)[0]) : -1;
}

// Kernel boundaries: times jittered a few percent around a pattern that repeats every step, a
// gauge's levels recurring with it and an energy total that grows with the time.
std::vector<CounterSeries> JitteredSeries(int samples) {
  std::mt19937_64 rng(5);
  const int64_t pattern[] = {248'000, 35'500, 45'000, 9'000, 39'000, 2'650};
  const double levels[] = {0.15, 0.55, 0.05, 0.1, 0.08, 0.04};
  CounterSeries gauge, energy;
  int64_t t = 1'800'000'000'000'000'000;
  double total = 0;
  for (int i = 0; i < samples; ++i) {
    const int64_t dt = pattern[i % 6] + static_cast<int64_t>(rng() % 4001) - 2000;
    t += dt;
    total += static_cast<double>(dt) * (40 + i % 6) * 1.000003;
    gauge.time_ns.push_back(t);
    gauge.value.push_back(levels[i % 6]);
    energy.time_ns.push_back(t);
    energy.value.push_back(total);
  }
  return {gauge, energy};
}

// Jittered kernel boundaries are written as columns (mode 3), a level on a grid as records.
TEST(CounterColumnsTest, ColumnsForJitteredTimesRecordsForAGrid) {
  for (const CounterSeries& s : JitteredSeries(5000)) {
    const std::string blob = EncodeCounters(s);
    EXPECT_EQ(BodyMode(blob), 3);
    EXPECT_LT(blob.size(),
              EncodeCountersV1(s.time_ns.data(), s.value.data(), 0, s.value.size()).size());
    EXPECT_TRUE(RoundTrips(s));
  }
  CounterSeries grid;
  for (int i = 0; i < 5000; ++i) {
    grid.time_ns.push_back(1'800'000'000'000'000'000 + i * 5000);
    grid.value.push_back(i < 2500 ? 0.25 : 0.5);
  }
  EXPECT_EQ(BodyMode(EncodeCounters(grid)), 1);
}

TEST(CounterColumnsTest, DamagedColumnsAreDataLoss) {
  // 3 samples 10 ns apart (one plane of zigzag deltas), values +0.0 (no value planes); with the
  // XOR flag and one value plane, the first value's bits are 1.
  const std::string times = {20, 20, 20};
  auto columns = [](uint8_t flags, uint8_t time_planes, uint8_t value_planes,
                    const std::string& planes) {
    return std::string{3, static_cast<char>(flags), static_cast<char>(time_planes),
                       static_cast<char>(value_planes)} +
           planes;
  };
  CounterSeries got;
  ASSERT_OK(DecodeCounters(V2Blob(3, columns(0, 1, 0, times)), &got, kMaxReceived));
  EXPECT_TRUE(SameSamples(Series({10, 20, 30}, {0, 0, 0}), got));
  ASSERT_OK(DecodeCounters(V2Blob(3, columns(2, 1, 1, times + std::string{1, 0, 0})), &got,
                           kMaxReceived));
  EXPECT_TRUE(SameSamples(Series({10, 20, 30}, {FromBits(1), FromBits(1), FromBits(1)}), got));
  // Deltas of deltas as mode 1 counts them: the first time, the second's delta, then 0.
  ASSERT_OK(
      DecodeCounters(V2Blob(3, columns(1, 1, 0, std::string{20, 20, 0})), &got, kMaxReceived));
  EXPECT_TRUE(SameSamples(Series({10, 20, 30}, {0, 0, 0}), got));

  ExpectDataLoss(V2Blob(3, columns(4, 1, 0, times)), "a flag that is none");
  ExpectDataLoss(V2Blob(3, columns(0, 9, 0, times)), "9 time planes");
  ExpectDataLoss(V2Blob(3, columns(0, 1, 9, times)), "9 value planes");
  ExpectDataLoss(V2Blob(3, columns(0, 1, 0, times.substr(0, 2))), "a plane cut short");
  ExpectDataLoss(V2Blob(3, columns(0, 1, 0, times + '\0')), "a byte past the planes");
  ExpectDataLoss(V2Blob(4, columns(0, 1, 0, times)), "fewer samples than counted");
  ExpectDataLoss(V2Blob(2, columns(0, 1, 0, times)), "more samples than counted");
  ExpectDataLoss(V2Blob(3, std::string{3, 0, 1}), "no value plane count");
  ExpectDataLoss(V2Blob(0, columns(0, 0, 0, "")), "columns of no samples");

  // Any single bit of a real columns blob changed: a clean error or the counted samples.
  const std::string blob = EncodeCounters(JitteredSeries(300)[1]);
  ASSERT_EQ(BodyMode(blob), 3);
  for (size_t i = 0; i < blob.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = blob;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      const absl::Status d = DecodeCounters(flipped, &got, kMaxReceived);
      if (d.ok()) {
        EXPECT_EQ(got.value.size(), *EncodedCount(flipped, "s"));
      } else {
        EXPECT_EQ(d.code(), absl::StatusCode::kDataLoss) << d;
      }
    }
  }
}

// A hostile agent's small blob claiming millions of samples is refused before anything is
// allocated for them, by the samples a byte may stand for and by max_bytes.
TEST(CounterColumnsTest, SmallBlobsClaimingManySamplesAreRefused) {
  const uint64_t many = 4'000'000;
  const std::string forged = V2Blob(many, Body({((many - 1) << 3) | 0}));
  EXPECT_LT(forged.size(), 40u);
  EXPECT_EQ(CheckCounters(forged, uint64_t{1} << 40).code(), absl::StatusCode::kDataLoss);
  ExpectDataLoss(forged, "4 million samples in 30 bytes");
  EXPECT_EQ(EncodedCount(forged, "series").value_or(0), many) << "the front is read as is";
  // Padded to a byte per kMaxSamplesPerByte it is one an honest agent writes, still bounded by
  // max_bytes: 16 bytes a sample decoded.
  const std::string padded = V2Blob(many, Body({((many - 1) << 3) | 0}),
                                    std::string(many / counter_v2::kMaxSamplesPerByte, '\0'));
  EXPECT_OK(CheckCounters(padded, kMaxReceived));
  EXPECT_EQ(CheckCounters(padded, many * 16 - 1).code(), absl::StatusCode::kDataLoss);
  CounterSeries got;
  EXPECT_EQ(DecodeCounters(padded, &got, many * 16 - 1).code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(got.value.empty());
  // Zero padding in the body decompressing to megabytes on every read is no series.
  ExpectDataLoss(V2Blob(1, Body({0}) + std::string(1 << 20, '\0')), "a megabyte of zeros");
}

// An honest constant of a million samples compresses past kMaxSamplesPerByte; the encoder pads
// it to the bound so that it reads.
TEST(CounterColumnsTest, ALongConstantIsPaddedToTheSamplesAByteBound) {
  CounterSeries s;
  for (int64_t i = 0; i < 1'000'000; ++i) {
    s.time_ns.push_back(1'800'000'000'000'000'000 + i * 1000);
    s.value.push_back(0.72);
  }
  const std::string blob = EncodeCounters(s);
  EXPECT_GE(blob.size() * counter_v2::kMaxSamplesPerByte, s.value.size());
  EXPECT_LE(blob.size(), 300u);
  EXPECT_TRUE(RoundTrips(s));
}

// An agent cuts a series into runs by the first encoding's sample sizes (StreamSeries); each
// run's blob must fit the chunk whatever the samples are, the worst case for the second
// encoding included (times and values whose records outgrow the plain samples).
TEST(CounterColumnsTest, RunsCutByMaxCounterBytesWithinFitTheirLimit) {
  std::mt19937_64 rng(3);
  std::vector<int64_t> t;
  std::vector<double> v;
  uint64_t now = 0;
  for (int i = 0; i < 200'000; ++i) {
    // Deltas alternating huge and small: each delta of delta takes 9 or 10 bytes.
    now += (i % 2) ? rng() >> 2 : 1;
    t.push_back(static_cast<int64_t>(now));
    v.push_back(FromBits(rng()));
  }
  for (size_t limit : {size_t{128}, size_t{1000}, size_t{16} << 10, size_t{1} << 20}) {
    const size_t max_raw = MaxCounterBytesWithin(limit);
    ASSERT_GT(max_raw, 0u) << limit;
    size_t runs = 0;
    for (size_t begin = 0; begin < t.size() && runs < 50; ++runs) {
      size_t raw = 0, end = begin;
      for (uint64_t prev = 0; end < t.size(); ++end) {
        const size_t sample =
            VarintSize(ZigZag(static_cast<int64_t>(static_cast<uint64_t>(t[end]) - prev))) + 8;
        if (raw + sample > max_raw && end > begin) break;
        raw += sample;
        prev = static_cast<uint64_t>(t[end]);
      }
      const std::string blob = EncodeCounters(t.data(), v.data(), begin, end);
      EXPECT_LE(blob.size(), limit) << "samples " << begin << ".." << end;
      CounterSeries got;
      ASSERT_OK(DecodeCounters(blob, &got));
      EXPECT_TRUE(SameSamples(
          Series({t.begin() + begin, t.begin() + end}, {v.begin() + begin, v.begin() + end}), got));
      begin = end;
    }
  }
}

// The loadgen's host as its agent encodes it, each chip's series against the chip's series
// with the most samples (as StreamPiece picks): every series takes the reference's times in
// mode 4 (a chip's gauges are sampled at some of its energy totals' instants), round-trips
// exactly when decoded as the readers do, and the chip's counters take far fewer bytes.
TEST(CounterColumnsTest, AChipsSeriesShareTheirTimesAndRoundTripExactly) {
  const std::vector<CounterSeries> all = LoadgenSeries();
  ASSERT_FALSE(all.empty());
  std::map<int, const CounterSeries*> reference;
  for (const CounterSeries& s : all) {
    const CounterSeries*& r = reference[s.chip];
    if (r == nullptr || s.value.size() > r->value.size()) r = &s;
  }
  uint64_t own = 0, shared = 0, samples = 0;
  std::vector<CounterSeries> decoded;
  for (const CounterSeries& s : all) {
    const CounterSeries& r = *reference[s.chip];
    const std::string alone = EncodeCounters(s);
    std::string blob = alone;
    if (&r != &s) {
      blob = EncodeCountersSharingTimes(r.name, r.time_ns.data(), r.time_ns.size(),
                                        s.time_ns.data(), s.value.data(), 0, s.value.size());
      EXPECT_EQ(BodyMode(blob), 4) << s.name;
      EXPECT_EQ(*CounterReference(blob), r.name) << s.name;
      EXPECT_OK(CheckCounters(blob, kMaxReceived));
      EXPECT_EQ(*EncodedCount(blob, s.name), s.value.size());
      EXPECT_LE(blob.size(), alone.size()) << s.name;
    }
    own += alone.size();
    shared += blob.size();
    samples += s.value.size();
    CounterSeries d;
    d.chip = s.chip;
    d.name = s.name;
    d.encoded = blob;
    decoded.push_back(std::move(d));
  }
  std::vector<CounterSeries*> ptrs;
  for (CounterSeries& d : decoded) ptrs.push_back(&d);
  size_t failed = 0;
  ASSERT_OK(DecodeChipCounters(ptrs, std::vector<bool>(ptrs.size(), true), &failed));
  for (size_t i = 0; i < all.size(); ++i)
    EXPECT_TRUE(SameSamples(all[i], decoded[i])) << all[i].name;
  std::printf(
      "NOTE loadgen host: %zu series, %llu samples, bytes/sample own times %.3f, "
      "shared %.3f (%.3f)\n",
      all.size(), static_cast<unsigned long long>(samples), static_cast<double>(own) / samples,
      static_cast<double>(shared) / samples, static_cast<double>(shared) / own);
  EXPECT_LT(static_cast<double>(shared), 0.7 * static_cast<double>(own));
}

// Times that are not all among the reference's, a reference too sparse for a bitmap to pay,
// or none at all: the series keeps its own times, as before.
TEST(CounterColumnsTest, TimesNotAmongTheReferencesAreKept) {
  const CounterSeries ref = Series({10, 20, 30, 40, 50}, {1, 2, 3, 4, 5});
  const CounterSeries off = Series({10, 25, 30}, {7, 8, 9});
  std::string blob = EncodeCountersSharingTimes("energy_nj", ref.time_ns.data(), 5,
                                                off.time_ns.data(), off.value.data(), 0, 3);
  EXPECT_EQ(*CounterReference(blob), "");
  CounterSeries got;
  ASSERT_OK(DecodeCounters(blob, &got));
  EXPECT_TRUE(SameSamples(off, got));

  // Two samples of a million: a bitmap of 125 kB would pass what Check lets a body take.
  std::vector<int64_t> dense(1'000'000);
  for (size_t i = 0; i < dense.size(); ++i) dense[i] = static_cast<int64_t>(i) * 1000;
  const CounterSeries sparse = Series({0, 999'999'000}, {1, 2});
  blob = EncodeCountersSharingTimes("energy_nj", dense.data(), dense.size(), sparse.time_ns.data(),
                                    sparse.value.data(), 0, 2);
  EXPECT_EQ(*CounterReference(blob), "");
  ASSERT_OK(DecodeCounters(blob, &got));
  EXPECT_TRUE(SameSamples(sparse, got));

  blob = EncodeCountersSharingTimes("", ref.time_ns.data(), 5, ref.time_ns.data(), ref.value.data(),
                                    1, 4);
  EXPECT_EQ(*CounterReference(blob), "");
}

// Shared-times blobs read only with the reference's times, and only with the right ones: a
// reader without them, with other times, or with a damaged blob gets DataLoss naming the
// reference, never samples at the wrong instants. Where the reference's times repeat (a chip
// that came in two overlapping pieces), the candidate whose times match the checksum is taken.
TEST(CounterColumnsTest, SharedTimesNeedTheirReferenceAndAreChecked) {
  std::vector<int64_t> ref;
  for (int i = 0; i < 400; ++i) ref.push_back(1'000'000 + i * 1000 + (i * 37) % 101);
  std::vector<int64_t> t;
  std::vector<double> v;
  for (int i = 0; i < 400; i += 1 + i % 3) {
    t.push_back(ref[i]);
    v.push_back(0.25 * (i % 5));
  }
  const CounterSeries want = Series(t, v);
  const std::string blob = EncodeCountersSharingTimes("tensorcore_energy_nj", ref.data(),
                                                      ref.size(), t.data(), v.data(), 0, t.size());
  ASSERT_EQ(BodyMode(blob), 4);
  CounterSeries got;
  const counter_v2::ReferenceTimes reference(ref);
  ASSERT_OK(DecodeCounters(blob, &got, kMaxReceived, &reference));
  EXPECT_TRUE(SameSamples(want, got));

  absl::Status d = DecodeCounters(blob, &got, kMaxReceived);
  EXPECT_EQ(d.code(), absl::StatusCode::kDataLoss) << d;
  EXPECT_NE(d.message().find("tensorcore_energy_nj"), absl::string_view::npos) << d;
  EXPECT_TRUE(got.value.empty());

  std::vector<int64_t> moved = ref;
  moved[3] += 1;  // one of the series' instants differs in the reference
  const counter_v2::ReferenceTimes moved_reference(moved);
  d = DecodeCounters(blob, &got, kMaxReceived, &moved_reference);
  EXPECT_EQ(d.code(), absl::StatusCode::kDataLoss) << d;
  const std::vector<int64_t> shorter(ref.begin(), ref.begin() + 200);
  const counter_v2::ReferenceTimes shorter_reference(shorter);
  EXPECT_EQ(DecodeCounters(blob, &got, kMaxReceived, &shorter_reference).code(),
            absl::StatusCode::kDataLoss);

  // The reference twice, as two overlapping pieces of one chip would give it.
  std::vector<int64_t> twice = ref;
  twice.insert(twice.end(), ref.begin(), ref.end());
  twice[3] += 1;  // the first copy is not the encoder's: the second is taken
  std::vector<int64_t> want_times = t;
  const counter_v2::ReferenceTimes twice_reference(twice);
  ASSERT_OK(DecodeCounters(blob, &got, kMaxReceived, &twice_reference));
  EXPECT_EQ(got.time_ns, want_times);

  // The header's name and the mode go together.
  const std::string header_less = EncodeCounters(want);
  ASSERT_NE(BodyMode(header_less), 4);
  ExpectDataLoss(V2Blob(2, std::string{4, 0, 2} + std::string(6, '\0') + std::string{1, 0}),
                 "mode 4 naming no reference");

  // Any single byte changed: a clean error or the counted samples, never a crash.
  for (size_t i = 0; i < blob.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = blob;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      const absl::Status f = DecodeCounters(flipped, &got, kMaxReceived, &reference);
      if (f.ok()) {
        EXPECT_EQ(got.value.size(), *EncodedCount(flipped, "s"));
      } else {
        EXPECT_EQ(f.code(), absl::StatusCode::kDataLoss) << f;
      }
    }
  }
}

// A reader that asks for some of a chip's series decodes the references they take their times
// from as well, and hands those back without samples; a damaged wanted one names itself.
TEST(CounterColumnsTest, ChipSeriesDecodeTheirReferencesWhenAskedForOthers) {
  CounterSeries energy, busy;
  for (int i = 0; i < 200; ++i) {
    energy.time_ns.push_back(1000 * i + (i * 7) % 13);
    energy.value.push_back(1.5 * i);
    if (i % 2 == 0) busy.time_ns.push_back(energy.time_ns.back()), busy.value.push_back(i % 3);
  }
  std::vector<CounterSeries> chip(3);
  chip[0].name = "energy_nj";
  chip[0].encoded = EncodeCounters(energy);
  chip[1].name = "busy";
  chip[1].encoded = EncodeCountersSharingTimes("energy_nj", energy.time_ns.data(), 200,
                                               busy.time_ns.data(), busy.value.data(), 0, 100);
  chip[2].name = "other";
  chip[2].encoded = EncodeCounters(busy);
  ASSERT_EQ(*CounterReference(chip[1].encoded), "energy_nj");
  std::vector<CounterSeries*> ptrs{&chip[0], &chip[1], &chip[2]};
  size_t failed = 9;
  ASSERT_OK(DecodeChipCounters(ptrs, {false, true, false}, &failed));
  EXPECT_TRUE(SameSamples(busy, chip[1]));
  EXPECT_TRUE(chip[0].time_ns.empty());  // read for busy's times, not handed back
  EXPECT_TRUE(chip[2].time_ns.empty());  // not asked for, not read

  for (CounterSeries& c : chip) c.time_ns.clear(), c.value.clear();
  chip[0].name = "renamed";  // the reference is gone
  const absl::Status d = DecodeChipCounters(ptrs, {true, true, true}, &failed);
  EXPECT_EQ(d.code(), absl::StatusCode::kDataLoss) << d;
  EXPECT_EQ(failed, 1u);
}

}  // namespace
}  // namespace podprof::trace
