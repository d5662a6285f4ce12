#include "export/narrow.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"
#include "trace/columns.h"

namespace podprof::exporter {
namespace {

constexpr int64_t kBase = 1'800'000'000'000'000'000;  // ns since the epoch
constexpr int64_t kUs = 1'000'000;                    // ps

trace::EventBlock Block(int chip, const std::string& line, std::vector<int64_t> start_us,
                        std::vector<int64_t> dur_us, std::vector<uint32_t> kernel) {
  trace::EventBlock b;
  b.chip = chip;
  b.line = line;
  b.kind = trace::LineKindOfName(line);
  b.base_ns = kBase;
  for (size_t i = 0; i < start_us.size(); ++i) {
    b.start_ps.push_back(start_us[i] * kUs);
    b.duration_ps.push_back(dur_us[i] * kUs);
    b.kernel.push_back(kernel[i]);
    b.collective.push_back(kernel[i] == 2 ? 99 : 0);
  }
  return b;
}

// Two chips (ordinals 0 and 3), each with a module run over 0-100 us, kernels fusion.1 (0-10,
// 40-50, 90-100 us) and all-reduce.2 (20-30 us), a Pallas kernel with two scopes inside it
// (60-70 us), and a counter sampled every 10 us.
trace::HostCapture Host() {
  trace::HostCapture c;
  c.host.name = "host-0";
  for (int ordinal : {0, 3}) {
    trace::Chip chip;
    chip.ordinal = ordinal;
    c.host.chips.push_back(chip);
  }
  c.kernels.resize(5);
  const char* names[] = {"jit_step", "fusion.1", "all-reduce.2", "flash_attention",
                         "flash_attention/qk"};
  for (int k = 0; k < 5; ++k) {
    c.kernels[k].name = names[k];
    if (k >= 1 && k <= 3) c.kernels[k].module = "jit_step";  // the kernels of the step
  }
  for (int chip = 0; chip < 2; ++chip) {
    c.blocks.push_back(Block(chip, "XLA Modules", {0}, {100}, {0}));
    c.blocks.push_back(
        Block(chip, "XLA Ops", {0, 20, 40, 60, 90}, {10, 10, 10, 10, 10}, {1, 2, 1, 3, 1}));
    c.blocks.push_back(Block(chip, "XLA TraceMe", {61, 65}, {3, 3}, {4, 4}));
    trace::CounterSeries s;
    s.chip = chip;
    s.name = "mxu_busy";
    for (int i = 0; i <= 10; ++i) {
      s.time_ns.push_back(kBase + i * 10'000);
      s.value.push_back(i);
    }
    c.counters.push_back(s);
  }
  return c;
}

// (chip ordinal, line, start us) of every event left.
std::set<std::tuple<int, std::string, int64_t>> Events(const trace::HostCapture& c) {
  std::set<std::tuple<int, std::string, int64_t>> out;
  for (const trace::EventBlock& b : c.blocks) {
    for (size_t i = 0; i < b.size(); ++i) {
      out.insert({c.host.chips[b.chip].ordinal, b.line, b.start_ps[i] / kUs});
    }
  }
  return out;
}

Narrower Make(Selection s) {
  absl::StatusOr<Narrower> n = Narrower::Create(std::move(s));
  EXPECT_OK(n);
  return *std::move(n);
}

TEST(NarrowTest, TheDefaultKeepsEverything) {
  Narrower n = Make(Selection());
  EXPECT_TRUE(n.KeepsEverything());
  trace::HostCapture c = Host();
  ASSERT_OK(n.Apply(&c));
  EXPECT_EQ(c.EventCount(), Host().EventCount());
  EXPECT_EQ(c.kernels.size(), 5u);
  EXPECT_TRUE(n.WantsHost("anything"));
  EXPECT_TRUE(n.WantsChip(7));
}

TEST(NarrowTest, TheWindowKeepsOverlappingEventsWholeAndSamplesInside) {
  Selection s;
  s.from_ns = kBase + 25'000;  // 25 us: inside all-reduce.2 (20-30 us)
  s.to_ns = kBase + 45'000;    // 45 us: inside the second fusion.1 (40-50 us)
  Narrower n = Make(s);
  trace::HostCapture c = Host();
  ASSERT_OK(n.Apply(&c));
  std::set<std::tuple<int, std::string, int64_t>> want;
  for (int ordinal : {0, 3}) {
    want.insert({ordinal, "XLA Modules", 0});  // runs across the whole window
    want.insert({ordinal, "XLA Ops", 20});
    want.insert({ordinal, "XLA Ops", 40});
  }
  EXPECT_EQ(Events(c), want);
  // Kept whole: the edge events keep their true start and duration.
  for (const trace::EventBlock& b : c.blocks) {
    for (int64_t d : b.duration_ps) EXPECT_GE(d, 10 * kUs);
  }
  // The scopes (61-68 us) are outside: their block is gone.
  for (const trace::EventBlock& b : c.blocks) EXPECT_NE(b.line, "XLA TraceMe");
  ASSERT_EQ(c.counters.size(), 2u);
  for (const trace::CounterSeries& series : c.counters) {
    EXPECT_EQ(series.time_ns, (std::vector<int64_t>{kBase + 30'000, kBase + 40'000}));
    EXPECT_EQ(series.value, (std::vector<double>{3, 4}));
  }
  // Only the kernels still used are left, and the events point at the right ones.
  ASSERT_EQ(c.kernels.size(), 3u);
  for (const trace::EventBlock& b : c.blocks) {
    for (size_t i = 0; i < b.size(); ++i) {
      const std::string& name = c.kernels[b.kernel[i]].name;
      if (b.line == "XLA Modules") {
        EXPECT_EQ(name, "jit_step");
      }
      if (b.line == "XLA Ops") {
        EXPECT_EQ(name, b.start_ps[i] == 20 * kUs ? "all-reduce.2" : "fusion.1");
        EXPECT_EQ(b.collective[i] != 0, name == "all-reduce.2");
      }
    }
  }
}

TEST(NarrowTest, AnEventEndingAtTheWindowsStartIsOutsideAndOneStartingAtItsEndToo) {
  Selection s;
  s.from_ns = kBase + 10'000;  // fusion.1 ends here
  s.to_ns = kBase + 40'000;    // the second fusion.1 begins here
  Narrower n = Make(s);
  trace::HostCapture c = Host();
  ASSERT_OK(n.Apply(&c));
  std::set<int64_t> ops;
  for (const auto& [chip, line, start] : Events(c)) {
    if (line == "XLA Ops") ops.insert(start);
  }
  EXPECT_EQ(ops, (std::set<int64_t>{20}));
}

TEST(NarrowTest, ChipsLeftOutLoseTheirEventsAndCountersButStayListed) {
  Selection s;
  s.chips = {3};
  Narrower n = Make(s);
  EXPECT_FALSE(n.WantsChip(0));
  trace::HostCapture c = Host();
  ASSERT_OK(n.Apply(&c));
  for (const auto& [ordinal, line, start] : Events(c)) EXPECT_EQ(ordinal, 3);
  EXPECT_EQ(c.EventCount(), Host().EventCount() / 2);
  ASSERT_EQ(c.counters.size(), 1u);
  EXPECT_EQ(c.host.chips[c.counters[0].chip].ordinal, 3);
  EXPECT_EQ(c.counters[0].value.size(), 11u);  // no window: every sample
  ASSERT_EQ(c.host.chips.size(), 2u);          // indices still as stored

  // For XSpace: the chip goes, and the indices follow.
  n.DropUnselectedChips(&c);
  ASSERT_EQ(c.host.chips.size(), 1u);
  EXPECT_EQ(c.host.chips[0].ordinal, 3);
  for (const trace::EventBlock& b : c.blocks) EXPECT_EQ(b.chip, 0);
  EXPECT_EQ(c.counters[0].chip, 0);
}

TEST(NarrowTest, KernelsMatchByNameOrModuleAndScopesGoWithTheirKernel) {
  Selection s;
  s.kernel_regex = "flash|all-reduce";
  Narrower n = Make(s);
  trace::HostCapture c = Host();
  ASSERT_OK(n.Apply(&c));
  std::set<std::tuple<int, std::string, int64_t>> want;
  for (int ordinal : {0, 3}) {
    want.insert({ordinal, "XLA Modules", 0});  // context, kept
    want.insert({ordinal, "XLA Ops", 20});
    want.insert({ordinal, "XLA Ops", 60});
    want.insert({ordinal, "XLA TraceMe", 61});
    want.insert({ordinal, "XLA TraceMe", 65});
  }
  EXPECT_EQ(Events(c), want);
  std::set<std::string> names;
  for (const trace::KernelDef& k : c.kernels) names.insert(k.name);
  EXPECT_EQ(names, (std::set<std::string>{"jit_step", "all-reduce.2", "flash_attention",
                                          "flash_attention/qk"}));

  // A regex that finds the module keeps every kernel of it.
  Selection by_module;
  by_module.kernel_regex = "^jit_step$";
  Narrower m = Make(by_module);
  trace::HostCapture all = Host();
  ASSERT_OK(m.Apply(&all));
  EXPECT_EQ(all.EventCount(), Host().EventCount());
  EXPECT_TRUE(m.WantsKernel("jit_step", "anything"));
  EXPECT_FALSE(m.WantsKernel("jit_other", "fusion.1"));
}

TEST(NarrowTest, ScopesOfKernelsLeftOutGo) {
  Selection s;
  s.kernel_regex = "^fusion";
  Narrower n = Make(s);
  trace::HostCapture c = Host();
  ASSERT_OK(n.Apply(&c));
  for (const auto& [ordinal, line, start] : Events(c)) {
    EXPECT_NE(line, "XLA TraceMe") << start;
  }
  EXPECT_EQ(c.EventCount(), 2u * (1 + 3));  // per chip: the module run and three fusions
}

TEST(NarrowTest, SeriesHeldOnlyEncodedAreDecodedBeforeTheWindowCutsThem) {
  trace::HostCapture c = Host();
  for (trace::CounterSeries& s : c.counters) {
    s.encoded = trace::EncodeCounters(s);
    s.time_ns.clear();
    s.value.clear();
  }
  Selection s;
  s.from_ns = kBase + 95'000;
  Narrower n = Make(s);
  ASSERT_OK(n.Apply(&c));
  ASSERT_EQ(c.counters.size(), 2u);
  EXPECT_EQ(c.counters[0].time_ns, (std::vector<int64_t>{kBase + 100'000}));
  EXPECT_TRUE(c.counters[0].encoded.empty());
}

TEST(NarrowTest, KernelsOfTwentyThousandNestedGroupsAreRefusedNotACrash) {
  // std::regex overflowed its stack compiling this (SIGSEGV); now it is over the length cap.
  Selection s;
  s.kernel_regex = std::string(20'000, '(') + std::string(20'000, ')');
  absl::StatusOr<Narrower> bad = Narrower::Create(s);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "--kernels: pattern is 40000 bytes, at most 4096");
}

TEST(NarrowTest, KernelsWithCatastrophicBacktrackingRunInLinearTime) {
  Selection s;
  s.kernel_regex = "(.*)*#";
  Narrower n = Make(s);
  const std::string name(100'000, 'x');
  EXPECT_FALSE(n.WantsKernel("jit_step", name));
  EXPECT_TRUE(n.WantsKernel("jit_step#", name));
}

TEST(NarrowTest, BadSelectionsNameTheFlag) {
  Selection re;
  re.kernel_regex = "fusion(";
  absl::StatusOr<Narrower> bad = Narrower::Create(re);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "--kernels \"fusion(\" is not a regular expression: missing ): fusion(");
  Selection window;
  window.from_ns = kBase + 10;
  window.to_ns = kBase + 10;
  bad = Narrower::Create(window);
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "--from")) << bad.status();
}

TEST(EstimateTest, CountsWhatIsSelectedAndScalesByTheWindow) {
  std::vector<ChipVolume> v;
  for (const auto& [host, ordinal] : {std::pair<const char*, int>{"h0", 0}, {"h0", 1}, {"h1", 0}}) {
    ChipVolume c;
    c.host = host;
    c.ordinal = ordinal;
    c.events = 1000;
    c.counter_samples = 400;
    c.kernel_events = {{{"m", "fusion.1"}, 600}, {{"m", "all-reduce.2"}, 200}};
    v.push_back(c);
  }
  const int64_t start = kBase, end = kBase + 2'000'000'000;

  Narrower all = Make(Selection());
  JsonEstimate e = EstimateChromeJson(v, start, end, all);
  EXPECT_EQ(e.events, 3000u);
  EXPECT_EQ(e.counter_samples, 1200u);
  EXPECT_EQ(e.bytes, 3000 * kJsonBytesPerEvent + 1200 * kJsonBytesPerCounterSample + 3 * 1000);

  Selection s;
  s.hosts = {"h0"};
  s.chips = {0};
  s.kernel_regex = "all-reduce";
  s.from_ns = start + 500'000'000;  // a quarter of the capture
  s.to_ns = start + 1'000'000'000;
  Narrower some = Make(s);
  e = EstimateChromeJson(v, start, end, some);
  // One chip: its 200 other-line events and 200 all-reduces, a quarter of them; and a quarter
  // of its samples.
  EXPECT_EQ(e.events, 100u);
  EXPECT_EQ(e.counter_samples, 100u);

  // A window past the capture's end selects nothing.
  Selection after;
  after.from_ns = end + 1;
  Narrower none = Make(after);
  EXPECT_EQ(EstimateChromeJson(v, start, end, none).events, 0u);
}

TEST(EstimateTest, TheRefusalSaysHowLargeAndWhatToDoInstead) {
  const std::string m = JsonTooLargeMessage("cap-x", 3'740'000'000, kDefaultMaxJsonBytes);
  EXPECT_EQ(m,
            "the Chrome JSON of cap-x would be about 3.7 GB, over the 256 MB limit (--max-size): "
            "viewers cannot load it; export --format perfetto, or narrow it with --from/--to, "
            "--hosts, --chips or --kernels");
  EXPECT_EQ(HumanBytes(812), "812 B");
  EXPECT_EQ(HumanBytes(1'000'000'000), "1 GB");
  EXPECT_EQ(HumanBytes(12'345'678), "12.3 MB");
}

}  // namespace
}  // namespace podprof::exporter
