// `podprof inspect` run as a real child process on the real captures.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof {
namespace {

using Result = testing::PodprofResult;
using testing::FixturePath;
using testing::Lines;
using testing::RunPodprof;

TEST(InspectCliTest, CsvHasExactColumnsAndOneRowPerChipAndKernel) {
  std::string path = FixturePath(testing::kTpuFixture);
  Result r = RunPodprof("inspect --format csv '" + path + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_GT(lines.size(), 1u);
  // The columns every command writes kernel rows with; the first names the file.
  EXPECT_EQ(
      lines[0],
      "capture,host,chip,kernel,module,category,count,total_ps,min_ps,max_ps,mean_ps,p50_ps,"
      "p90_ps,p99_ps,flops,bytes_accessed,achieved_tflops,fraction_of_peak_flops,"
      "achieved_hbm_gbps,fraction_of_peak_hbm,mxu_busy,stall_fraction,wait_fraction,verdict,"
      "vector_alu,vector_load,vector_store,scalar_alu,xlu,hbm_bandwidth,throttled,sync_wait,cause,"
      "vpu");

  // Independent totals from the library: the CLI must print what the reader computed.
  auto capture = trace::ReadXSpaceFile(path);
  ASSERT_OK(capture);
  std::vector<trace::KernelStats> stats = trace::ComputeKernelStats(*capture);
  ASSERT_EQ(lines.size() - 1, stats.size());
  int64_t csv_count = 0, csv_total = 0;
  int64_t prev_total = INT64_MAX;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cols = absl::StrSplit(lines[i], ',');
    ASSERT_EQ(cols.size(), 34u) << lines[i];
    EXPECT_EQ(cols[0], path);
    EXPECT_EQ(cols[1], "tpu_v6e_4chip_host_offload");
    int chip;
    ASSERT_TRUE(absl::SimpleAtoi(cols[2], &chip));
    EXPECT_GE(chip, 0);
    EXPECT_LE(chip, 3);
    int64_t count, total, min, max, p50, p99;
    ASSERT_TRUE(absl::SimpleAtoi(cols[6], &count) && absl::SimpleAtoi(cols[7], &total) &&
                absl::SimpleAtoi(cols[8], &min) && absl::SimpleAtoi(cols[9], &max) &&
                absl::SimpleAtoi(cols[11], &p50) && absl::SimpleAtoi(cols[13], &p99));
    EXPECT_FALSE(cols[23].empty()) << "every row has a verdict: " << lines[i];
    EXPECT_LE(min, p50);
    EXPECT_LE(p50, p99);
    EXPECT_LE(p99, max);
    EXPECT_LE(total, prev_total);  // Sorted by total time.
    prev_total = total;
    csv_count += count;
    csv_total += total;
  }
  int64_t lib_count = 0, lib_total = 0;
  for (const auto& s : stats) {
    lib_count += s.count;
    lib_total += s.total_ps;
  }
  EXPECT_EQ(csv_count, lib_count);
  EXPECT_EQ(csv_total, lib_total);
}

TEST(InspectCliTest, ByKernelRollsUpWithStarChip) {
  Result r =
      RunPodprof("inspect --format csv --by kernel '" + FixturePath(testing::kTpuFixture) + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_GT(lines.size(), 1u);
  std::map<std::string, int64_t> count_by_kernel;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cols = absl::StrSplit(lines[i], ',');
    EXPECT_EQ(cols[2], "*");
    if (cols[3] == "all-reduce") {
      EXPECT_EQ(cols[5], "all-reduce");
      EXPECT_EQ(cols[6], "12");  // 3 all-reduces on each of 4 chips
      EXPECT_EQ(cols[14], "1342177280");
    }
  }
}

TEST(InspectCliTest, GpuCsvQuotesKernelNamesWithCommas) {
  Result r = RunPodprof("inspect --format csv --top 0 '" + FixturePath(testing::kGpuFixture) + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, ",\"void ")) << "GPU kernel names with commas are quoted";
  std::vector<std::string> lines = Lines(r.out);
  EXPECT_GT(lines.size(), 20u);
}

TEST(InspectCliTest, JsonParsesAndCarriesChipsAndRates) {
  Result r =
      RunPodprof("inspect --format json --top 5 '" + FixturePath(testing::kTpuFixture) + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["host"], "tpu_v6e_4chip_host_offload");
  ASSERT_EQ(j["chips"].size(), 4u);
  EXPECT_EQ(j["chips"][0]["generation"], "v6e");
  ASSERT_EQ(j["kernels"].size(), 5u);
  for (const auto& k : j["kernels"]) {
    EXPECT_GE(k["fraction_of_peak_hbm"].get<double>(), 0);
    EXPECT_LE(k["p50_ps"].get<int64_t>(), k["max_ps"].get<int64_t>());
  }
}

TEST(InspectCliTest, TableIsReadable) {
  Result r = RunPodprof("inspect --top 5 '" + FixturePath(testing::kTpuFixture) + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "4 chips (TPU v6 Lite)")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "KERNEL")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, " ms") || absl::StrContains(r.out, " s ")) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "more rows")) << r.out;
}

TEST(InspectCliTest, TruncatedFileIsOneLineErrorWithPathAndOffsetExitTwo) {
  std::string bytes = testing::ReadTestFile(FixturePath(testing::kTpuFixture));
  std::string path = ::testing::TempDir() + "/cut_" + std::to_string(::getpid()) + ".xplane.pb";
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  Result r = RunPodprof("inspect '" + path + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, path)) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "byte offset")) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(InspectCliTest, MissingFileAndBadFlags) {
  Result missing = RunPodprof("inspect /nonexistent/none.xplane.pb");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(missing.err, "/nonexistent/none.xplane.pb")) << missing.err;
  Result bad = RunPodprof("inspect --format xml '" + FixturePath(testing::kTpuFixture) + "'");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(bad.err, "xml")) << bad.err;
}

}  // namespace
}  // namespace podprof
