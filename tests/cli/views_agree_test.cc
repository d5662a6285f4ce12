// The views of one kernel agree (issue #53): `import`'s summary, `stats`, `diff` and `history`
// show the same MXU figure and verdicts, naming the figure's source, and `inspect` counts the
// kernels its rows show, as `import` does. The real `podprof` binary against a real
// podprof-aggregator holding a simulated v5p pod with hardware counters (the runtime's mxu_busy
// gauge, no kernel profiling), imported twice.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "tests/util/child_process.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
using testing::Lines;
using testing::PodprofResult;
using testing::RunPodprof;

constexpr int64_t kTrueStartNs = 1'800'000'000'000'000'000;
constexpr char kWide[] = "COLUMNS=400";  // every column with values, as a terminal this wide
constexpr char kGaugeNote[] = "MXU: the runtime's MXU-busy gauge over the kernel's runs";

// Two simulated hosts of one v5p pod, two chips each, with the runtime's counters, as files.
void WritePod(const fs::path& dir) {
  for (int host = 0; host < 2; ++host) {
    sim::PodConfig config;
    config.generation = "v5p";
    config.chips = 2;
    config.hosts = 2;
    config.host_index = host;
    config.pod_seed = 7;
    absl::StatusOr<sim::PodModel> model = sim::PodModel::Create(config);
    ASSERT_OK(model);
    FakeClock truth(kTrueStartNs);
    SkewedClock clock(truth, 0, 0);
    sim::SessionWindow w;
    w.true_start_ns = kTrueStartNs;
    w.true_end_ns = kTrueStartNs + 200'000'000;
    w.counters = true;
    w.host_name = absl::StrCat("host-", host);
    std::ofstream out(dir / absl::StrCat("host-", host, ".xplane.pb"), std::ios::binary);
    ASSERT_TRUE(sim::BuildXSpace(*model, clock, w).space.SerializeToOstream(&out));
  }
}

// The words of the first line of `text` whose first word is `first`; empty when none.
std::vector<std::string> RowOf(const std::string& text, const std::string& first) {
  for (const std::string& line : Lines(text)) {
    std::vector<std::string> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!words.empty() && words[0] == first) return words;
  }
  return {};
}

bool Has(const std::vector<std::string>& words, const std::string& word) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

class ViewsAgreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("views_agree_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
                        getpid());
    fs::remove_all(dir_);
    aggregator_ = testing::StartBuiltAggregator(dir_);
    ASSERT_TRUE(aggregator_->ready());
    address_ = absl::StrCat(" --aggregator 127.0.0.1:", aggregator_->info()["port"].get<int>());
  }
  void TearDown() override {
    aggregator_.reset();
    fs::remove_all(dir_);
  }

  // `podprof <args>` against the aggregator, with `env`.
  PodprofResult Run(const std::string& args, const std::string& env = kWide) {
    return RunPodprof(args + address_, env);
  }

  fs::path dir_;
  std::unique_ptr<testing::ChildProcess> aggregator_;
  std::string address_;
};

