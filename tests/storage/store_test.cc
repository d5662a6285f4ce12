#include "storage/store.h"

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/zstd_codec.h"
#include "gtest/gtest.h"
#include "ingest/capture_ingest.h"
#include "storage/health.h"
#include "storage/kernel_counter_block.h"
#include "storage/retention.h"
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"
#include "tests/util/trace_fixtures.h"
#include "trace/columns.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof::storage {
namespace {

namespace fs = std::filesystem;
using podprof::testing::FixturePath;

class StoreTest : public ::testing::Test {
 protected:
  std::unique_ptr<Store> Open(StoreOptions o = {}) {
    auto s = Store::Open(db_.path(), o);
    EXPECT_OK(s);
    return s.ok() ? std::move(*s) : nullptr;
  }
  podprof::testing::TempDatabase db_{"store"};
};

ingest::CaptureInput FromFile(const std::string& id, const std::string& file, int64_t start_ns) {
  ingest::CaptureInput w;
  w.id = id;
  w.start_ns = start_ns;
  w.end_ns = start_ns + 1'000'000'000;
  w.source = CaptureSource::kImport;
  w.labels["job"] = "fixture";
  ingest::HostInput h;
  auto c = trace::ReadXSpaceFile(FixturePath(file));
  EXPECT_OK(c);
  if (!c.ok()) return w;
  h.host = c->host.name;
  h.capture = std::move(*c);
  w.hosts.push_back(std::move(h));
  return w;
}

// A one-chip capture of `kernel` in `module` (program `program`) running `n` times for `ps`.
ingest::CaptureInput Synthetic(const std::string& id, int64_t start_ns, const std::string& kernel,
                               uint64_t program, int n, int64_t ps, int64_t jitter = 0) {
  trace::HostCapture c;
  c.host.name = "h0";
  c.host.chips.resize(1);
  c.host.chips[0].peak_tflops = 100;
  trace::KernelDef k;
  k.module = "jit_step";
  k.name = kernel;
  k.category = "convolution fusion";
  k.program_id = program;
  k.flops = 1'000'000;
  c.kernels.push_back(k);
  trace::KernelDef other = k;
  other.name = "copy.1";
  other.category = "copy";
  c.kernels.push_back(other);
  trace::EventBlock b;
  b.line = "XLA Ops";
  for (int i = 0; i < n; ++i) {
    b.start_ps.push_back(i * 10 * ps);
    b.duration_ps.push_back(ps + (i % 7) * jitter);
    b.kernel.push_back(0);
    b.collective.push_back(0);
    b.start_ps.push_back(i * 10 * ps + 2 * ps);
    b.duration_ps.push_back(1000);
    b.kernel.push_back(1);
    b.collective.push_back(0);
  }
  c.blocks.push_back(b);
  ingest::CaptureInput w;
  w.id = id;
  w.start_ns = start_ns;
  w.end_ns = start_ns + 1000;
  ingest::HostInput h;
  h.host = "h0";
  h.capture = std::move(c);
  w.hosts.push_back(std::move(h));
  return w;
}

TEST_F(StoreTest, ImportedFixturesGiveTheSameStatisticsAsInspect) {
  auto store = Open();
  for (const char* f : {podprof::testing::kTpuFixture, podprof::testing::kGpuFixture}) {
    ASSERT_OK(ingest::StoreCapture(store->writer(), FromFile(f, f, 1000)));
    auto cap = trace::ReadXSpaceFile(FixturePath(f));
    std::map<std::pair<int, std::string>, std::pair<int64_t, int64_t>> want, got;
    for (const auto& s : trace::ComputeKernelStats(*cap)) {
      auto& t = want[{cap->host.chips[s.chip].ordinal, cap->kernels[s.kernel].name}];
      t.first += s.count;
      t.second += s.total_ps;
    }
    StatsQuery q;
    q.capture_id = f;
    q.group_by = Grouping::kChip;
    auto rows = store->kernels().Stats(q);
    ASSERT_OK(rows);
    for (const StatRow& r : *rows) {
      auto& t = got[{r.chip, r.kernel.op_name}];
      t.first += r.count;
      t.second += r.total_ps;
      EXPECT_EQ(r.host, cap->host.name);
    }
    EXPECT_EQ(got, want) << f;
  }
  std::string next;
  auto list = store->captures().List({}, &next);
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].labels.at("job"), "fixture");
  EXPECT_EQ((*list)[0].source, CaptureSource::kImport);
  EXPECT_OK(storage::CheckIntegrity(store->database()));
}

TEST_F(StoreTest, RollupsAndGroupings) {
  auto store = Open();
  ASSERT_OK(
      ingest::StoreCapture(store->writer(), FromFile("tpu", podprof::testing::kTpuFixture, 1)));
  StatsQuery q;
  q.capture_id = "tpu";
  q.top = 3;
  auto top = store->kernels().Stats(q);
  ASSERT_OK(top);
  ASSERT_EQ(top->size(), 3u);
  EXPECT_GE((*top)[0].total_ps, (*top)[1].total_ps);
  EXPECT_EQ((*top)[0].chips, 4);
  EXPECT_NEAR((*top)[0].peak_tflops, 918, 1e-9);
  q.top = 0;
  q.op_regex = "^all-reduce$";
  auto ar = store->kernels().Stats(q);
  ASSERT_OK(ar);
  ASSERT_EQ(ar->size(), 1u);
  EXPECT_EQ((*ar)[0].count, 12);
  q.op_regex.clear();
  q.group_by = Grouping::kCategory;
  auto cats = store->kernels().Stats(q);
  ASSERT_OK(cats);
  int64_t total = 0;
  for (const auto& r : *cats) total += r.count;
  // Every kernel event, across categories: all of the capture's events but module runs,
  // steps and the scopes inside kernels.
  EXPECT_EQ(total, [&] {
    int64_t kernel_events = 0;
    auto c = trace::ReadXSpaceFile(FixturePath(podprof::testing::kTpuFixture));
    for (const auto& b : c->blocks) {
      if (trace::IsKernelLine(b.kind)) kernel_events += b.size();
    }
    return kernel_events;
  }());
  EXPECT_EQ(total, 6013);
  q.group_by = Grouping::kChip;
  q.chip = 2;
  q.host = "tpu_v6e_4chip_host_offload";
  auto chip2 = store->kernels().Stats(q);
  ASSERT_OK(chip2);
  for (const auto& r : *chip2) EXPECT_EQ(r.chip, 2);
  q.order = Order::kP99;
  EXPECT_OK(store->kernels().Stats(q));
}

