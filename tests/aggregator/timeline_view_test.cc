// The web timeline's level of detail and the waits heatmap, on hand-made hosts whose every
// pixel is known.
#include "aggregator/api/timeline_view.h"

#include <map>
#include <set>
#include <tuple>

#include "gtest/gtest.h"

namespace podprof::aggregator {
namespace {

constexpr int64_t kT0 = 1'000'000'000'000;  // the capture's start, ns

// One host with `chips` chips; kernels A (wide), B (narrow), C (a collective) and D.
storage::StoredHost Host(const std::string& name, int chips) {
  storage::StoredHost h;
  h.row.host = name;
  for (int c = 0; c < chips; ++c) {
    trace::Chip chip;
    chip.ordinal = c;
    h.capture.host.chips.push_back(chip);
  }
  for (const char* k : {"A", "B", "C", "D"}) {
    trace::KernelDef d;
    d.module = "m";
    d.name = k;
    h.capture.kernels.push_back(d);
  }
  return h;
}

// Events as (start ns from kT0, duration ns, kernel, collective) on `chip`'s XLA Ops.
void AddOps(storage::StoredHost* h, int chip,
            std::vector<std::tuple<int64_t, int64_t, uint32_t, uint64_t>> events) {
  trace::EventBlock b;
  b.chip = chip;
  b.line = "XLA Ops";
  b.kind = trace::LineKind::kOps;
  b.base_ns = kT0;
  for (auto [s, d, k, c] : events) {
    b.start_ps.push_back(s * 1000);
    b.duration_ps.push_back(d * 1000);
    b.kernel.push_back(k);
    b.collective.push_back(c);
  }
  h->capture.blocks.push_back(std::move(b));
}

TEST(TimelineViewTest, WideKernelsAreSlicesAndNarrowOnesFillPixels) {
  storage::StoredHost h = Host("host-0", 1);
  // 10 us per pixel over 1 ms at 100 pixels.
  AddOps(&h, 0,
         {{0, 10'000, 0, 0},           // A: one pixel wide: a slice
          {20'000, 1'000, 1, 0},       // B: a tenth of pixel 2
          {25'000, 2'000, 3, 0},       // D: a fifth of pixel 2, the most of it
          {500'000, 400'000, 2, 7},    // C: a collective, 40 pixels
          {2'000'000, 5'000, 0, 0}});  // after the window
  TimelineWindow w;
  w.from_ns = kT0;
  w.to_ns = kT0 + 1'000'000;
  w.width_px = 100;
  TimelineView view(w);
  view.AddHost(h);
  const nlohmann::json j = nlohmann::json::parse(view.Finish());
  EXPECT_EQ(j["ns_per_px"], 10'000.0);
  ASSERT_EQ(j["tracks"].size(), 1u);
  const nlohmann::json& t = j["tracks"][0];
  EXPECT_EQ(t["host"], "host-0");
  const auto kernel = [&](int i) { return j["kernels"][i]["name"].get<std::string>(); };
  ASSERT_EQ(t["slices"].size(), 8u);  // A and C, four numbers each
  EXPECT_EQ(t["slices"][0], 0);
  EXPECT_EQ(t["slices"][1], 10'000);
  EXPECT_EQ(kernel(t["slices"][2]), "A");
  EXPECT_EQ(t["slices"][3], 0);
  EXPECT_EQ(t["slices"][4], 500'000);
  EXPECT_EQ(kernel(t["slices"][6]), "C");
  EXPECT_EQ(t["slices"][7], 1);     // the first collective of the response
  ASSERT_EQ(t["bins"].size(), 3u);  // pixel 2: 30% busy, mostly D
  EXPECT_EQ(t["bins"][0], 2);
  EXPECT_EQ(t["bins"][1], 300);
  EXPECT_EQ(kernel(t["bins"][2]), "D");
}

TEST(TimelineViewTest, AWindowClipsSlicesAndSpreadsANarrowKernelOverThePixelsItCrosses) {
  storage::StoredHost h = Host("host-0", 1);
  AddOps(&h, 0, {{0, 1'000'000, 0, 0}, {1'490'010, 20, 1, 0}});
  TimelineWindow w;
  w.from_ns = kT0 + 500'000;  // the middle of A
  w.to_ns = kT0 + 1'500'020;  // pixels of 10'000.2 ns: pixel 99 starts at 1'490'019.8
  w.width_px = 100;
  TimelineView view(w);
  view.AddHost(h);
  const nlohmann::json j = nlohmann::json::parse(view.Finish());
  const nlohmann::json& t = j["tracks"][0];
  ASSERT_EQ(t["slices"].size(), 4u);
  EXPECT_EQ(t["slices"][0], 0);  // clipped to the window
  EXPECT_EQ(t["slices"][1], 500'000);
  // B's 20 ns: 9.8 in pixel 98 and 10.2 in pixel 99, each shown as the least busy pixel.
  EXPECT_EQ(t["bins"], nlohmann::json({98, 1, 1, 99, 1, 1}));
}

TEST(TimelineViewTest, CountersAskedForComeAsPixelRangesAndEveryNameIsListed) {
  storage::StoredHost h = Host("host-0", 1);
  trace::CounterSeries busy;
  busy.name = "mxu_busy";
  busy.time_ns = {kT0, kT0 + 1'000, kT0 + 15'000};
  busy.value = {0.2, 0.8, 0.5};
  trace::CounterSeries energy;
  energy.name = "vdd_core_energy_nj";
  energy.time_ns = {kT0, kT0 + 10'000};
  energy.value = {0, 1'000};  // 1000 nJ in 10 us: 1e8 nJ/s
  h.capture.counters = {busy, energy};
  TimelineWindow w;
  w.from_ns = kT0;
  w.to_ns = kT0 + 1'000'000;
  w.width_px = 100;
  w.counters = {"mxu_busy", "vdd_core_energy_nj"};
  TimelineView view(w);
  view.AddHost(h);
  const nlohmann::json j = nlohmann::json::parse(view.Finish());
  EXPECT_EQ(j["counters"], nlohmann::json({"mxu_busy", "vdd_core_energy_nj"}));
  const nlohmann::json& c = j["tracks"][0]["counters"];
  EXPECT_EQ(c["mxu_busy"], nlohmann::json({0, 0.2, 0.8, 1, 0.5, 0.5}));
  EXPECT_EQ(c["vdd_core_energy_nj"], nlohmann::json({1, 1e8, 1e8}));
}

TEST(TimelineViewTest, AutoShowsTheMxuBusyFractionWhereThereIsOne) {
  storage::StoredHost h = Host("host-0", 1);
  for (const char* name : {"vpu_busy", "mxu_busy"}) {
    trace::CounterSeries s;
    s.name = name;
    s.time_ns = {kT0};
    s.value = {0.5};
    h.capture.counters.push_back(s);
  }
  TimelineWindow w;
  w.from_ns = kT0;
  w.to_ns = kT0 + 1'000;
  w.width_px = 10;
  w.counters = {"auto"};
  TimelineView view(w);
  view.AddHost(h);
  const nlohmann::json j = nlohmann::json::parse(view.Finish({{"from_ns", 0}}));
  EXPECT_EQ(j["from_ns"], 0);  // the caller's
  EXPECT_EQ(j["counters_shown"], nlohmann::json({"mxu_busy"}));
  EXPECT_EQ(j["tracks"][0]["counters"], nlohmann::json({{"mxu_busy", {0, 0.5, 0.5}}}));
}

// An overview at a fine width resampled to a page's width says what the events say at that
// width: the same slices, the same busy time per pixel, and mostly the same dominant kernel.
TEST(TimelineViewTest, AResampledOverviewMatchesTheEventsAtTheNarrowerWidth) {
  storage::StoredHost h = Host("host-0", 1);
  std::vector<std::tuple<int64_t, int64_t, uint32_t, uint64_t>> events;
  uint64_t x = 12345;
  int64_t t = 0;
  while (t < 10'000'000) {  // 10 ms of kernels from 200 ns to 60 us, gaps up to 5 us
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const int64_t d = 200 + static_cast<int64_t>((x >> 33) % 60'000);
    events.emplace_back(t, d, static_cast<uint32_t>((x >> 20) % 4), (x >> 40) % 3 == 0 ? t : 0);
    t += d + static_cast<int64_t>((x >> 45) % 5'000);
  }
  AddOps(&h, 0, events);
  TimelineWindow w;
  w.from_ns = kT0;
  w.to_ns = kT0 + 10'000'000;
  const auto view = [&](int width) {
    TimelineWindow at = w;
    at.width_px = width;
    TimelineView v(at);
    storage::StoredHost copy = h;
    v.AddHost(copy);
    return v;
  };
  const nlohmann::json direct = nlohmann::json::parse(view(500).Finish())["tracks"][0];
  const nlohmann::json resampled =
      nlohmann::json::parse(view(4000).Resampled(500).Finish())["tracks"][0];
  // Slices: the same set (collective numbers are the response's own, so compare the rest).
  auto slices = [](const nlohmann::json& s) {
    std::set<std::tuple<int64_t, int64_t, int>> out;
    for (size_t i = 0; i < s.size(); i += 4) out.emplace(s[i], s[i + 1], s[i + 2]);
    return out;
  };
  EXPECT_EQ(slices(resampled["slices"]), slices(direct["slices"]));
  EXPECT_GT(direct["slices"].size(), 40u);
  // Bins: the same pixels, busy within a per mille, the dominant kernel mostly the same.
  std::map<int, std::pair<int, int>> a, b;
  for (size_t i = 0; i < direct["bins"].size(); i += 3) {
    a[direct["bins"][i]] = {direct["bins"][i + 1], direct["bins"][i + 2]};
  }
  for (size_t i = 0; i < resampled["bins"].size(); i += 3) {
    b[resampled["bins"][i]] = {resampled["bins"][i + 1], resampled["bins"][i + 2]};
  }
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 100u);
  int same_kernel = 0;
  for (const auto& [px, v] : a) {
    ASSERT_EQ(b.count(px), 1u) << px;
    EXPECT_NEAR(b[px].first, v.first, 1) << px;
    same_kernel += b[px].second == v.second;
  }
  EXPECT_GT(same_kernel, static_cast<int>(a.size() * 9 / 10));
}

TEST(WaitHeatmapTest, EachChipWaitsForTheLastArrivalInItsStep) {
  storage::StoredHost a = Host("host-0", 2), b = Host("host-1", 1);
  trace::EventBlock steps;
  steps.chip = 0;
  steps.line = "Steps";
  steps.kind = trace::LineKind::kSteps;
  steps.base_ns = kT0;
  steps.start_ps = {0, 1'000'000'000};
  steps.duration_ps = {1'000'000'000, 1'000'000'000};  // two 1 ms steps
  steps.kernel = {3, 3};
  steps.collective = {0, 0};
  a.capture.blocks.push_back(steps);
  // Collective 5 in step 1: chips start at 100, 150 and 400 us; collective 6 in step 2.
  AddOps(&a, 0, {{100'000, 10'000, 2, 5}, {1'200'000, 10'000, 2, 6}});
  AddOps(&a, 1, {{150'000, 10'000, 2, 5}, {1'200'000, 10'000, 2, 6}});
  AddOps(&b, 0, {{400'000, 10'000, 2, 5}, {1'230'000, 10'000, 2, 6}});
  WaitHeatmap heatmap(kT0, kT0 + 2'000'000);
  heatmap.AddHost(a);
  heatmap.AddHost(b);
  const nlohmann::json j = heatmap.Finish();
  EXPECT_EQ(j["steps"], nlohmann::json({{0, 1'000'000}, {1'000'000, 2'000'000}}));
  ASSERT_EQ(j["chips"].size(), 3u);
  EXPECT_EQ(j["chips"][2]["host"], "host-1");
  EXPECT_EQ(j["wait_ns"][0], nlohmann::json({300'000, 30'000}));
  EXPECT_EQ(j["wait_ns"][1], nlohmann::json({250'000, 30'000}));
  EXPECT_EQ(j["wait_ns"][2], nlohmann::json({0, 0}));
}

TEST(WaitHeatmapTest, WithoutStepsTheCaptureIsCutIntoSixteen) {
  storage::StoredHost a = Host("host-0", 1);
  AddOps(&a, 0, {{100, 10, 2, 5}});
  WaitHeatmap heatmap(kT0, kT0 + 1'600);
  heatmap.AddHost(a);
  const nlohmann::json j = heatmap.Finish();
  ASSERT_EQ(j["steps"].size(), 16u);
  EXPECT_EQ(j["steps"][15], nlohmann::json({1'500, 1'600}));
}

}  // namespace
}  // namespace podprof::aggregator