TEST_F(ViewsAgreeTest, ImportStatsDiffAndHistoryShowOneMxuFigureAndOneVerdict) {
  WritePod(dir_);
  const std::string files =
      absl::StrCat((dir_ / "host-0.xplane.pb").string(), " ", (dir_ / "host-1.xplane.pb").string());
  PodprofResult first = Run("import " + files);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::vector<std::string> title = RowOf(first.out, "imported");
  ASSERT_GE(title.size(), 3u) << first.out;
  const std::string a = title[2].substr(0, title[2].size() - 1);  // "imp-...:"
  PodprofResult second = Run("import --format json " + files);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const nlohmann::json imported = nlohmann::json::parse(second.out);
  const std::string b = imported["capture"];

  // The kernel with the most time, as `stats` gives it: its verdict and the gauge's figure.
  PodprofResult stats_json = Run("stats --format json --by kernel --top 1 " + b);
  ASSERT_EQ(stats_json.exit_code, 0) << stats_json.err;
  const nlohmann::json row = nlohmann::json::parse(stats_json.out)["rows"][0];
  const std::string kernel = row["kernel"];
  const std::string verdict = row["insight"]["verdict"];
  ASSERT_FALSE(verdict.empty()) << row.dump();
  ASSERT_TRUE(row["insight"]["utilization"].contains("mxu_busy")) << row.dump();
  const std::string mxu =
      absl::StrFormat("%.1f%%", 100 * row["insight"]["utilization"]["mxu_busy"].get<double>());

  // import's own summary judged its kernels as stats does.
  ASSERT_FALSE(imported["top_kernels"].empty());
  EXPECT_EQ(imported["top_kernels"][0]["kernel"], kernel);
  EXPECT_EQ(imported["top_kernels"][0]["insight"]["verdict"], verdict);
  const std::vector<std::string> in_import = RowOf(first.out, kernel);
  EXPECT_TRUE(Has(in_import, mxu)) << mxu << " in\n" << first.out;
  EXPECT_TRUE(absl::StrContains(first.out, "VERDICT")) << first.out;
  EXPECT_TRUE(absl::StrContains(first.out, kGaugeNote)) << first.out;

  PodprofResult stats = Run("stats " + b);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_TRUE(Has(RowOf(stats.out, kernel), mxu)) << mxu << " in\n" << stats.out;
  EXPECT_TRUE(absl::StrContains(stats.out, kGaugeNote)) << stats.out;

  const std::string exact = absl::StrCat(" '^", kernel, "$'");
  PodprofResult diff = Run(absl::StrCat("diff ", a, " ", b, " --kernel", exact));
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  const std::vector<std::string> in_diff = RowOf(diff.out, kernel);
  EXPECT_TRUE(Has(in_diff, absl::StrCat(mxu, "→", mxu))) << diff.out;  // the same files twice
  EXPECT_TRUE(absl::StrContains(absl::StrJoin(in_diff, " "), verdict)) << diff.out;
  EXPECT_TRUE(absl::StrContains(diff.out, kGaugeNote)) << diff.out;
  PodprofResult diff_json = Run(absl::StrCat("diff --format json ", a, " ", b, " --kernel", exact));
  ASSERT_EQ(diff_json.exit_code, 0) << diff_json.err;
  const nlohmann::json delta = nlohmann::json::parse(diff_json.out)["deltas"][0];
  EXPECT_DOUBLE_EQ(delta["candidate"]["mxu"].get<double>(),
                   row["insight"]["utilization"]["mxu_busy"].get<double>());
  EXPECT_EQ(delta["candidate"]["mxu_source"], "mxu_busy_gauge");
  EXPECT_FALSE(delta.contains("kernel_id")) << delta.dump();

  PodprofResult history = Run("history" + exact);
  ASSERT_EQ(history.exit_code, 0) << history.err;
  for (const std::string& capture : {a, b}) {
    EXPECT_TRUE(Has(RowOf(history.out, capture), mxu)) << capture << " " << mxu << " in\n"
                                                       << history.out;
  }
  EXPECT_TRUE(absl::StrContains(history.out, kGaugeNote)) << history.out;
}

TEST_F(ViewsAgreeTest, InspectCountsTheKernelsItsRowsShowAsImportDoes) {
  const std::string file = testing::FixturePath(testing::kTpuFixture);
  PodprofResult csv = RunPodprof("inspect --top 0 --by kernel --format csv '" + file + "'");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const size_t rows = Lines(csv.out).size() - 1;
  ASSERT_GT(rows, 0u);
  PodprofResult table = RunPodprof("inspect --top 0 '" + file + "'", kWide);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  const std::string first_line = Lines(table.out)[0];
  EXPECT_TRUE(absl::StrContains(first_line, absl::StrCat(", ", rows, " kernels")))
      << rows << " rows; " << first_line;
  PodprofResult imported = Run("import --format json '" + file + "'");
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  const nlohmann::json j = nlohmann::json::parse(imported.out);
  EXPECT_EQ(j["summary"]["kernels"].get<size_t>(), rows) << j["summary"];
}

}  // namespace
}  // namespace podprof
