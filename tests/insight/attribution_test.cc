// Counter attribution, exact on hand-built series with integer values, and on the real TPU
// capture (which carries no counters: nothing is attributed, nothing invented).
#include "insight/attribution.h"

#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "insight/collectives.h"
#include "insight/evidence.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/xspace_reader.h"

namespace podprof::insight {
namespace {

// One chip, three kernels on `XLA Ops`: k0 over [10, 30) ns, k1 over [30, 35), k0 again over
// [50, 70); base 1000 ns.
trace::HostCapture ThreeRuns() {
  trace::HostCapture c;
  c.host.chips.push_back({});
  c.kernels.resize(2);
  c.kernels[0].name = "k0";
  c.kernels[1].name = "k1";
  trace::EventBlock b;
  b.chip = 0;
  b.line = "XLA Ops";
  b.kind = trace::LineKind::kOps;
  b.base_ns = 1000;
  b.start_ps = {10'000, 30'000, 50'000};
  b.duration_ps = {20'000, 5'000, 20'000};
  b.kernel = {0, 1, 0};
  b.collective = {0, 0, 0};
  c.blocks.push_back(b);
  return c;
}

std::map<std::pair<uint32_t, std::string>, KernelCounter> ByKernel(
    const std::vector<KernelCounter>& v) {
  std::map<std::pair<uint32_t, std::string>, KernelCounter> out;
  for (const KernelCounter& k : v) out[{k.kernel, k.counter}] = k;
  return out;
}

TEST(AttributionTest, GaugesAreTimeWeightedAndHoldUntilTheNextSample) {
  trace::HostCapture c = ThreeRuns();
  trace::CounterSeries busy;
  busy.chip = 0;
  busy.name = "mxu_busy";
  // 2 from 1000 ns, 6 from 1020, 1 from 1032, 4 from 1060 until the last sample at 1080.
  busy.time_ns = {1000, 1020, 1032, 1060, 1080};
  busy.value = {2, 6, 1, 4, 0};
  c.counters.push_back(busy);
  auto got = ByKernel(AttributeCounters(c));
  ASSERT_EQ(got.size(), 2u);
  // k0: [1010,1030): 10 ns at 2 + 10 at 6 = 80; [1050,1070): 10 at 1 + 10 at 4 = 50.
  const KernelCounter& k0 = got[{0, "mxu_busy"}];
  EXPECT_EQ(k0.kind, trace::CounterKind::kGauge);
  EXPECT_EQ(k0.covered_ps, 40'000);
  EXPECT_EQ(k0.executions, 2);
  EXPECT_DOUBLE_EQ(k0.integral, (80 + 50) * 1000.0);  // value x ps
  EXPECT_DOUBLE_EQ(k0.Value(), 130.0 / 40);
  // k1: [1030,1035): 2 ns at 6, 3 at 1 = 15.
  const KernelCounter& k1 = got[{1, "mxu_busy"}];
  EXPECT_EQ(k1.covered_ps, 5'000);
  EXPECT_DOUBLE_EQ(k1.Value(), 15.0 / 5);
}

// What the Megascale runtime measured of each DCN transfer (megascale/<rendezvous>/...) is a
// figure per arrival, not a level: no kernel gets it (fails on the old code, which gave the
// recv-done kernels a time-weighted "latency").
TEST(AttributionTest, TheRuntimesPerTransferFiguresAreNoKernelsCounters) {
  trace::HostCapture c = ThreeRuns();
  trace::CounterSeries latency;
  latency.chip = 0;
  latency.name = "megascale/dcn_grads.0/network_transport_latency_us";
  latency.time_ns = {1000, 1020, 1060};
  latency.value = {40, 41, 340};
  c.counters.push_back(latency);
  trace::CounterSeries busy = latency;
  busy.name = "mxu_busy";
  c.counters.push_back(busy);
  auto got = ByKernel(AttributeCounters(c));
  EXPECT_EQ(got.size(), 2u);  // mxu_busy on k0 and k1
  for (const auto& [key, k] : got) EXPECT_EQ(key.second, "mxu_busy");
}

TEST(AttributionTest, RunningTotalsGiveTheIncreaseOverEachKernel) {
  trace::HostCapture c = ThreeRuns();
  trace::CounterSeries energy;
  energy.chip = 0;
  energy.name = "vdd_core_energy_nj";
  // Samples at kernel edges (what the counter read then), and one between them.
  energy.time_ns = {1010, 1030, 1035, 1040, 1050, 1070};
  energy.value = {100, 140, 150, 155, 160, 200};
  c.counters.push_back(energy);
  auto got = ByKernel(AttributeCounters(c));
  const KernelCounter& k0 = got[{0, "vdd_core_energy_nj"}];
  EXPECT_EQ(k0.kind, trace::CounterKind::kCumulative);
  EXPECT_DOUBLE_EQ(k0.integral, (140 - 100) + (200 - 160));
  EXPECT_DOUBLE_EQ(k0.Value(), 80);
  EXPECT_DOUBLE_EQ((got[{1, "vdd_core_energy_nj"}].integral), 10);
  // Between samples a total is read off the line through them: [1036, 1040) of a counter
  // going 150 -> 155 over [1035, 1040) increases by 4.
  SeriesIntegral line(energy);
  int64_t covered = 0;
  EXPECT_DOUBLE_EQ(line.Over(26'000, 30'000, &covered), 4);
  EXPECT_EQ(covered, 4'000);
}

TEST(AttributionTest, OnlyTheCoveredPartCountsAndOtherChipsAreApart) {
  trace::HostCapture c = ThreeRuns();
  c.host.chips.push_back({});
  trace::CounterSeries late;
  late.chip = 0;
  late.name = "dma_busy";
  late.time_ns = {1020, 1025};  // covers half of k0's first run, none of the rest
  late.value = {3, 3};
  c.counters.push_back(late);
  trace::CounterSeries other = late;
  other.chip = 1;  // a chip with no kernels
  other.time_ns = {0, 5000};
  c.counters.push_back(other);
  auto got = AttributeCounters(c);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].kernel, 0u);
  EXPECT_EQ(got[0].covered_ps, 5'000);
  EXPECT_EQ(got[0].executions, 1);
  EXPECT_DOUBLE_EQ(got[0].Value(), 3);
}

TEST(AttributionTest, CounterKindsFollowTheirNames) {
  EXPECT_EQ(trace::CounterKindOfName("hbm_energy_nj"), trace::CounterKind::kCumulative);
  EXPECT_EQ(trace::CounterKindOfName("stall_cycles"), trace::CounterKind::kCumulative);
  EXPECT_EQ(trace::CounterKindOfName("hbm_read_bytes"), trace::CounterKind::kCumulative);
  EXPECT_EQ(trace::CounterKindOfName("mxu_busy"), trace::CounterKind::kGauge);
  EXPECT_EQ(trace::CounterKindOfName("tpu.runtime.hbm.memory.usage.bytes"),
            trace::CounterKind::kGauge);
}

TEST(AttributionTest, TheRealTpuCaptureCarriesNoCountersSoNoneAreAttributed) {
  auto c = trace::ReadXSpaceFile(testing::FixturePath(testing::kTpuFixture));
  ASSERT_OK(c);
  EXPECT_TRUE(c->counters.empty());
  EXPECT_TRUE(AttributeCounters(*c).empty());
  // What the kernels are, it does carry: the HLO text and static costs.
  int with_hlo = 0, with_flops = 0;
  for (const trace::KernelDef& k : c->kernels) {
    with_hlo += !k.hlo_text.empty();
    with_flops += k.flops > 0;
  }
  EXPECT_GT(with_hlo, 10);
  EXPECT_GT(with_flops, 0);
  // Its all-reduces carry all_reduce_unique_id, 3 per chip, but chip 0's ids differ from
  // the others' but for one: ids 1 and 65537 join chips 1-3, and chip 0's own two have nobody
  // to wait for. 131073 is chip 0's first execution and the others' third, 6.3 s apart: not
  // one collective (each ran 122 ms), so it is left out rather than read as 6.3 s of waiting
  // (433.9% of the all-reduce's time).
  std::vector<int64_t> chips = {0, 1, 2, 3}, kernels(c->kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) kernels[i] = static_cast<int64_t>(i);
  CollectiveNames names;
  CollectiveReport r = AnalyzeCollectives(CollectiveRuns(*c, 0, chips, kernels, &names), names);
  EXPECT_EQ(r.instances, 2);
  EXPECT_EQ(r.left_out, 1);
  std::map<uint64_t, int> chips_of;
  for (const InstanceRow& i : r.worst) chips_of[i.id] = i.chips;
  EXPECT_EQ(chips_of, (std::map<uint64_t, int>{{1, 3}, {65537, 3}}));
  for (const auto& [key, w] : r.waits) EXPECT_LT(w.wait_ps, 10'000'000) << key.first;
}

TEST(CollectivesTest, TheLastArrivalIsTheStragglerAndTheOthersWaitForIt) {
  std::vector<CollectiveRun> runs;
  CollectiveNames names;
  names.hosts = {"a", "b"};
  names.kernels[5] = "all-reduce.0";
  // Instance 7: chips arrive at 100, 130, 180 ns (host b chip 1 last); all end at 300.
  // Instance 8: host a chip 0 last.
  auto add = [&](uint64_t id, std::string host, int chip, int64_t start, int64_t step) {
    CollectiveRun r;
    r.host = host == "a" ? 0 : 1;
    r.chip_ordinal = chip;
    r.chip_key = host == "a" ? chip : 10 + chip;
    r.kernel_key = 5;
    r.id = id;
    r.start_ns = start;
    r.step = step;
    runs.push_back(r);
  };
  // Step numbers as a Steps line may name them: instance 8's is past 32 bits (the simulator's
  // steps are counted since the epoch).
  const int64_t big = 5'000'000'000;
  add(7, "a", 0, 100, 3);
  add(7, "a", 1, 130, 3);
  add(7, "b", 1, 180, 3);
  add(8, "a", 0, 250, big);
  add(8, "a", 1, 240, big);
  add(8, "b", 1, 200, big);
  add(9, "a", 0, 260, big);  // seen on one chip only: skipped
  CollectiveReport r = AnalyzeCollectives(runs, names);
  EXPECT_EQ(r.instances, 2);
  ASSERT_EQ(r.stragglers.size(), 2u);
  // b chip 1 caused 80 + 50 = 130 ns of waiting; a chip 0 caused 50 + 10 = 60.
  EXPECT_EQ(r.stragglers[0].host, "b");
  EXPECT_EQ(r.stragglers[0].chip_ordinal, 1);
  EXPECT_EQ(r.stragglers[0].caused_ps, 130'000);
  EXPECT_EQ(r.stragglers[0].lateness_ps, 50'000);
  EXPECT_EQ(r.stragglers[0].steps, std::vector<int64_t>{3});
  EXPECT_EQ(r.stragglers[1].caused_ps, 60'000);
  EXPECT_EQ(r.stragglers[1].steps, std::vector<int64_t>{big});
  // a chip 0 waited 80 ns in instance 7 and nothing in 8.
  EXPECT_EQ((r.waits[{0, 5}].wait_ps), 80'000);
  EXPECT_EQ((r.waits[{0, 5}].instances), 2);
  EXPECT_EQ((r.waits[{11, 5}].wait_ps), 50'000);
  ASSERT_EQ(r.worst.size(), 2u);
  EXPECT_EQ(r.worst[0].id, 7u);
  EXPECT_EQ(r.worst[0].spread_ps, 80'000);
  EXPECT_EQ(r.worst[0].kernel_name, "all-reduce.0");
  EXPECT_EQ(r.worst[0].straggler_host, "b");

  // Hosts on their own clocks: only host a's two chips are compared, in each instance.
  CollectiveReport within = AnalyzeCollectives(runs, names, 64, /*within_host=*/true);
  EXPECT_EQ(within.instances, 2);
  ASSERT_EQ(within.worst.size(), 2u);
  EXPECT_EQ(within.worst[0].chips, 2);
  EXPECT_EQ(within.worst[0].straggler_host, "a");
  EXPECT_EQ((within.waits[{0, 5}].wait_ps), 30'000);  // 130 - 100 in instance 7
  EXPECT_EQ(within.waits.count({11, 5}), 0u);
}

// Many instances are walked in ranges side by side; the result is one walk's, in instance
// order: totals add up and a chip's steps are the first 64 distinct ones it was last in.
TEST(CollectivesTest, AWalkSplitOverThreadsIsOneWalk) {
  CollectiveNames names;
  names.hosts = {"a", "b"};
  std::vector<CollectiveRun> runs;
  int64_t want_wait_ps = 0;
  for (int i = 1; i <= 200; ++i) {
    CollectiveRun early, late;
    early.id = late.id = static_cast<uint64_t>(i);
    early.host = 0;
    early.chip_key = 0;
    early.start_ns = 1000 * i;
    late.host = 1;
    late.chip_key = 10;
    late.start_ns = 1000 * i + i;  // i ns after
    late.step = i / 3;             // steps 0..66, each in up to three instances
    early.kernel_key = late.kernel_key = 5;
    runs.push_back(early);
    runs.push_back(late);
    want_wait_ps += int64_t{i} * 1000;
  }
  CollectiveReport r = AnalyzeCollectives(runs, names);
  EXPECT_EQ(r.instances, 200);
  ASSERT_EQ(r.stragglers.size(), 1u);
  EXPECT_EQ(r.stragglers[0].host, "b");
  EXPECT_EQ(r.stragglers[0].times_last, 200);
  EXPECT_EQ(r.stragglers[0].instances, 200);
  EXPECT_EQ(r.stragglers[0].caused_ps, want_wait_ps);
  std::vector<int64_t> first64(64);
  for (int k = 0; k < 64; ++k) first64[k] = k;
  EXPECT_EQ(r.stragglers[0].steps, first64);
  EXPECT_EQ((r.waits[{0, 5}].wait_ps), want_wait_ps);
  EXPECT_EQ((r.waits[{0, 5}].straggler), "b chip 0");
  ASSERT_EQ(r.worst.size(), 64u);
  EXPECT_EQ(r.worst[0].id, 200u);  // the longest wait
}

// A pod's hosts are added one by one, on their own clocks, and compared only once each host's
// correction is known: host b's clock runs 100 ns ahead, so its chip, last on its own clock,
// is first on the pod's.
TEST(CollectivesTest, ArrivalsArePutOnThePodsClockWhenAnalysed) {
  CollectiveNames names;
  names.hosts = {"a", "b"};
  names.kernels[5] = "all-reduce.0";
  auto run = [](int32_t host, int chip, int64_t start) {
    CollectiveRun r;
    r.id = 7;
    r.host = host;
    r.chip_ordinal = chip;
    r.chip_key = host * 10 + chip;
    r.kernel_key = 5;
    r.start_ns = start;
    return r;
  };
  PodCollectives pod;
  pod.Add({run(0, 0, 100), run(0, 1, 130)});
  pod.Add({run(1, 0, 180)});  // 80 ns on the pod's clock
  EXPECT_EQ(pod.arrivals(), 3u);
  CollectiveReport r =
      pod.Analyze(names, [](int32_t host, int64_t ns) { return host == 1 ? ns - 100 : ns; });
  EXPECT_EQ(r.instances, 1);
  ASSERT_EQ(r.worst.size(), 1u);
  EXPECT_EQ(r.worst[0].straggler_host, "a");
  EXPECT_EQ(r.worst[0].straggler_chip, 1);
  EXPECT_EQ(r.worst[0].spread_ps, 50'000);    // 130 - 80
  EXPECT_EQ(r.worst[0].lateness_ps, 30'000);  // 130 - 100
  EXPECT_EQ(r.worst[0].caused_ps, 80'000);    // 30 + 50
  EXPECT_EQ((r.waits[{10, 5}].wait_ps), 50'000);
  // One instance is no evidence of who is habitually last (insight/evidence.h).
  EXPECT_EQ((r.waits[{10, 5}].straggler), "");
}

// Arrivals are kept as ns after their instance's first; hosts whose clocks disagree by seconds
// before they are corrected (or starts anywhere in int64, as an agent may send them) keep
// theirs exactly and give the analysis of the same arrivals on one clock.
TEST(CollectivesTest, ArrivalsSecondsApartBeforeCorrectionKeepTheirStarts) {
  constexpr int kHosts = 4, kInstances = 20;
  const int64_t skew[kHosts] = {0, 5'000'000'000, -3'000'000'000, INT64_MAX / 2};
  CollectiveNames names;
  names.hosts = {"h0", "h1", "h2", "h3"};
  names.kernels[1] = "all-reduce.1";
  std::vector<CollectiveRun> aligned, skewed;
  for (int i = 0; i < kInstances; ++i) {
    for (int h = 0; h < kHosts; ++h) {
      CollectiveRun r;
      r.id = static_cast<uint64_t>(i + 1);
      r.host = h;
      r.chip_key = h;
      r.kernel_key = 1;
      r.duration_ns = 50'000;
      r.step = i / 5;
      r.start_ns = 1'000'000'000 + i * 100'000 + (h == 2 ? 7'000 + i : h * 1'000);
      aligned.push_back(r);
      r.start_ns += skew[h];
      skewed.push_back(r);
    }
  }
  const CollectiveReport want = AnalyzeCollectives(aligned, names);
  PodCollectives pod;
  pod.Add(skewed);
  EXPECT_GT(pod.arrival_bytes(), pod.arrivals() * 12) << "the far ones are kept apart";
  CollectiveReport got = pod.Analyze(names, [&](int32_t h, int64_t ns) { return ns - skew[h]; });
  EXPECT_EQ(got.instances, kInstances);
  EXPECT_EQ(got.left_out, 0);
  ASSERT_EQ(got.waits.size(), want.waits.size());
  for (const auto& [key, w] : want.waits) {
    EXPECT_EQ(got.waits[key].wait_ps, w.wait_ps) << key.first;
    EXPECT_EQ(got.waits[key].straggler, w.straggler) << key.first;
  }
  EXPECT_EQ((got.waits[{0, 1}].wait_ps), kInstances * 7'000'000 + 190'000);  // (7000 + i) ns each
  ASSERT_EQ(got.stragglers.size(), 1u);
  EXPECT_EQ(got.stragglers[0].host, "h2");
  EXPECT_EQ(got.stragglers[0].steps, (std::vector<int64_t>{0, 1, 2, 3}));
  ASSERT_EQ(got.worst.size(), want.worst.size());
  for (size_t i = 0; i < want.worst.size(); ++i) {
    EXPECT_EQ(got.worst[i].id, want.worst[i].id);
    EXPECT_EQ(got.worst[i].spread_ps, want.worst[i].spread_ps);
    EXPECT_EQ(got.worst[i].step, want.worst[i].step);
  }
}

// Stragglers per chip and kernel are counted per group of instances with the same members.
// Against a count per pair, on a pod where chips take part in different sets of instances:
// pod-wide ones, ones of half the hosts, ones within a host, two kernels. At the first kernel
// one chip per shape is late half the time, so its pairs have a straggler the test names and
// the second kernel's (last at random) do not;
// the pair's chance is the sum of 1/members over its instances.
TEST(CollectivesTest, StragglersPerChipAndKernelMatchACountPerPair) {
  constexpr int kHosts = 6, kChips = 2;
  CollectiveNames names;
  for (int h = 0; h < kHosts; ++h) names.hosts.push_back("host" + std::to_string(h));
  names.kernels[1] = "all-reduce";
  names.kernels[2] = "all-gather";
  std::mt19937_64 rng(11);
  std::vector<std::vector<CollectiveRun>> by_host(kHosts);
  // (chip key, kernel) -> (chip name -> times last)
  std::map<std::pair<int64_t, int64_t>, std::map<std::string, int64_t>> expected;
  // (chip key, kernel) -> (instances, chance of any one chip, widest instance)
  std::map<std::pair<int64_t, int64_t>, std::tuple<int64_t, double, size_t>> chance;
  for (uint64_t id = 1; id <= 300; ++id) {
    const int shape = static_cast<int>(id % 3);
    const int64_t kernel = 1 + static_cast<int64_t>(id % 2);
    const int local_host = static_cast<int>(rng() % kHosts);
    std::vector<CollectiveRun> members;
    for (int h = 0; h < kHosts; ++h) {
      if (shape == 1 && h % 2 == 1) continue;       // half the hosts
      if (shape == 2 && h != local_host) continue;  // within one host
      for (int c = 0; c < kChips; ++c) {
        CollectiveRun r;
        r.id = shape == 2 ? id * 100 + static_cast<uint64_t>(h) : id;
        r.host = h;
        r.chip_ordinal = c;
        r.chip_key = h * 10 + c;
        r.kernel_key = kernel;
        r.start_ns = static_cast<int64_t>(id * 1'000'000 + rng() % 50);  // ties happen
        r.duration_ns = 10'000;
        if (kernel == 1 && r.chip_key == shape * 20 + 1 && rng() % 2 == 0) r.start_ns += 100;
        members.push_back(r);
      }
    }
    const CollectiveRun* last = &members[0];
    for (const CollectiveRun& m : members) {
      if (m.start_ns > last->start_ns ||
          (m.start_ns == last->start_ns && m.chip_key > last->chip_key)) {
        last = &m;
      }
    }
    const std::string last_name =
        absl::StrCat(names.hosts[last->host], " chip ", last->chip_ordinal);
    for (const CollectiveRun& m : members) {
      if (members.size() > 1) {
        expected[{m.chip_key, m.kernel_key}][last_name]++;
        auto& [n, p, widest] = chance[{m.chip_key, m.kernel_key}];
        ++n;
        p += 1.0 / static_cast<double>(members.size());
        widest = std::max(widest, members.size());
      }
      by_host[m.host].push_back(m);
    }
  }
  PodCollectives pod;
  pod.ExpectHosts(kHosts);
  for (int h = kHosts - 1; h >= 0; --h) pod.Add(by_host[h]);  // in any order
  CollectiveReport r = pod.Analyze(names, [](int32_t, int64_t ns) { return ns; });
  ASSERT_EQ(r.waits.size(), expected.size());
  int named = 0;
  for (const auto& [key, times] : expected) {
    std::string best;
    int64_t best_times = 0;
    for (const auto& [name, n] : times) {  // in name order: the first of equals stays
      if (n > best_times) std::tie(best, best_times) = std::tie(name, n);
    }
    const auto& [n, p, widest] = chance[key];
    if (!SignificantlyLast(best_times, n, p, widest)) {
      best.clear();
      best_times = 0;
    }
    named += best_times > 0;
    const Wait& w = r.waits[key];
    EXPECT_EQ(w.straggler, best) << key.first << "/" << key.second;
    EXPECT_EQ(w.straggler_times, best_times) << key.first << "/" << key.second;
  }
  EXPECT_GT(named, 0);
  EXPECT_LT(named, static_cast<int>(expected.size()));
}

// Pod-wide instances are kept in room for one arrival per chip of the pod, not in room doubled
// past it by every instance at the same host.
TEST(CollectivesTest, ArrivalsOfAnExpectedPodTakeTheirSize) {
  constexpr int kHosts = 300, kChips = 4, kInstances = 50;
  PodCollectives pod;
  pod.ExpectHosts(kHosts);
  for (int h = 0; h < kHosts; ++h) {
    std::vector<CollectiveRun> runs;
    for (int i = 0; i < kInstances; ++i) {
      for (int c = 0; c < kChips; ++c) {
        CollectiveRun r;
        r.id = static_cast<uint64_t>(i + 1);
        r.host = h;
        r.chip_key = h * kChips + c;
        r.kernel_key = 1;
        r.start_ns = i * 1000 + h;
        runs.push_back(r);
      }
    }
    pod.Add(runs);
  }
  EXPECT_EQ(pod.arrivals(), size_t{kHosts} * kChips * kInstances);
  EXPECT_EQ(pod.arrival_bytes(), pod.arrivals() * 12) << "not 2048 arrivals' room each";
  pod.Clear();
  EXPECT_EQ(pod.arrival_bytes(), 0u);
}

// Scopes (Pallas primitives, sync waits) land in the kernel execution holding their midpoint,
// summed per (chip, kernel, line, name); scopes outside every kernel are left out.
TEST(AttributionTest, ScopesAreSummedPerKernelTheyFallIn) {
  trace::HostCapture c = ThreeRuns();
  c.kernels.resize(4);
  c.kernels[2].name = "dma_wait";
  c.kernels[3].name = "SyncWait";
  trace::EventBlock prims;
  prims.chip = 0;
  prims.line = "Pallas Primitives";
  prims.kind = trace::LineKind::kScopes;
  prims.base_ns = 1005;  // a later base than the kernels' line: times are absolute
  // [15, 20) and [50, 55) in k0; [27, 33) has its midpoint in k1; [40, 45) is between kernels.
  prims.start_ps = {10'000, 22'000, 35'000, 45'000};
  prims.duration_ps = {5'000, 6'000, 5'000, 5'000};
  prims.kernel = {2, 2, 2, 2};
  prims.collective = {0, 0, 0, 0};
  c.blocks.push_back(prims);
  trace::EventBlock sync = prims;
  sync.line = "Tensor Core Sync Flag";
  sync.start_ps = {50'000};
  sync.duration_ps = {7'000};
  sync.kernel = {3};
  sync.collective = {0};
  c.blocks.push_back(sync);
  std::map<std::tuple<uint32_t, std::string, std::string>, trace::KernelScope> got;
  for (const trace::KernelScope& s : AttributeScopes(c)) got[{s.kernel, s.line, s.name}] = s;
  ASSERT_EQ(got.size(), 3u);
  const trace::KernelScope& k0 = got[{0, "Pallas Primitives", "dma_wait"}];
  EXPECT_EQ(k0.count, 2);
  EXPECT_EQ(k0.total_ps, 10'000);
  const trace::KernelScope& k1 = got[{1, "Pallas Primitives", "dma_wait"}];
  EXPECT_EQ(k1.count, 1);
  EXPECT_EQ(k1.total_ps, 6'000);
  const trace::KernelScope& s0 = got[{0, "Tensor Core Sync Flag", "SyncWait"}];
  EXPECT_EQ(s0.count, 1);
  EXPECT_EQ(s0.total_ps, 7'000);
}

}  // namespace
}  // namespace podprof::insight