TEST_F(StoreTest, BadQueriesAreClear) {
  auto store = Open();
  StatsQuery q;
  q.capture_id = "nope";
  auto missing = store->kernels().Stats(q);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "nope"));
  ASSERT_OK(ingest::StoreCapture(store->writer(), Synthetic("a", 10, "fusion.1", 1, 10, 1000)));
  q.capture_id = "a";
  q.op_regex = "([";
  auto bad_regex = store->kernels().Stats(q);
  EXPECT_TRUE(absl::IsInvalidArgument(bad_regex.status()));
  EXPECT_TRUE(
      absl::StrContains(bad_regex.status().message(), "kernel \"([\" is not a regular expression"))
      << bad_regex.status();
  HistoryQuery h;
  h.op_regex = "fusion";
  h.since_ns = 10;
  h.until_ns = 5;
  EXPECT_TRUE(absl::IsInvalidArgument(store->kernels().History(h).status()));
  EXPECT_TRUE(absl::IsAlreadyExists(
      ingest::StoreCapture(store->writer(), Synthetic("a", 10, "f", 1, 1, 1))));
  CaptureQuery cq;
  cq.page_token = "garbage";
  std::string next;
  EXPECT_TRUE(absl::IsInvalidArgument(store->captures().List(cq, &next).status()));
}

TEST_F(StoreTest, HistoryFollowsAKernelAcrossRecompiles) {
  auto store = Open();
  for (int i = 0; i < 5; ++i) {
    // Program ids change with every recompile; the (module, op) identity does not.
    ASSERT_OK(ingest::StoreCapture(
        store->writer(), Synthetic("c" + std::to_string(i), 1000 * (i + 1), "fusion.1", 100 + i, 20,
                                   1'000'000 * (i + 1))));
  }
  HistoryQuery q;
  q.op_regex = "^fusion\\.1$";
  auto h = store->kernels().History(q);
  ASSERT_OK(h);
  ASSERT_EQ(h->size(), 1u);
  ASSERT_EQ((*h)[0].points.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const HistoryPoint& p = (*h)[0].points[i];
    EXPECT_EQ(p.capture_id, "c" + std::to_string(i));
    EXPECT_EQ(p.count, 20);
    EXPECT_NEAR(p.sketch.Quantile(0.5), 1e6 * (i + 1), 1e6 * (i + 1) * 0.006);
  }
  q.since_ns = 2500;
  q.until_ns = 4500;
  auto window = store->kernels().History(q);
  ASSERT_OK(window);
  EXPECT_EQ((*window)[0].points.size(), 2u);
}

// The store pairs each kernel's rows of two captures; judging the pairs is insight's
// (tests/insight/change_test.cc).
TEST_F(StoreTest, PairKernelsMatchesByModuleAndOp) {
  auto store = Open();
  ASSERT_OK(ingest::StoreCapture(store->writer(),
                                 Synthetic("base", 1, "fusion.1", 1, 200, 1'000'000, 5000)));
  ASSERT_OK(ingest::StoreCapture(store->writer(),
                                 Synthetic("slow", 2, "fusion.2", 2, 100, 1'200'000, 5000)));
  auto pairs = store->kernels().Pair("base", "slow", "");
  ASSERT_OK(pairs);
  ASSERT_EQ(pairs->size(), 3u);  // (module, op) order: copy.1 on both, fusion.1 and .2 on one
  EXPECT_EQ((*pairs)[0].op_name, "copy.1");
  ASSERT_TRUE((*pairs)[0].baseline && (*pairs)[0].candidate);
  EXPECT_EQ((*pairs)[0].baseline->count, 200);
  EXPECT_EQ((*pairs)[0].candidate->count, 100);
  EXPECT_EQ((*pairs)[1].op_name, "fusion.1");
  EXPECT_TRUE((*pairs)[1].baseline && !(*pairs)[1].candidate);
  EXPECT_EQ((*pairs)[2].op_name, "fusion.2");
  EXPECT_TRUE(!(*pairs)[2].baseline && (*pairs)[2].candidate);
  EXPECT_TRUE(absl::IsNotFound(store->kernels().Pair("base", "nope", "").status()));
}

// A history point that merges two kernel rows of one (module, op) (a recompile inside one
// capture) carries the flops both executed, each row's own flops times its own count.
TEST_F(StoreTest, HistoryPointSumsFlopsOverMergedRows) {
  auto store = Open();
  ingest::CaptureInput w = Synthetic("c", 1000, "fusion.1", 1, 10, 1'000'000);
  trace::HostCapture& c = *w.hosts[0].capture;
  trace::KernelDef recompiled = c.kernels[0];
  recompiled.program_id = 2;
  recompiled.flops = 3'000'000;
  c.kernels.push_back(recompiled);
  trace::EventBlock& b = c.blocks[0];
  for (int i = 0; i < 30; ++i) {  // 30 runs of 4 us after the first program's
    b.start_ps.push_back(200'000'000 + i * 10'000'000);
    b.duration_ps.push_back(4'000'000);
    b.kernel.push_back(2);
    b.collective.push_back(0);
  }
  ASSERT_OK(ingest::StoreCapture(store->writer(), std::move(w)));
  HistoryQuery q;
  q.op_regex = "^fusion\\.1$";
  auto h = store->kernels().History(q);
  ASSERT_OK(h);
  ASSERT_EQ(h->size(), 1u);
  ASSERT_EQ((*h)[0].points.size(), 1u);
  const HistoryPoint& p = (*h)[0].points[0];
  EXPECT_EQ(p.count, 40);
  EXPECT_EQ(p.total_ps, 10 * 1'000'000 + 30 * 4'000'000);
  EXPECT_DOUBLE_EQ(p.flops_executed, 10 * 1e6 + 30 * 3e6);
}

TEST_F(StoreTest, PaginationNewestFirst) {
  auto store = Open();
  for (int i = 0; i < 7; ++i) {
    ASSERT_OK(ingest::StoreCapture(store->writer(),
                                   Synthetic("p" + std::to_string(i), 100 + i, "f", 1, 1, 10)));
  }
  CaptureQuery q;
  q.limit = 3;
  std::vector<std::string> seen;
  std::string next;
  do {
    q.page_token = next;
    auto page = store->captures().List(q, &next);
    ASSERT_OK(page);
    for (const auto& c : *page) seen.push_back(c.id);
  } while (!next.empty());
  EXPECT_EQ(seen, (std::vector<std::string>{"p6", "p5", "p4", "p3", "p2", "p1", "p0"}));
}

TEST_F(StoreTest, TimelinesRoundTrip) {
  auto store = Open();
  ingest::CaptureInput w = FromFile("tpu", podprof::testing::kTpuFixture, 1);
  const trace::HostCapture original = *w.hosts[0].capture;
  ASSERT_OK(ingest::StoreCapture(store->writer(), w));
  auto blocks = store->captures().Timelines("tpu");
  ASSERT_OK(blocks);
  ASSERT_EQ(blocks->size(), original.blocks.size());
  for (size_t i = 0; i < blocks->size(); ++i) {
    EXPECT_EQ((*blocks)[i].start_ps, original.blocks[i].start_ps);
    EXPECT_EQ((*blocks)[i].duration_ps, original.blocks[i].duration_ps);
    EXPECT_EQ((*blocks)[i].collective, original.blocks[i].collective);
    EXPECT_EQ((*blocks)[i].base_ns, original.blocks[i].base_ns);
  }
}

TEST_F(StoreTest, HostClockTimesAreCorrectedWhenRead) {
  auto store = Open();
  // One host stored on its own clock, 3.5 ms ahead and drifting 40 ppm, with a counter series.
  ingest::CaptureInput in = Synthetic("hc", 1'000'000, "fusion.1", 1, 500, 2'000'000);
  trace::HostCapture cap = std::move(*in.hosts[0].capture);
  cap.blocks[0].base_ns = 1'700'000'000'000'000'000;
  trace::CounterSeries series;
  series.name = "core/busy";
  for (int i = 0; i < 100; ++i) {
    series.time_ns.push_back(cap.blocks[0].base_ns + i * 100'000);
    series.value.push_back(i % 3);
  }
  cap.counters.push_back(series);
  const trace::ClockCorrection c{3'500'000, 40'000, cap.blocks[0].base_ns + 5'000'000};
  ingest::PodAnalysis pod;
  auto analysed = ingest::AnalyseHost(store->writer(), 0, cap, &pod);
  ASSERT_OK(analysed);
  ingest::SetHostClock(c, &*analysed);
  analysed->write.host = "h0";
  CaptureWrite header;
  header.id = "hc";
  header.start_ns = 1;
  header.end_ns = 2;
  std::vector<ingest::AnalysedHost> hosts;
  hosts.push_back(std::move(*analysed));
  ASSERT_OK(ingest::WriteAnalysed(store->writer(), header, std::move(hosts), &pod));

  trace::HostCapture want = cap;
  trace::ApplyCorrection(c, &want);
  ASSERT_NE(want.blocks[0].start_ps.back(), cap.blocks[0].start_ps.back()) << "drift moved it";
  auto blocks = store->captures().Timelines("hc");
  ASSERT_OK(blocks);
  ASSERT_EQ(blocks->size(), 1u);
  EXPECT_EQ((*blocks)[0].base_ns, want.blocks[0].base_ns);
  EXPECT_EQ((*blocks)[0].start_ps, want.blocks[0].start_ps);
  int hosts_seen = 0;
  ASSERT_OK(store->captures().ForEachHost("hc", [&](StoredHost& h) {
    ++hosts_seen;
    EXPECT_TRUE(h.row.host_clock);
    EXPECT_EQ(h.row.correction.drift_ppb, 40'000);
    EXPECT_EQ(h.capture.blocks[0].start_ps, want.blocks[0].start_ps);
    EXPECT_EQ(h.capture.counters.at(0).time_ns, want.counters[0].time_ns);
    return absl::OkStatus();
  }));
  EXPECT_EQ(hosts_seen, 1);
}

// Two hosts of two chips: chip c of host h has (h + 1) * (c + 1) * 10 pairs of events and
// (c + 1) * 7 counter samples.
ingest::CaptureInput TwoHosts(const std::string& id) {
  ingest::CaptureInput w = Synthetic(id, 1'000'000, "fusion.1", 1, 0, 1000);
  w.hosts.clear();
  for (int h = 0; h < 2; ++h) {
    ingest::HostInput in;
    in.host = absl::StrCat("h", h);
    trace::HostCapture c = *Synthetic(id, 1'000'000, "fusion.1", 1, 0, 1000).hosts[0].capture;
    c.host.name = in.host;
    c.host.chips.resize(2);
    c.host.chips[1].ordinal = 1;
    c.blocks.clear();
    for (int chip = 0; chip < 2; ++chip) {
      const int pairs = (h + 1) * (chip + 1) * 10;
      c.blocks.push_back(Synthetic(id, 1, "fusion.1", 1, pairs, 1000).hosts[0].capture->blocks[0]);
      c.blocks.back().chip = chip;
      c.blocks.back().base_ns = 1'000'000;
      trace::CounterSeries s;
      s.chip = chip;
      s.name = "core/busy";
      for (int i = 0; i < (chip + 1) * 7; ++i) {
        s.time_ns.push_back(1'000'000 + i * 10);
        s.value.push_back(i);
      }
      c.counters.push_back(s);
    }
    in.capture = std::move(c);
    w.hosts.push_back(std::move(in));
  }
  return w;
}

TEST_F(StoreTest, ChipVolumesCountEveryChipsEventsAndSamples) {
  auto store = Open();
  ASSERT_OK(ingest::StoreCapture(store->writer(), TwoHosts("two")));
  auto volumes = store->captures().ChipVolumes("two");
  ASSERT_OK(volumes);
  ASSERT_EQ(volumes->size(), 4u);
  for (const ChipVolume& v : *volumes) {
    const int h = v.host == "h1" ? 1 : 0;
    EXPECT_EQ(v.events, 2 * (h + 1) * (v.ordinal + 1) * 10) << v.host << " " << v.ordinal;
    EXPECT_EQ(v.counter_samples, (v.ordinal + 1) * 7) << v.host << " " << v.ordinal;
  }
  EXPECT_EQ((*volumes)[0].host, "h0");
  EXPECT_EQ((*volumes)[3].host, "h1");
  EXPECT_EQ((*volumes)[3].ordinal, 1);
  EXPECT_TRUE(absl::IsNotFound(store->captures().ChipVolumes("none").status()));
}

// A view that draws kernels reads only kernel lines, and counters by name with samples only
// where it asks for them.
TEST_F(StoreTest, ForEachHostReadsOnlyTheLinesAndCounterSamplesSelected) {
  auto store = Open();
  ASSERT_OK(ingest::StoreCapture(store->writer(), TwoHosts("two")));
  auto events = [&](const HostSelection& only, size_t* counters, size_t* samples) {
    size_t n = 0;
    *counters = *samples = 0;
    EXPECT_OK(store->captures().ForEachHost("two", only, [&](StoredHost& h) {
      n += h.capture.EventCount();
      *counters += h.capture.counters.size();
      for (const auto& c : h.capture.counters) {
        *samples += c.time_ns.size();
      }
      return absl::OkStatus();
    }));
    return n;
  };
  size_t counters = 0, samples = 0;
  HostSelection steps;
  steps.line_kinds = {trace::LineKind::kSteps};  // the capture has only XLA Ops
  steps.counter_samples.emplace();
  EXPECT_EQ(events(steps, &counters, &samples), 0u);
  EXPECT_EQ(counters, 4u);  // every series listed...
  EXPECT_EQ(samples, 0u);   // ...with no samples
  HostSelection ops;
  ops.line_kinds = {trace::LineKind::kOps};
  ops.counter_samples = std::set<std::string>{"core/busy"};
  EXPECT_EQ(events(ops, &counters, &samples), 2u * (10 + 20 + 20 + 40));
  EXPECT_EQ(samples, 2u * (7 + 14));
  // A family of series by the start of their names, whatever counter_samples says.
  HostSelection by_prefix = steps;
  by_prefix.counter_sample_prefixes = {"core/"};
  events(by_prefix, &counters, &samples);
  EXPECT_EQ(counters, 4u);
  EXPECT_EQ(samples, 2u * (7 + 14));
  by_prefix.counter_sample_prefixes = {"megascale/", "core/busy/"};
  events(by_prefix, &counters, &samples);
  EXPECT_EQ(counters, 4u);
  EXPECT_EQ(samples, 0u);
}

// Series stored as an agent sends them, some taking their times from another of the chip's
// (trace/counter_v2.h's mode 4): read back exactly, whole or one of them alone, whose reference
// is then read for its times and listed without its samples. A series neither asked for nor
// named is not read at all: its damaged bytes fail only a read that asks for it.
TEST_F(StoreTest, SeriesSharingTheirChipsTimesReadBackExactly) {
  auto store = Open();
  ingest::CaptureInput w = TwoHosts("shared");
  std::map<std::string, trace::CounterSeries> want;  // by host, chip and name
  for (ingest::HostInput& in : w.hosts) {
    trace::HostCapture& c = *in.capture;
    c.counters.clear();
    for (int chip = 0; chip < 2; ++chip) {
      trace::CounterSeries energy, busy;
      energy.chip = busy.chip = chip;
      energy.name = "core/energy_nj";
      busy.name = "core/busy";
      for (int i = 0; i < 50 * (chip + 1); ++i) {
        energy.time_ns.push_back(1'000'000 + i * 977 + (i * 31) % 17);
        energy.value.push_back(1e6 + 0.1 * i * i);
        if (i % 3 == 0) {
          busy.time_ns.push_back(energy.time_ns.back());
          busy.value.push_back(0.25 * (i % 4));
        }
      }
      busy.encoded = trace::EncodeCountersSharingTimes(energy.name, energy.time_ns.data(),
                                                       energy.time_ns.size(), busy.time_ns.data(),
                                                       busy.value.data(), 0, busy.value.size());
      ASSERT_EQ(*trace::CounterReference(busy.encoded), energy.name);
      for (const trace::CounterSeries* s : {&busy, &energy}) {
        trace::CounterSeries plain = *s;
        plain.encoded.clear();
        want[absl::StrCat(in.host, "/", chip, "/", s->name)] = std::move(plain);
      }
      busy.time_ns.clear();  // stored as sent: the blob alone
      busy.value.clear();
      c.counters.push_back(std::move(busy));
      c.counters.push_back(std::move(energy));
      trace::CounterSeries temp;  // its own times
      temp.chip = chip;
      temp.name = "hbm/temp";
      temp.time_ns = {1'000'000, 1'100'000};
      temp.value = {40, 41};
      want[absl::StrCat(in.host, "/", chip, "/", temp.name)] = temp;
      c.counters.push_back(std::move(temp));
    }
  }
  ASSERT_OK(ingest::StoreCapture(store->writer(), std::move(w)));
  auto read = [&](bool only_busy) {
    HostSelection only;
    if (only_busy) only.counter_samples = std::set<std::string>{"core/busy"};
    int series = 0;
    const absl::Status s = store->captures().ForEachHost("shared", only, [&](StoredHost& h) {
      for (const trace::CounterSeries& s : h.capture.counters) {
        ++series;
        const trace::CounterSeries& w = want.at(
            absl::StrCat(h.row.host, "/", h.capture.host.chips[s.chip].ordinal, "/", s.name));
        if (only_busy && s.name != "core/busy") {
          EXPECT_TRUE(s.time_ns.empty()) << s.name;
          continue;
        }
        EXPECT_EQ(s.time_ns, w.time_ns) << h.row.host << " " << s.name;
        EXPECT_EQ(s.value, w.value) << h.row.host << " " << s.name;
      }
      return absl::OkStatus();
    });
    if (s.ok()) {
      EXPECT_EQ(series, 12) << only_busy;
    }
    return s;
  };
  ASSERT_OK(read(false));
  ASSERT_OK(read(true));

  // Every hbm/temp record damaged, a byte of its payload flipped.
  auto c = Connection::OpenReadOnly(db_.path());
  ASSERT_OK(c);
  auto rows = Statement::Prepare(**c,
                                 "SELECT segment, seg_offset, seg_bytes FROM counter_series "
                                 "WHERE name = 'hbm/temp'");
  ASSERT_OK(rows);
  int damaged = 0;
  ASSERT_OK((*rows)->ForEachRow([&](const Statement& row) {
    const std::string file = absl::StrFormat("%s.segments/%012d.seg", db_.path(), row.Int(0));
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    const int64_t at = row.Int(1) + row.Int(2) - 1;  // within the payload, header or not
    f.seekg(at);
    const char was = static_cast<char>(f.get());
    f.seekp(at);
    f.put(static_cast<char>(was ^ 0x5a));
    ++damaged;
    return absl::OkStatus();
  }));
  ASSERT_EQ(damaged, 4);
  EXPECT_EQ(read(false).code(), absl::StatusCode::kDataLoss);
  EXPECT_OK(read(true)) << "hbm/temp was read though neither asked for nor named";
}

TEST_F(StoreTest, ForEachHostReadsOnlyTheHostsAndChipsSelected) {
  auto store = Open();
  ASSERT_OK(ingest::StoreCapture(store->writer(), TwoHosts("two")));
  HostSelection only;
  only.hosts = {"h1"};
  only.chip_ordinals = {1};
  std::vector<std::string> seen;
  ASSERT_OK(store->captures().ForEachHost("two", only, [&](StoredHost& h) {
    seen.push_back(h.row.host);
    // Both chips listed, only chip 1's data read.
    EXPECT_EQ(h.capture.host.chips.size(), 2u);
    EXPECT_EQ(h.capture.EventCount(), 2u * 2 * 2 * 10);
    for (const auto& b : h.capture.blocks) EXPECT_EQ(b.chip, 1);
    EXPECT_EQ(h.capture.counters.size(), 1u);
    EXPECT_EQ(h.capture.counters.at(0).chip, 1);
    return absl::OkStatus();
  }));
  EXPECT_EQ(seen, (std::vector<std::string>{"h1"}));
  int all = 0;
  ASSERT_OK(store->captures().ForEachHost("two", [&](StoredHost& h) {
    all += static_cast<int>(h.capture.EventCount());
    return absl::OkStatus();
  }));
  EXPECT_EQ(all, 2 * (10 + 20 + 20 + 40));
}

TEST_F(StoreTest, HostDataWrittenAheadIsInvisibleUntilTheCaptureCommits) {
  auto store = Open();
  ingest::CaptureInput in = Synthetic("early", 1'000'000, "fusion.1", 1, 200, 2'000'000);
  trace::HostCapture& cap = *in.hosts[0].capture;
  trace::CounterSeries busy;  // a gauge over the whole block, for counter attributions
  busy.name = "core/busy";
  for (int i = 0; i <= 100; ++i) {
    busy.time_ns.push_back(cap.blocks[0].base_ns + i * 100'000);
    busy.value.push_back(1);
  }
  cap.counters.push_back(busy);
  auto attributed = [&] {
    int n = 0;
    auto rows = store->insights().KernelInsights("early", /*per_chip=*/true,
                                                 {"Tensor Core Sync Flag", "SyncWait"});
    EXPECT_OK(rows);
    if (rows.ok()) {
      for (const auto& r : *rows) n += !r.gauge_integrals.empty() || !r.totals.empty();
    }
    return n;
  };
  ingest::PodAnalysis pod;
  auto analysed = ingest::AnalyseHost(store->writer(), 0, *in.hosts[0].capture, &pod);
  ASSERT_OK(analysed);
  analysed->write.host = "h0";
  // No running capture of that id: the data has nowhere to go.
  absl::Status orphan = store->writer().WriteHostData("early", &analysed->write);
  EXPECT_EQ(orphan.code(), absl::StatusCode::kFailedPrecondition) << orphan;
  EXPECT_TRUE(absl::StrContains(orphan.message(), "not running")) << orphan;
  ASSERT_FALSE(analysed->write.timelines.empty()) << "kept for a later attempt";

  CaptureWrite header;
  header.id = "early";
  header.start_ns = 1'000'000;
  header.end_ns = 2'000'000;
  ASSERT_OK(store->writer().BeginCapture(header));
  ASSERT_OK(store->writer().WriteHostData("early", &analysed->write));
  EXPECT_TRUE(analysed->write.timelines.empty()) << "moved to the store";
  EXPECT_EQ(analysed->write.chip_rows.size(), 1u);
  // Written, but the capture is still running: none of its hosts or timelines show.
  auto running = store->captures().Get("early");
  ASSERT_OK(running);
  EXPECT_EQ(running->status, CaptureState::kRunning);
  EXPECT_TRUE(running->host_rows.empty());
  ASSERT_OK(store->captures().Timelines("early"));
  EXPECT_TRUE(store->captures().Timelines("early")->empty());
  EXPECT_EQ(attributed(), 0) << "attributions written ahead are not shown yet";
  StatsQuery running_stats;
  running_stats.capture_id = "early";
  ASSERT_OK(store->kernels().Stats(running_stats));
  EXPECT_TRUE(store->kernels().Stats(running_stats)->empty())
      << "statistics written ahead are not shown yet";

  std::vector<ingest::AnalysedHost> hosts;
  hosts.push_back(std::move(*analysed));
  ASSERT_OK(ingest::WriteAnalysed(store->writer(), header, std::move(hosts), &pod));
  auto done = store->captures().Get("early");
  ASSERT_OK(done);
  EXPECT_EQ(done->status, CaptureState::kComplete);
  EXPECT_EQ(done->host_rows.size(), 1u);
  EXPECT_EQ(done->events, 400);
  auto blocks = store->captures().Timelines("early");
  ASSERT_OK(blocks);
  ASSERT_EQ(blocks->size(), 1u);
  EXPECT_EQ((*blocks)[0].size(), 400u);
  StatsQuery q;
  q.capture_id = "early";
  auto stats = store->kernels().Stats(q);
  ASSERT_OK(stats);
  EXPECT_EQ(stats->size(), 2u);
  EXPECT_GT(attributed(), 0);
}

// Two captures running at once, their hosts' statistics written ahead in turns, so that their
// rows interleave: each shows only its own once whole, deleting one leaves the other's, and
// a capture that fails or is interrupted leaves none of what its hosts wrote ahead.
TEST_F(StoreTest, StatisticsWrittenAheadInterleaveAndStayTheirCaptures) {
  auto store = Open();
  auto rows = [&](const char* capture) {  // "": every capture's
    int64_t n = -1;
    const absl::Status counted = store->database().OnWriter([&](Connection& c) -> absl::Status {
      ASSIGN_OR_RETURN(auto s, Statement::Prepare(c,
                                                  "SELECT COUNT(*) FROM kernel_stats WHERE "
                                                  "?1 = '' OR capture = (SELECT seq FROM "
                                                  "captures WHERE id = ?1)"));
      s->Bind(1, std::string(capture));
      ASSIGN_OR_RETURN(bool found, s->Step());
      if (found) n = s->Int(0);
      return absl::OkStatus();
    });
    EXPECT_OK(counted);
    return n;
  };
  auto executions = [&](const char* capture) {
    StatsQuery q;
    q.capture_id = capture;
    int64_t n = 0;
    auto stats = store->kernels().Stats(q);
    EXPECT_OK(stats);
    if (stats.ok()) {
      for (const auto& r : *stats) n += r.count;
    }
    return n;
  };
  // Captures a and b of two hosts each, c and d of one; hosts of a run 100 kernel pairs, of b
  // 300, written ahead a, b, a, b (c and d beside them).
  std::map<std::string, ingest::PodAnalysis> pods;
  std::map<std::string, std::vector<ingest::AnalysedHost>> hosts;
  std::map<std::string, CaptureWrite> headers;
  for (const char* id : {"a", "b", "c", "d"}) {
    CaptureWrite& h = headers[id];
    h.id = id;
    h.start_ns = id[0] == 'a' ? 1'000'000 : 5'000'000'000;  // a the oldest
    h.end_ns = h.start_ns + 1'000'000;
    ASSERT_OK(store->writer().BeginCapture(h));
  }
  for (int host = 0; host < 2; ++host) {
    for (const char* id : {"a", "b", "c", "d"}) {
      if (host == 1 && (id[0] == 'c' || id[0] == 'd')) continue;
      const int pairs = id[0] == 'b' ? 300 : 100;
      ingest::CaptureInput in = Synthetic(id, 1'000'000, "fusion.1", 1, pairs, 2'000'000);
      auto analysed = ingest::AnalyseHost(store->writer(), static_cast<size_t>(host),
                                          *in.hosts[0].capture, &pods[id]);
      ASSERT_OK(analysed);
      analysed->write.host = absl::StrCat("h", host);
      ASSERT_OK(store->writer().WriteHostData(id, &analysed->write));
      EXPECT_TRUE(analysed->write.stats.empty()) << "written ahead";
      hosts[id].push_back(std::move(*analysed));
    }
  }
  EXPECT_EQ(executions("a"), 0) << "not shown while running";
  for (const char* id : {"a", "b"}) {
    ASSERT_OK(ingest::WriteAnalysed(store->writer(), headers[id], std::move(hosts[id]), &pods[id]));
  }
  EXPECT_EQ(executions("a"), 2 * 200);
  EXPECT_EQ(executions("b"), 2 * 600);
  ASSERT_OK(store->writer().EndFailed("c"));
  EXPECT_EQ(rows("c"), 0);
  EXPECT_GT(rows("d"), 0);
  ASSERT_OK(store->writer().Recover());  // d was running: an aggregator that restarted
  EXPECT_EQ(rows("d"), 0);
  EXPECT_EQ(store->captures().Get("d")->status, CaptureState::kInterrupted);

  // Deleting a (its range holds b's rows too) leaves b's.
  RetentionPolicy age;
  age.max_age_ns = 2'000'000'000;
  ASSERT_OK(storage::ApplyRetention(store->database(), age, 6'000'000'000));
  EXPECT_TRUE(absl::IsNotFound(store->captures().Get("a").status()));
  EXPECT_GT(rows("b"), 0);
  EXPECT_EQ(rows(""), rows("b")) << "every row left is b's";
  EXPECT_EQ(executions("b"), 2 * 600);
}

TEST_F(StoreTest, RetentionByAgeSizeAndTimelines) {
  auto store = Open();
  for (int i = 0; i < 6; ++i) {
    ASSERT_OK(ingest::StoreCapture(store->writer(),
                                   FromFile("r" + std::to_string(i), podprof::testing::kTpuFixture,
                                            int64_t{i} * 1'000'000'000)));
  }
  RetentionPolicy timelines;
  timelines.keep_timelines_ns = 3'000'000'000;
  auto r1 = storage::ApplyRetention(store->database(), timelines, 6'000'000'000);
  ASSERT_OK(r1);
  EXPECT_TRUE(store->captures().Timelines("r0")->empty());
  EXPECT_FALSE(store->captures().Timelines("r5")->empty());
  StatsQuery q;
  q.capture_id = "r0";
  EXPECT_FALSE(store->kernels().Stats(q)->empty());  // statistics outlive timelines

  RetentionPolicy age;
  age.max_age_ns = 4'500'000'000;
  age.batch = 1;
  auto r2 = storage::ApplyRetention(store->database(), age, 6'000'000'000);
  ASSERT_OK(r2);
  EXPECT_EQ(r2->captures_deleted, 2);  // r0 and r1
  std::string next;
  EXPECT_EQ(store->captures().List({}, &next)->size(), 4u);

  auto used = storage::UsedBytes(store->database());
  ASSERT_OK(used);
  RetentionPolicy size;
  size.max_bytes = *used * 3 / 4;
  auto r3 = storage::ApplyRetention(store->database(), size, 6'000'000'000);
  ASSERT_OK(r3);
  EXPECT_GE(r3->captures_deleted, 1);
  auto left = store->captures().List({}, &next);
  ASSERT_FALSE(left->empty());
  EXPECT_EQ(left->front().id, "r5");  // the newest survive
  EXPECT_LE(*storage::UsedBytes(store->database()), *used * 3 / 4);
  EXPECT_OK(storage::CheckIntegrity(store->database()));
}

// Since version 13 a host's counter attributions are one blob (kernel_counter_blocks), not a
// kernel_counters row each: the per-chip insight reads back exactly what the analysis attributed,
// a capture stored before keeps its rows and reads as before, and a damaged blob is an error
// naming the host.
TEST_F(StoreTest, CounterAttributionsAreOneBlockPerHostAndOlderRowsStillRead) {
  {
    auto c = Connection::Open(db_.path(), true);
    ASSERT_OK(c);
    ASSERT_OK(Migrate(**c, 12));
    ASSERT_OK((*c)->Exec(
        "INSERT INTO captures (seq, id, start_ns, end_ns, status, created_ns) "
        "VALUES (1, 'old', 5, 6, 'complete', 7);"
        "INSERT INTO hosts (id, name) VALUES (1, 'h-old');"
        "INSERT INTO capture_hosts (capture, host_id, status) VALUES (1, 1, 'complete');"
        "INSERT INTO chips (id, capture, host_id, ordinal, global_id, generation, device_type, "
        "peak_tflops, peak_hbm_gbps) VALUES (1, 1, 1, 3, 3, 'v5p', 'TPU v5p', 459, 2765);"
        "INSERT INTO kernels (id, module, op_name, category, program_id, hlo_hash, flops, "
        "bytes_accessed, source) VALUES (1, 'jit_old', 'fusion.9', 'loop fusion', 1, 0, 0, 0, "
        "'');"
        "INSERT INTO kernel_counters (capture, chip_id, kernel_id, name, cumulative, integral, "
        "covered_ps, executions) VALUES (1, 1, 1, 'core/busy', 0, 5e6, 1000, 3), "
        "(1, 1, 1, 'core/energy_nj', 1, 42.5, 1000, 3);"));
  }
  auto store = Open();
  ingest::CaptureInput in = Synthetic("new", 1'000'000, "fusion.1", 1, 200, 2'000'000);
  trace::HostCapture& cap = *in.hosts[0].capture;
  trace::CounterSeries busy, energy;
  busy.name = "core/busy";
  energy.name = "core/energy_nj";
  for (int i = 0; i <= 100; ++i) {
    busy.time_ns.push_back(cap.blocks[0].base_ns + i * 100'000);
    busy.value.push_back(0.25 + (i % 3) * 0.25);
    energy.time_ns.push_back(busy.time_ns.back());
    energy.value.push_back(i * 1000.5);
  }
  cap.counters = {busy, energy};
  ingest::PodAnalysis pod;
  auto analysed = ingest::AnalyseHost(store->writer(), 0, cap, &pod);
  ASSERT_OK(analysed);
  analysed->write.host = "h0";
  // What the analysis attributed, keyed as the per-chip insight keys it.
  std::map<std::tuple<int64_t, std::string>, std::pair<double, int64_t>> attributed;
  for (const trace::KernelCounter& k : analysed->write.attributions) {
    attributed[{analysed->write.kernel_ids[k.kernel], k.counter}] = {k.integral, k.covered_ps};
  }
  ASSERT_EQ(attributed.size(), 4u) << "two kernels, two counters";
  CaptureWrite header;
  header.id = "new";
  header.start_ns = 1'000'000;
  header.end_ns = 2'000'000;
  std::vector<ingest::AnalysedHost> hosts;
  hosts.push_back(std::move(*analysed));
  ASSERT_OK(ingest::WriteAnalysed(store->writer(), header, std::move(hosts), &pod));

  const ScopeName sync{"Tensor Core Sync Flag", "SyncWait"};
  auto rows = store->insights().KernelInsights("new", /*per_chip=*/true, sync);
  ASSERT_OK(rows);
  std::map<std::tuple<int64_t, std::string>, std::pair<double, int64_t>> read;
  for (const KernelInsightRow& r : *rows) {
    EXPECT_EQ(r.host, "h0");
    EXPECT_EQ(r.chip, 0);
    for (const auto& [name, total] : r.totals) read[{r.kernel_id, name}] = {total, r.covered_ps};
    for (const auto& [name, g] : r.gauge_integrals) read[{r.kernel_id, name}] = g;
  }
  EXPECT_EQ(read, attributed) << "exactly what was attributed, through the block";

  auto old = store->insights().KernelInsights("old", /*per_chip=*/true, sync);
  ASSERT_OK(old);
  ASSERT_EQ(old->size(), 1u);
  EXPECT_EQ((*old)[0].host, "h-old");
  EXPECT_EQ((*old)[0].chip, 3);
  EXPECT_EQ((*old)[0].kernel_id, 1);
  EXPECT_EQ((*old)[0].totals.at("core/energy_nj"), 42.5);
  EXPECT_EQ((*old)[0].gauge_integrals.at("core/busy"), (std::pair<double, int64_t>{5e6, 1000}));

  auto c = Connection::Open(db_.path(), false);
  ASSERT_OK(c);
  auto count = [&](const std::string& sql) -> int64_t {
    auto s = Statement::Prepare(**c, sql);
    EXPECT_OK(s);
    if (!s.ok()) return -1;
    auto row = (*s)->Step();
    return row.ok() && *row ? (*s)->Int(0) : -1;
  };
  EXPECT_EQ(count("SELECT COUNT(*) FROM kernel_counters WHERE capture = 2"), 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM kernel_counter_blocks WHERE capture = 2"), 1);
  EXPECT_EQ(count("SELECT SUM(rows) FROM kernel_counter_blocks WHERE capture = 2"), 4);

  ASSERT_OK((*c)->Exec("UPDATE kernel_counter_blocks SET data = X'28b52ffd00' WHERE capture = 2"));
  auto damaged = store->insights().KernelInsights("new", /*per_chip=*/true, sync);
  ASSERT_FALSE(damaged.ok());
  EXPECT_TRUE(absl::IsDataLoss(damaged.status())) << damaged.status();
  EXPECT_TRUE(absl::StrContains(damaged.status().message(), "host h0")) << damaged.status();
  ASSERT_OK(store->insights().KernelInsights("new", /*per_chip=*/false, sync))
      << "the pod-wide figures come from the roll-ups";
}

// The block's codec: every field exact (NaN payloads, -0.0, negative chips and extremes), an
// index out of range named with its host, and no truncation or forged count read as rows.
uint64_t BitsOf(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}

TEST(KernelCounterBlockTest, RoundTripsExactlyAndRefusesDamage) {
  std::vector<trace::Chip> chips(2);
  chips[0].ordinal = 7;
  chips[1].ordinal = -1;
  const std::vector<int64_t> kernel_ids = {1, int64_t{1} << 40};
  std::vector<trace::KernelCounter> rows;
  double nan_payload;
  const uint64_t nan_bits = 0x7ff8dead0000beef;
  std::memcpy(&nan_payload, &nan_bits, 8);
  int i = 0;
  for (double v : {0.0, -0.0, 1e308, -3.25, nan_payload}) {
    trace::KernelCounter k;
    k.chip = i % 2;
    k.kernel = static_cast<uint32_t>(i % 2);
    k.counter = i % 2 ? "perf/die1_cycles" : "hbm_busy";
    k.kind = i % 2 ? trace::CounterKind::kCumulative : trace::CounterKind::kGauge;
    k.integral = v;
    k.covered_ps = i == 4 ? INT64_MAX : -i;
    k.executions = i == 3 ? INT64_MIN : i;
    rows.push_back(k);
    ++i;
  }
  auto blob = internal::EncodeKernelCounterBlock("h0", rows, chips, kernel_ids);
  ASSERT_OK(blob);
  auto back = internal::DecodeKernelCounterBlock(*blob);
  ASSERT_OK(back);
  ASSERT_EQ(back->size(), rows.size());
  for (size_t j = 0; j < rows.size(); ++j) {
    const internal::StoredKernelCounter& r = (*back)[j];
    EXPECT_EQ(r.chip_ordinal, chips[rows[j].chip].ordinal);
    EXPECT_EQ(r.kernel_id, kernel_ids[rows[j].kernel]);
    EXPECT_EQ(r.counter, rows[j].counter);
    EXPECT_EQ(r.cumulative, rows[j].kind == trace::CounterKind::kCumulative);
    EXPECT_EQ(BitsOf(r.integral), BitsOf(rows[j].integral));
    EXPECT_EQ(r.covered_ps, rows[j].covered_ps);
    EXPECT_EQ(r.executions, rows[j].executions);
  }

  rows[2].kernel = 2;
  auto bad = internal::EncodeKernelCounterBlock("host-9", rows, chips, kernel_ids);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "host host-9: kernel index 2"));

  // Every cut of the raw content, recompressed, is refused (never fewer rows read as whole).
  auto raw = ZstdDecompress(*blob, 1 << 20, "test");
  ASSERT_OK(raw);
  for (size_t cut = 0; cut < raw->size(); ++cut) {
    auto short_blob = internal::DecodeKernelCounterBlock(ZstdCompress(raw->substr(0, cut), 1));
    EXPECT_TRUE(absl::IsDataLoss(short_blob.status())) << "cut at " << cut;
  }
  EXPECT_TRUE(absl::IsDataLoss(internal::DecodeKernelCounterBlock("not zstd").status()));
}

TEST_F(StoreTest, MigratesAnOlderSchemaAndRefusesANewerOne) {
  {
    auto c = Connection::Open(db_.path(), true);
    ASSERT_OK(c);
    ASSERT_OK(Migrate(**c, 1));
    ASSERT_OK(
        (*c)->Exec("INSERT INTO captures (id, start_ns, end_ns, status, created_ns) "
                   "VALUES ('old', 5, 6, 'complete', 7)"));
  }
  {
    auto store = Open();
    std::string next;
    auto list = store->captures().List({}, &next);
    ASSERT_OK(list);
    ASSERT_EQ(list->size(), 1u);
    EXPECT_EQ((*list)[0].source, CaptureSource::kCapture);  // the column version 2 added, defaulted
  }
  {
    auto c = Connection::Open(db_.path(), false);
    ASSERT_OK((*c)->Exec("PRAGMA user_version = 99"));
  }
  auto newer = Store::Open(db_.path());
  ASSERT_FALSE(newer.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(newer.status()));
  EXPECT_TRUE(absl::StrContains(newer.status().message(), "newer")) << newer.status();
}

// Each host's slice of a multi-slice job is stored with the capture and read back; a host of a
// capture stored before version 10 (and one whose agent knew no slice) reads -1.
TEST_F(StoreTest, EachHostsSliceRoundTripsAndOlderRowsHaveNone) {
  {
    auto c = Connection::Open(db_.path(), true);
    ASSERT_OK(c);
    ASSERT_OK(Migrate(**c, 9));
    ASSERT_OK((*c)->Exec(
        "INSERT INTO captures (seq, id, start_ns, end_ns, status, created_ns) "
        "VALUES (1, 'old', 5, 6, 'complete', 7);"
        "INSERT INTO hosts (id, name) VALUES (1, 'h-old');"
        "INSERT INTO capture_hosts (capture, host_id, status) VALUES (1, 1, 'complete');"));
  }
  auto store = Open();
  ingest::PodAnalysis pod;
  std::vector<ingest::AnalysedHost> hosts;
  const std::vector<std::pair<std::string, int>> slices = {{"h0", 2}, {"h1", 0}, {"h2", -1}};
  for (const auto& [name, slice] : slices) {
    ingest::CaptureInput in = Synthetic("s", 1'000'000, "fusion.1", 1, 20, 1'000'000);
    auto analysed = ingest::AnalyseHost(store->writer(), hosts.size(), *in.hosts[0].capture, &pod);
    ASSERT_OK(analysed);
    analysed->write.host = name;
    analysed->write.slice = slice;
    hosts.push_back(std::move(*analysed));
  }
  CaptureWrite header;
  header.id = "sliced";
  header.start_ns = 10;
  header.end_ns = 20;
  ASSERT_OK(ingest::WriteAnalysed(store->writer(), header, std::move(hosts), &pod));

  auto sliced = store->captures().Get("sliced");
  ASSERT_OK(sliced);
  std::map<std::string, int> got;
  for (const HostRow& h : sliced->host_rows) got[h.host] = h.slice;
  EXPECT_EQ(got, (std::map<std::string, int>{{"h0", 2}, {"h1", 0}, {"h2", -1}}));
  auto old = store->captures().Get("old");
  ASSERT_OK(old);
  ASSERT_EQ(old->host_rows.size(), 1u);
  EXPECT_EQ(old->host_rows[0].slice, -1);
}

TEST_F(StoreTest, FullDiskFailsTheWriteAndKeepsTheDatabaseServing) {
  {
    auto store = Open();
    ASSERT_OK(ingest::StoreCapture(store->writer(), Synthetic("small", 1, "f", 1, 10, 1000)));
  }
  StoreOptions tight;
  tight.max_page_count = 30;
  auto store = Open(tight);
  absl::Status s =
      ingest::StoreCapture(store->writer(), FromFile("big", podprof::testing::kGpuFixture, 2));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "full")) << s;
  EXPECT_OK(storage::CheckIntegrity(store->database()));
  std::string next;
  auto list = store->captures().List({}, &next);
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 1u);  // nothing of "big" is visible
  EXPECT_EQ((*list)[0].id, "small");
  StatsQuery q;
  q.capture_id = "small";
  EXPECT_OK(store->kernels().Stats(q));
}

TEST_F(StoreTest, ReadersSeeWholeCapturesDuringWrites) {
  auto store = Open();
  auto cap = trace::ReadXSpaceFile(FixturePath(podprof::testing::kTpuFixture));
  const int64_t kernels =
      static_cast<int64_t>(trace::RollUpByKernel(trace::ComputeKernelStats(*cap)).size());
  std::atomic<bool> done{false};
  std::atomic<int> reads{0}, partial{0};
  std::thread reader([&] {
    while (!done) {
      std::string next;
      auto list = store->captures().List({}, &next);
      if (!list.ok()) continue;
      for (const auto& c : *list) {
        // A visible capture always has all its roll-ups.
        if (c.kernels != kernels) partial++;
      }
      reads++;
    }
  });
  for (int i = 0; i < 8; ++i) {
    ASSERT_OK(ingest::StoreCapture(
        store->writer(), FromFile("w" + std::to_string(i), podprof::testing::kTpuFixture, i)));
  }
  done = true;
  reader.join();
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(partial.load(), 0);
}

TEST_F(StoreTest, SketchFunctionsWorkInSql) {
  auto store = Open();
  ASSERT_OK(
      ingest::StoreCapture(store->writer(), FromFile("tpu", podprof::testing::kTpuFixture, 1)));
  auto c = Connection::Open(db_.path(), false);
  ASSERT_OK(c);
  auto st = Statement::Prepare(**c,
                               "SELECT dds_quantile(dds_merge(s.sketch), 0.5), SUM(s.count) FROM "
                               "kernel_stats s JOIN kernels k ON k.id = s.kernel_id WHERE "
                               "k.op_name = 'all-reduce'");
  ASSERT_OK(st);
  ASSERT_TRUE(*(*st)->Step());
  EXPECT_EQ((*st)->Int(1), 12);
  EXPECT_NEAR((*st)->Double(0), 121.69e9, 121.69e9 * 0.01);
}

}  // namespace
}  // namespace podprof::storage
