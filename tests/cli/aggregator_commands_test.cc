// The aggregator subcommands: writers on canned answers, flag-value parsing and import path
// expansion as pure functions; the Run* functions against a fake aggregator served on
// 127.0.0.1:0; and the real `podprof` binary as a child process for exit codes and stderr.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "cli/captures_command.h"
#include "cli/diff_command.h"
#include "cli/export_command.h"
#include "cli/history_command.h"
#include "cli/import_command.h"
#include "cli/kernel_command.h"
#include "cli/stats_command.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "report/kernel_rows.h"
#include "report/proto_json.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"

namespace podprof::cli {
namespace {

using testing::FixturePath;
using testing::Lines;
using testing::PodprofResult;
using testing::RunPodprof;

constexpr int64_t kStartNs = 1714564800123000000;  // 2024-05-01T12:00:00.123Z

// A fresh directory under the test temp dir, removed with the object.
class TempDir {
 public:
  TempDir()
      : path_(::testing::TempDir() + "/aggregator_commands_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
              std::to_string(::getpid())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& bytes) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

 private:
  std::string path_;
};

// ---- Canned answers

v1::ListCapturesResponse TwoCaptures() {
  v1::ListCapturesResponse r;
  v1::CaptureSummary* c = r.add_captures();
  c->set_capture_id("cap-2");
  c->set_start_ns(kStartNs);
  c->set_end_ns(kStartNs + 2'000'000'000);
  c->set_status(v1::CAPTURE_STATUS_COMPLETE);
  c->add_hosts()->set_host_name("h0");
  c->add_hosts()->set_host_name("h1");
  c->set_chip_count(8);
  c->set_kernel_count(120);
  c->set_event_count(34567);
  (*c->mutable_labels())["run"] = "a,b";
  (*c->mutable_labels())["job"] = "train";
  c = r.add_captures();
  c->set_capture_id("cap-1");
  c->set_start_ns(kStartNs - 100'123'000'000);
  c->set_status(v1::CAPTURE_STATUS_PARTIAL);
  c->add_hosts()->set_host_name("h0");
  c->set_chip_count(4);
  return r;
}

v1::KernelDef Kernel(const std::string& op, const std::string& module, const std::string& category,
                     int64_t flops = 0, int64_t bytes = 0) {
  v1::KernelDef k;
  k.set_op_name(op);
  k.set_module(module);
  k.set_category(category);
  k.set_flops(flops);
  k.set_bytes_accessed(bytes);
  return k;
}

v1::GetKernelStatsResponse TwoStatsRows() {
  v1::GetKernelStatsResponse r;
  r.set_capture_id("cap-2");
  r.set_matched_count(40);
  v1::KernelStats* s = r.add_stats();  // A roll-up over hosts and chips.
  s->set_chip_ordinal(-1);
  *s->mutable_kernel() = Kernel("fusion.12", "jit_step", "convolution fusion", 1000, 2000);
  s->set_count(3);
  s->set_total_ps(3000);
  s->set_min_ps(900);
  s->set_max_ps(1200);
  s->set_mean_ps(1000.5);
  s->set_p50_ps(1000);
  s->set_p90_ps(1100);
  s->set_p99_ps(1190);
  s->set_total_flops(3000);
  s->set_achieved_tflops(1000.0);
  s->set_fraction_of_peak_flops(0.5);
  s->mutable_insight()->set_verdict("compute bound");
  s->mutable_insight()->set_has_counters(true);
  (*s->mutable_insight()->mutable_utilization())["mxu_busy"] = 0.5;
  s->mutable_insight()->set_stall_fraction(0.125);
  s = r.add_stats();  // One chip, no counters.
  s->set_host_name("h0");
  s->set_chip_ordinal(2);
  *s->mutable_kernel() = Kernel("void k<a, b>(\"x\")", "", "custom");
  s->set_count(1);
  s->set_total_ps(5);
  s->set_min_ps(5);
  s->set_max_ps(5);
  s->set_mean_ps(5);
  s->set_p50_ps(5);
  s->set_p90_ps(5);
  s->set_p99_ps(5);
  return r;
}

v1::KernelHistoryResponse OneSeries() {
  v1::KernelHistoryResponse r;
  v1::KernelHistorySeries* series = r.add_series();
  *series->mutable_kernel() = Kernel("fusion.12", "jit_step", "convolution fusion");
  v1::KernelHistoryPoint* p = series->add_points();
  p->set_capture_id("cap-1");
  p->set_capture_start_ns(kStartNs);
  p->set_count(4);
  p->set_mean_ps(250.4);
  p->set_p50_ps(240);
  p->set_p90_ps(300);
  p->set_p99_ps(310);
  p->set_total_ps(1001);
  p->set_achieved_tflops(1.5);
  return r;
}

v1::CompareCapturesResponse TwoDeltas() {
  v1::CompareCapturesResponse r;
  r.set_regression_count(1);
  v1::KernelDelta* d = r.add_deltas();
  *d->mutable_kernel() = Kernel("fusion.12", "jit_step", "convolution fusion");
  d->mutable_baseline()->set_mean_ps(1000);
  d->mutable_baseline()->set_p99_ps(1200);
  d->mutable_candidate()->set_mean_ps(1100);
  d->mutable_candidate()->set_p99_ps(1500);
  d->set_mean_change(0.1);
  d->set_p50_change(0.08);
  d->set_p99_change(0.25);
  d->set_regression(true);
  d = r.add_deltas();  // Ran only in the candidate.
  *d->mutable_kernel() = Kernel("copy.3", "jit_step", "copy");
  d->mutable_candidate()->set_mean_ps(50.6);
  d->mutable_candidate()->set_p99_ps(60);
  return r;
}

v1::CompareCapturesRequest DiffRequest() {
  v1::CompareCapturesRequest r;
  r.set_baseline_capture_id("cap-1");
  r.set_candidate_capture_id("cap-2");
  return r;
}

// Two chips of h0 over three seconds: chip 0 steps in each, chip 1 idles in the last.
v1::GetTelemetryResponse ThreeSeconds() {
  v1::GetTelemetryResponse r;
  for (int second = 0; second < 3; ++second) {
    for (int chip = 0; chip < 2; ++chip) {
      v1::TelemetryRow* row = r.add_rows();
      row->set_host("h0");
      row->set_time_ns(kStartNs + int64_t{second} * 1'000'000'000);
      row->set_interval_ns(1'000'000'000);
      v1::ChipTelemetry* t = row->mutable_chip();
      t->set_chip(chip);
      const bool idle = chip == 1 && second == 2;
      t->set_steps(idle ? 0 : 290);
      t->set_step_mean_us(idle ? 0 : 3390 + 10 * second);
      t->set_step_max_us(idle ? 0 : 3500 + 1000 * second * chip);
      t->set_duty_cycle_percent(72.5);
      t->set_hbm_used_bytes(80'000'000'000);
      t->set_queued(-1);
      t->set_collective_mean_us(-1);
    }
  }
  return r;
}

// The number of characters (not bytes) of the longest line of `s`.
size_t WidestLine(const std::string& s) {
  size_t widest = 0;
  for (const std::string& line : Lines(s)) {
    size_t chars = 0;
    for (char c : line) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    widest = std::max(widest, chars);
  }
  return widest;
}

// The headers of a table's header line.
std::vector<std::string> Headers(const std::string& line) {
  return absl::StrSplit(line, ' ', absl::SkipEmpty());
}

// ---- Writers

TEST(WriteCapturesTest, CsvRowsHaveSortedQuotedLabels) {
  std::ostringstream out;
  WriteCaptures(TwoCaptures(), OutputFormat::kCsv, out);
  EXPECT_EQ(out.str(),
            "capture,start_ns,end_ns,status,hosts,chips,kernels,events,labels\n"
            "cap-2,1714564800123000000,1714564802123000000,complete,2,8,120,34567,"
            "\"job=train;run=a,b\"\n"
            "cap-1,1714564700000000000,0,partial,1,4,0,0,\n");
}

TEST(WriteCapturesTest, TableShowsUtcStartWithMillisAndDuration) {
  v1::ListCapturesResponse r = TwoCaptures();
  r.set_next_page_token("more");
  std::ostringstream out;
  WriteCaptures(r, OutputFormat::kTable, out);
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 4u) << out.str();
  EXPECT_TRUE(absl::StartsWith(lines[0], "CAPTURE  START")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[1], "2024-05-01T12:00:00.123Z")) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[1], "2.00 s")) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[1], "job=train;run=a,b")) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[2], "2024-05-01T11:58:20.000Z")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[3], "--all")) << lines[3];
}

TEST(WriteCapturesTest, KernelProfilingOptionsAreShownInTableAndJson) {
  v1::ListCapturesResponse r = TwoCaptures();
  v1::CaptureOptions& o = *r.mutable_captures(0)->mutable_options();
  o.set_kernel_profiling(true);
  o.set_counter_interval_ns(1000);
  o.add_counter_sets("TC_MEMORY");
  auto* tc = o.add_counters();
  tc->set_component("tc");
  for (uint32_t i : {10, 11, 56}) tc->add_indices(i);
  std::ostringstream table;
  WriteCaptures(r, OutputFormat::kTable, table);
  std::vector<std::string> lines = Lines(table.str());
  ASSERT_GE(lines.size(), 3u) << table.str();
  EXPECT_TRUE(absl::StrContains(lines[0], "OPTIONS")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[1], "kernel profiling: tc[10,11,56] every 1 us")) << lines[1];
  std::ostringstream json;
  WriteCaptures(r, OutputFormat::kJson, json);
  nlohmann::json j = nlohmann::json::parse(json.str());
  EXPECT_EQ(j[0]["options"]["kernel_profiling"], true);
  EXPECT_EQ(j[0]["options"]["counter_interval_ns"], 1000);
  EXPECT_EQ(j[0]["options"]["counter_sets"], nlohmann::json::array({"TC_MEMORY"}));
  EXPECT_EQ(j[0]["options"]["counters"][0]["component"], "tc");
  EXPECT_EQ(j[0]["options"]["counters"][0]["indices"], nlohmann::json::array({10, 11, 56}));
  EXPECT_EQ(j[1]["options"]["kernel_profiling"], false);
}

TEST(CaptureFlagsTest, MalformedKernelProfilingFlagsAreUsageErrorsNamingTheText) {
  // Refused before the aggregator (nothing listens on port 1) is asked.
  for (std::string bad : {"--kernel-profiling --counters tc", "--counters tc:1,,2",
                          "--profiler-option novalue", "--metric-interval 1.5ms"}) {
    testing::PodprofResult r = RunPodprof("capture --aggregator 127.0.0.1:1 " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    // The message names the flag at fault.
    const std::string flag = bad.substr(bad.rfind("--"), bad.rfind(' ') - bad.rfind("--"));
    EXPECT_TRUE(absl::StrContains(r.err, flag)) << bad << ": " << r.err;
  }
  testing::PodprofResult r = RunPodprof("capture --aggregator 127.0.0.1:1 --counter-interval 1x");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "1x")) << r.err;
}

TEST(WriteCapturesTest, JsonIsAnArrayOfObjects) {
  std::ostringstream out;
  WriteCaptures(TwoCaptures(), OutputFormat::kJson, out);
  nlohmann::json j = nlohmann::json::parse(out.str());
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["capture"], "cap-2");
  EXPECT_EQ(j[0]["status"], "complete");
  EXPECT_EQ(j[0]["hosts"], 2);
  EXPECT_EQ(j[0]["labels"]["run"], "a,b");
  EXPECT_EQ(j[1]["start_ns"], kStartNs - 100'123'000'000);
}

TEST(KernelRowsTest, CsvAndJsonHaveEveryFieldTheTableShows) {
  // Each column of the widest table (by chip) and where csv and json keep it.
  const std::vector<std::tuple<std::string, std::string, std::string>> columns = {
      {"HOST", "host", "/host"},
      {"CHIP", "chip", "/chip"},
      {"KERNEL", "kernel", "/kernel"},
      {"MODULE", "module", "/module"},
      {"CATEGORY", "category", "/category"},
      {"COUNT", "count", "/count"},
      {"TOTAL", "total_ps", "/total_ps"},
      {"MEAN", "mean_ps", "/mean_ps"},
      {"P50", "p50_ps", "/p50_ps"},
      {"P99", "p99_ps", "/p99_ps"},
      {"MAX", "max_ps", "/max_ps"},
      {"TFLOP/S", "achieved_tflops", "/achieved_tflops"},
      {"%PEAK", "fraction_of_peak_flops", "/fraction_of_peak_flops"},
      {"GB/S", "achieved_hbm_gbps", "/achieved_hbm_gbps"},
      {"%HBM", "fraction_of_peak_hbm", "/fraction_of_peak_hbm"},
      {"MXU", "mxu_busy", "/insight/utilization/mxu_busy"},
      {"STALL", "stall_fraction", "/insight/stall_fraction"},
      {"WAIT", "wait_fraction", "/insight/wait_fraction"},
      {"VERDICT", "verdict", "/insight/verdict"}};
  v1::GetKernelStatsResponse r = TwoStatsRows();
  r.mutable_stats(0)->mutable_kernel()->set_program_id(6513147179871253105u);
  std::ostringstream table;
  WriteKernelRowsTable(r.stats(), StatsGrouping::kChip, table, TableFit{0, true});
  const std::vector<std::string> header = absl::StrSplit(kKernelCsvHeader, ',');
  const nlohmann::json row = KernelRowJson(r.stats(0));  // the row with counters
  for (const auto& [column, csv, json] : columns) {
    EXPECT_TRUE(absl::StrContains(Lines(table.str())[0], column)) << column;
    EXPECT_NE(std::find(header.begin(), header.end(), csv), header.end()) << csv;
    EXPECT_TRUE(row.contains(nlohmann::json::json_pointer(json))) << json << " in " << row.dump();
  }
  // JSON numbers are numbers, 64-bit ones too; 64-bit ids are strings, which a browser keeps
  // exactly (as a number 6513147179871253105 reads back as 6513147179871253000).
  EXPECT_TRUE(row["total_ps"].is_number_integer());
  EXPECT_TRUE(row["program_id"].is_string()) << row["program_id"];
  EXPECT_EQ(row["program_id"], "6513147179871253105");
}

TEST(KernelRowsTest, InspectAndStatsWriteRowsOfOneShape) {
  // The same kernel rows from a file (`inspect`) and from the aggregator (`stats`).
  PodprofResult inspect =
      RunPodprof("inspect --format json --top 3 '" + FixturePath(testing::kTpuFixture) + "'");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  const nlohmann::json file_row = nlohmann::json::parse(inspect.out)["kernels"][0];
  const nlohmann::json stored_row = KernelRowJson(TwoStatsRows().stats(0));
  auto keys = [](const nlohmann::json& j) {
    std::vector<std::string> k;
    for (const auto& item : j.items()) k.push_back(item.key());
    return k;
  };
  EXPECT_EQ(keys(file_row), keys(stored_row));
  EXPECT_EQ(file_row["host"], "tpu_v6e_4chip_host_offload");
  EXPECT_FALSE(file_row["insight"]["verdict"].get<std::string>().empty()) << file_row.dump();
  EXPECT_GT(file_row["chip_count"].get<int>(), 0);

  PodprofResult csv =
      RunPodprof("inspect --format csv --top 3 '" + FixturePath(testing::kTpuFixture) + "'");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_EQ(Lines(csv.out)[0], kKernelCsvHeader);
}

TEST(ProtoJsonTest, SixtyFourBitIntegersAreNumbersAndEnumsNames) {
  v1::KernelHistoryPoint p;
  p.set_capture_id("cap-1");
  p.set_capture_start_ns(int64_t{1} << 60);
  p.set_p99_ps(1210);
  v1::CaptureSummary s;
  s.set_status(v1::CAPTURE_STATUS_COMPLETE);
  (*s.mutable_labels())["run"] = "a";
  const nlohmann::json pj = ProtoToJson(p);
  EXPECT_EQ(pj["capture_start_ns"].get<int64_t>(), int64_t{1} << 60);
  EXPECT_EQ(pj["p99_ps"], 1210);
  EXPECT_TRUE(pj["p99_ps"].is_number_integer());
  EXPECT_EQ(pj["count"], 0);  // zeros are present
  const nlohmann::json sj = ProtoToJson(s);
  EXPECT_EQ(sj["status"], "CAPTURE_STATUS_COMPLETE");
  EXPECT_EQ(sj["labels"]["run"], "a");
  EXPECT_TRUE(sj["hosts"].is_array());
}

// Regression (issue #35): program id 6513147179871253105 showed on the kernel page as
// ...253000, the nearest double, because the JSON carried it as a number.
TEST(ProtoJsonTest, SixtyFourBitIdsAreStringsThatKeepEveryDigit) {
  v1::KernelDef k;
  k.set_program_id(6513147179871253105u);
  k.set_hlo_text_hash(18446744073709551615u);
  k.set_kernel_id(7);
  k.set_flops(int64_t{1} << 60);
  const nlohmann::json kj = ProtoToJson(k);
  EXPECT_EQ(kj["program_id"], "6513147179871253105");
  EXPECT_EQ(kj["hlo_text_hash"], "18446744073709551615");
  EXPECT_EQ(kj["kernel_id"], "7");
  EXPECT_EQ(kj["flops"].get<int64_t>(), int64_t{1} << 60);  // a count stays a number
  v1::CollectiveInstance c;
  c.set_collective_id(9007199254740993u);  // 2^53 + 1: the first integer a double loses
  c.set_step(3);
  const nlohmann::json cj = ProtoToJson(c);
  EXPECT_EQ(cj["collective_id"], "9007199254740993");
  EXPECT_EQ(cj["step"], 3);
}

TEST(WriteKernelStatsTest, TableHasInspectsColumnsAndHintsAtMoreRows) {
  std::ostringstream out;
  WriteKernelStats(TwoStatsRows(), StatsGrouping::kChip, OutputFormat::kTable, out);
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 6u) << out.str();
  EXPECT_EQ(lines[0], "capture cap-2: 40 rows by chip");
  for (const char* column :
       {"HOST", "CHIP", "KERNEL", "VERDICT", "MODULE", "CATEGORY", "COUNT", "TOTAL", "MEAN", "P50",
        "P99", "MAX", "TFLOP/S", "%PEAK", "MXU", "STALL"}) {
    EXPECT_TRUE(absl::StrContains(lines[1], column)) << column;
  }
  EXPECT_TRUE(absl::StrContains(lines[2], "1000.00")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "50.0%")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "3.00 ns")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "compute bound")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "12.5%")) << lines[2];  // the stalls it measured
  EXPECT_EQ(lines[3].substr(0, 4), "h0  ");
  EXPECT_EQ(lines[4], "MXU: the runtime's MXU-busy gauge over the kernel's runs");
  EXPECT_EQ(lines[5], "... 38 more rows (--top 0 shows all)");

  std::ostringstream by_kernel;
  WriteKernelStats(TwoStatsRows(), StatsGrouping::kKernel, OutputFormat::kTable, by_kernel);
  EXPECT_TRUE(absl::StartsWith(Lines(by_kernel.str())[1], "KERNEL")) << by_kernel.str();
}

// Issue #53: VERDICT came last of 21 columns, and VALU, VST, THROTTLE and WAIT were "-" on
// every row without kernel profiling.
TEST(WriteKernelStatsTest, VerdictFollowsTheKernelAndColumnsWithoutValuesGo) {
  std::ostringstream out, wide;
  WriteKernelStats(TwoStatsRows(), StatsGrouping::kKernel, OutputFormat::kTable, out);
  const std::vector<std::string> header = Headers(Lines(out.str())[1]);
  ASSERT_GE(header.size(), 2u);
  EXPECT_EQ(header[0], "KERNEL");
  EXPECT_EQ(header[1], "VERDICT");
  for (const char* empty : {"VALU", "VST", "THROTTLE", "WAIT"}) {
    EXPECT_EQ(std::count(header.begin(), header.end(), empty), 0) << empty << " in " << out.str();
  }
  // --wide: every column, the verdict still second.
  WriteKernelStats(TwoStatsRows(), StatsGrouping::kKernel, OutputFormat::kTable, wide,
                   TableFit{0, true});
  const std::vector<std::string> all = Headers(Lines(wide.str())[1]);
  EXPECT_EQ(all[1], "VERDICT");
  for (const char* column : {"VALU", "VST", "THROTTLE", "WAIT"}) {
    EXPECT_EQ(std::count(all.begin(), all.end(), column), 1) << column << " in " << wide.str();
  }
}

TEST(WriteKernelStatsTest, TheTableFitsTheWidthItIsGivenAndCutsLongNames) {
  v1::GetKernelStatsResponse r = TwoStatsRows();
  r.mutable_stats(0)->mutable_kernel()->set_op_name(
      "fusion.a_very_long_kernel_name_from_a_pallas_module.12");
  std::ostringstream out;
  WriteKernelStats(r, StatsGrouping::kKernel, OutputFormat::kTable, out, TableFit{72, false});
  EXPECT_LE(WidestLine(out.str()), 72u) << out.str();
  const std::vector<std::string> lines = Lines(out.str());
  const std::vector<std::string> header = Headers(lines[1]);
  for (const char* kept : {"KERNEL", "VERDICT", "MEAN", "TOTAL", "MXU"}) {
    EXPECT_EQ(std::count(header.begin(), header.end(), kept), 1) << kept << " in " << out.str();
  }
  EXPECT_TRUE(absl::StartsWith(lines[2], "fusion.a_very_long_")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "...  compute bound")) << lines[2];
}

TEST(WriteKernelStatsTest, JsonIsObjectWithCaptureAndRows) {
  std::ostringstream out;
  WriteKernelStats(TwoStatsRows(), StatsGrouping::kChip, OutputFormat::kJson, out);
  nlohmann::json j = nlohmann::json::parse(out.str());
  EXPECT_EQ(j["capture"], "cap-2");
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["chip"], "*");
  EXPECT_EQ(j["rows"][0]["host"], "*");
  EXPECT_EQ(j["rows"][1]["chip"], 2);
  EXPECT_EQ(j["rows"][1]["kernel"], "void k<a, b>(\"x\")");
}

TEST(WriteKernelHistoryTest, CsvOneRowPerPoint) {
  std::ostringstream out;
  WriteKernelHistory(OneSeries(), OutputFormat::kCsv, out);
  EXPECT_EQ(out.str(),
            "kernel,module,capture,start_ns,count,mean_ps,p50_ps,p90_ps,p99_ps,total_ps,"
            "achieved_tflops,regression\n"
            "fusion.12,jit_step,cap-1,1714564800123000000,4,250,240,300,310,1001,1.5,false\n");
}

TEST(WriteKernelHistoryTest, TableHasOneBlockPerKernel) {
  std::ostringstream out;
  WriteKernelHistory(OneSeries(), OutputFormat::kTable, out);
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 3u) << out.str();
  EXPECT_EQ(lines[0], "fusion.12 (module jit_step, convolution fusion): 1 capture");
  EXPECT_TRUE(absl::StartsWith(lines[1], "CAPTURE")) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[2], "2024-05-01T12:00:00.123Z")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "1.50")) << lines[2];
}

// ---- Kernel profiling in `podprof kernel`

void AddRow(google::protobuf::RepeatedPtrField<v1::UtilizationRow>* rows, const std::string& name,
            double achieved, double peak) {
  v1::UtilizationRow* r = rows->Add();
  r->set_name(name);
  r->set_achieved(achieved);
  r->set_peak(peak);
  r->set_unit("cycles");
}

// A v7x kernel profiled on one chip: die 0 busy and throttled, die 1 without a cycle count.
v1::DescribeKernelResponse ProfiledKernel() {
  v1::DescribeKernelResponse r;
  r.set_capture_id("cap-2");
  *r.mutable_kernel() = Kernel("fusion.12", "jit_step", "convolution fusion", 1000, 2000);
  v1::KernelStats* s = r.mutable_rollup();
  s->set_chip_ordinal(-1);
  s->set_chip_count(1);
  *s->mutable_kernel() = r.kernel();
  s->set_count(3);
  v1::KernelProfile* p = s->mutable_insight()->mutable_kernel_profile();
  (*p->mutable_units())["mxu"] = 0.6;
  (*p->mutable_units())["vpu"] = 0.25;
  p->set_cycles(1000);
  p->set_power_manager(true);
  p->set_throttled(0.2);
  AddRow(p->mutable_rows(), "Clocks Skipped", 200, 1000);
  AddRow(p->mutable_rows(), "Avg MXU Busy", 600, 1000);
  v1::KernelDieProfile* d = p->add_dies();
  d->set_die(0);
  (*d->mutable_units())["mxu"] = 0.6;
  d->set_cycles(1000);
  d->set_power_manager(true);
  d->set_throttled(0.2);
  AddRow(d->mutable_rows(), "Clocks Skipped", 200, 1000);
  AddRow(d->mutable_rows(), "Avg MXU Busy", 600, 1000);
  d = p->add_dies();
  d->set_die(1);
  d->set_missing("no cycle count (the power manager's CYCLE_COUNT)");
  *r.add_per_chip() = *s;
  r.mutable_per_chip(0)->set_host_name("h0");
  r.mutable_per_chip(0)->set_chip_ordinal(3);
  return r;
}

TEST(WriteKernelTest, UtilizationRowsPooledAndPerDieWithTheDieWithoutFiguresSayingWhy) {
  std::ostringstream out;
  KernelOptions wide;
  wide.fit.wide = true;  // every die's columns, die 1's without figures too
  WriteKernel(ProfiledKernel(), wide, out);
  const std::string text = out.str();
  EXPECT_TRUE(absl::StrContains(text, "  units busy: mxu 60.0%, vpu 25.0%\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "  power manager: 20.0% of cycles skipped (die 0 20.0%)\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, "    die 1: no cycle count (the power manager's CYCLE_COUNT), no figures\n"))
      << text;
  EXPECT_FALSE(absl::StrContains(text, "nominal")) << text;
  const std::vector<std::string> lines = Lines(text);
  auto at = std::find_if(lines.begin(), lines.end(),
                         [](const std::string& l) { return absl::StartsWith(l, "ROW "); });
  ASSERT_NE(at, lines.end()) << text;
  EXPECT_TRUE(
      absl::StrContains(*at, "SHARE  DIE 0 ACHIEVED  DIE 0 PEAK  DIE 0 SHARE  DIE 1 ACHIEVED"))
      << *at;
  // Pooled, then die 0's figures; die 1 has none.
  const std::vector<std::string> mxu = absl::StrSplit(at[2], ' ', absl::SkipEmpty());
  EXPECT_EQ(mxu, (std::vector<std::string>{"Avg", "MXU", "Busy", "cycles", "600", "1000", "60.0%",
                                           "600", "1000", "60.0%", "-", "-", "-"}))
      << at[2];
  // Fitted, the columns of die 1, which has no figures, go; its line says why.
  std::ostringstream fitted;
  WriteKernel(ProfiledKernel(), KernelOptions{}, fitted);
  EXPECT_FALSE(absl::StrContains(fitted.str(), "DIE 1 ACHIEVED")) << fitted.str();
  EXPECT_TRUE(absl::StrContains(fitted.str(), "DIE 0 ACHIEVED")) << fitted.str();
  EXPECT_TRUE(absl::StrContains(fitted.str(), "    die 1: no cycle count")) << fitted.str();
  // A measured 0 is "0.0%" in the per-chip table; "-" would say nothing measured it.
  v1::DescribeKernelResponse r = ProfiledKernel();
  *r.add_per_chip() = r.per_chip(0);
  r.mutable_per_chip(1)->mutable_insight()->mutable_kernel_profile()->set_throttled(0);
  std::ostringstream two;
  WriteKernel(r, KernelOptions{}, two);
  const std::vector<std::string> two_lines = Lines(two.str());
  EXPECT_TRUE(std::any_of(two_lines.begin(), two_lines.end(), [](const std::string& l) {
    return absl::StartsWith(l, "h0  ") && absl::EndsWith(l, " 0.0%");
  })) << two.str();
}

// Throttling is only what the power manager counted: without it (v6e) nothing is said of it,
// in the text, the tables or the CSV.
TEST(WriteKernelTest, WithoutThePowerManagerNoThrottling) {
  v1::DescribeKernelResponse r = ProfiledKernel();
  for (v1::KernelStats* s : {r.mutable_rollup(), r.mutable_per_chip(0)}) {
    v1::KernelProfile* p = s->mutable_insight()->mutable_kernel_profile();
    p->set_power_manager(false);
    p->set_throttled(0);
    p->clear_dies();
  }
  std::ostringstream out;
  WriteKernel(r, KernelOptions{}, out);
  EXPECT_FALSE(absl::StrContains(out.str(), "power manager")) << out.str();
  EXPECT_FALSE(absl::StrContains(out.str(), "skipped")) << out.str();
  EXPECT_EQ(ThrottledCell(r.per_chip(0).insight()), "-");
  std::ostringstream csv;
  WriteKernelRowsCsv("cap-2", r.per_chip(), csv);
  const std::vector<std::string> header = absl::StrSplit(Lines(csv.str())[0], ',');
  const std::vector<std::string> row = absl::StrSplit(Lines(csv.str())[1], ',');
  ASSERT_EQ(header.size(), row.size());
  const size_t t = std::find(header.begin(), header.end(), "throttled") - header.begin();
  const size_t v = std::find(header.begin(), header.end(), "vpu") - header.begin();
  ASSERT_LT(v, header.size());
  EXPECT_EQ(row[t], "");
  EXPECT_EQ(row[v], "0.25");
}

// --format csv (and /api/v1/kernels/{name}?format=csv): a line per Utilization Viewer row, for
// the roll-up and each chip, pooled (die `*`) and per die, a die without figures with its
// reason; JSON has the rows per die with their shares and no nominal clock.
TEST(WriteKernelTest, CsvAndJsonCarryTheRowsPerDie) {
  std::ostringstream csv;
  WriteKernelProfileCsv(ProfiledKernel(), csv);
  EXPECT_EQ(
      csv.str(),
      "capture,kernel,module,host,chip,die,row,unit,achieved,peak,share,missing\n"
      "cap-2,fusion.12,jit_step,*,*,*,Clocks Skipped,cycles,200,1000,0.2,\n"
      "cap-2,fusion.12,jit_step,*,*,*,Avg MXU Busy,cycles,600,1000,0.6,\n"
      "cap-2,fusion.12,jit_step,*,*,0,Clocks Skipped,cycles,200,1000,0.2,\n"
      "cap-2,fusion.12,jit_step,*,*,0,Avg MXU Busy,cycles,600,1000,0.6,\n"
      "cap-2,fusion.12,jit_step,*,*,1,,,,,,no cycle count (the power manager's CYCLE_COUNT)\n"
      "cap-2,fusion.12,jit_step,h0,3,*,Clocks Skipped,cycles,200,1000,0.2,\n"
      "cap-2,fusion.12,jit_step,h0,3,*,Avg MXU Busy,cycles,600,1000,0.6,\n"
      "cap-2,fusion.12,jit_step,h0,3,0,Clocks Skipped,cycles,200,1000,0.2,\n"
      "cap-2,fusion.12,jit_step,h0,3,0,Avg MXU Busy,cycles,600,1000,0.6,\n"
      "cap-2,fusion.12,jit_step,h0,3,1,,,,,,no cycle count (the power manager's CYCLE_COUNT)\n");
  const nlohmann::json kp = KernelJson(ProfiledKernel())["rollup"]["insight"]["kernel_profile"];
  EXPECT_FALSE(kp.contains("nominal_cycles")) << kp.dump();
  EXPECT_FALSE(kp["dies"][0].contains("nominal_cycles")) << kp.dump();
  EXPECT_EQ(kp["dies"][0]["rows"][1]["name"], "Avg MXU Busy");
  EXPECT_DOUBLE_EQ(kp["dies"][0]["rows"][1]["share"].get<double>(), 0.6);
  EXPECT_EQ(kp["dies"][1]["rows"].size(), 0u);
  EXPECT_EQ(kp["dies"][1]["missing"], "no cycle count (the power manager's CYCLE_COUNT)");
}

// Kernel profiling: the MXU's busy share in each capture that sampled it, "-" elsewhere.
TEST(WriteKernelHistoryTest, MxuBusyPerCaptureWhereSampled) {
  v1::KernelHistoryResponse r = OneSeries();
  auto* p = r.mutable_series(0)->add_points();
  *p = r.series(0).points(0);
  (*p->mutable_kernel_profile()->mutable_units())["mxu"] = 0.42;
  std::ostringstream table, json;
  WriteKernelHistory(r, OutputFormat::kTable, table);
  std::vector<std::string> lines = Lines(table.str());
  ASSERT_EQ(lines.size(), 6u) << table.str();
  EXPECT_TRUE(absl::EndsWith(lines[2], "MXU")) << lines[2];
  EXPECT_TRUE(absl::EndsWith(lines[3], "-")) << lines[3];
  EXPECT_TRUE(absl::EndsWith(lines[4], "42.0%")) << lines[4];
  EXPECT_EQ(lines[5], "MXU: the kernel's sampled performance counters (kernel profiling)");
  WriteKernelHistory(r, OutputFormat::kJson, json);
  auto j = nlohmann::json::parse(json.str());
  EXPECT_FALSE(j[0]["points"][0].contains("mxu"));
  EXPECT_DOUBLE_EQ(j[0]["points"][1]["mxu"].get<double>(), 0.42);
}

// Issue #53: `history` showed "-" for kernels whose MXU `stats` gave from the mxu_busy gauge.
TEST(WriteKernelHistoryTest, TheGaugeShowsWhereCountersWereNotSampled) {
  v1::KernelHistoryResponse r = OneSeries();
  auto* p = r.mutable_series(0)->add_points();
  *p = r.series(0).points(0);
  (*r.mutable_series(0)->mutable_points(0)->mutable_utilization())["mxu_busy"] = 0.72;
  (*p->mutable_kernel_profile()->mutable_units())["mxu"] = 0.42;
  std::ostringstream table, json;
  WriteKernelHistory(r, OutputFormat::kTable, table);
  std::vector<std::string> lines = Lines(table.str());
  ASSERT_EQ(lines.size(), 6u) << table.str();
  EXPECT_TRUE(absl::EndsWith(lines[3], "~72.0%")) << lines[3];  // marked: the gauge's
  EXPECT_TRUE(absl::EndsWith(lines[4], "42.0%")) << lines[4];
  EXPECT_TRUE(absl::StartsWith(lines[5], "MXU: performance counters (kernel profiling); ~ marks"))
      << lines[5];
  WriteKernelHistory(r, OutputFormat::kJson, json);
  auto j = nlohmann::json::parse(json.str());
  EXPECT_DOUBLE_EQ(j[0]["points"][0]["mxu"].get<double>(), 0.72);
  EXPECT_EQ(j[0]["points"][0]["mxu_source"], "mxu_busy_gauge");
  EXPECT_EQ(j[0]["points"][1]["mxu_source"], "perf_counters");
  EXPECT_FALSE(j[0].contains("kernel_id")) << j[0];
}

TEST(WriteKernelHistoryTest, TableDrawsTheTrendOfMeanAndP99) {
  v1::KernelHistoryResponse r = OneSeries();
  for (int i = 0; i < 3; ++i) {
    auto* p = r.mutable_series(0)->add_points();
    *p = r.series(0).points(0);
    p->set_mean_ps(250 + 100 * (i + 1));  // rising
    p->set_p99_ps(310);                   // flat
  }
  std::ostringstream out;
  WriteKernelHistory(r, OutputFormat::kTable, out);
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_GE(lines.size(), 2u) << out.str();
  // Lowest to highest block for the rising mean; the flat p99 stays on one level.
  EXPECT_EQ(lines[1], "  mean \u2581\u2583\u2586\u2588  p99 \u2584\u2584\u2584\u2584");
}

TEST(FormatTest, HumanUnits) {
  EXPECT_EQ(FormatBytes(999), "999 B");
  EXPECT_EQ(FormatBytes(2'560'000), "2.6 MB");
  EXPECT_EQ(FormatSignedNs(-600'120), "-600.12 us");
  EXPECT_EQ(FormatSignedNs(4'110'000), "4.110 ms");
  EXPECT_EQ(FormatSignedNs(561), "561 ns");
  EXPECT_EQ(Sparkline({}), "");
  // A change of a thousandth is no jump (it once drew the lowest block then the highest).
  EXPECT_EQ(Sparkline({250'000, 250'400}), "\u2584\u2584");
  EXPECT_EQ(Sparkline({250'000, 500'000}), "\u2581\u2588");
}

TEST(FormatTest, ByteSizesInPowersOfAThousandOrOf1024) {
  EXPECT_EQ(ParseByteSize("256MB").value(), 256'000'000u);
  EXPECT_EQ(ParseByteSize("1.5 GB").value(), 1'500'000'000u);
  EXPECT_EQ(ParseByteSize("64MiB").value(), 64u << 20);
  EXPECT_EQ(ParseByteSize("10kb").value(), 10'000u);
  EXPECT_EQ(ParseByteSize("1000").value(), 1000u);
  EXPECT_EQ(ParseByteSize("2TiB").value(), uint64_t{2} << 40);
  for (const char* bad : {"", "MB", "12XB", "0", "-1MB", "1..2GB", "99999999EB"}) {
    absl::StatusOr<uint64_t> size = ParseByteSize(bad);
    ASSERT_FALSE(size.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(size.status().message(), absl::StrCat("\"", bad, "\"")))
        << size.status();
  }
}

TEST(ExportOptionsTest, AnEmptyWindowOrABadRegexIsNamedBeforeAnythingIsSent) {
  ExportOptions o;
  o.capture_id = "cap-1";
  EXPECT_OK(CheckExportOptions(o));
  o.from_ns = 300'000'000;
  o.to_ns = 300'000'000;
  EXPECT_EQ(CheckExportOptions(o).message(), "--from 300 ms is not before --to 300 ms");
  o.to_ns = 400'000'000;
  EXPECT_OK(CheckExportOptions(o));
  o.kernels = "fusion[";
  EXPECT_TRUE(absl::StartsWith(CheckExportOptions(o).message(),
                               "--kernels \"fusion[\" is not a regular expression"))
      << CheckExportOptions(o);
}

TEST(ExportOptionsTest, TheSummaryGivesTheChromeJsonEstimateForOtherFormats) {
  ExportOptions o;
  ExportResult r;
  r.path = "pod.pftrace";
  r.bytes = 30'400'000;
  r.files = 1;
  r.json_bytes_estimate = 68'600'000;
  EXPECT_EQ(ExportSummary(o, r),
            "wrote 30.4 MB to pod.pftrace; as Chrome JSON it would be about 68.6 MB");
  o.kind = ExportKind::kChrome;
  r.path = "pod.json";
  EXPECT_EQ(ExportSummary(o, r), "wrote 30.4 MB to pod.json");
  o.kind = ExportKind::kXprof;
  r.path = "xp";
  r.files = 4;
  r.json_bytes_estimate = 0;  // an aggregator that gives none
  EXPECT_EQ(ExportSummary(o, r), "wrote 30.4 MB to xp (4 files)");
}

TEST(WriteCaptureDiffTest, CsvLeavesAbsentSidesEmpty) {
  std::ostringstream out;
  WriteCaptureDiff(DiffRequest(), TwoDeltas(), OutputFormat::kCsv, out);
  EXPECT_EQ(out.str(),
            "kernel,module,baseline_mean_ps,candidate_mean_ps,mean_change,baseline_p99_ps,"
            "candidate_p99_ps,p99_change,regression,baseline_mxu,candidate_mxu,baseline_verdict,"
            "candidate_verdict\n"
            "fusion.12,jit_step,1000,1100,0.1,1200,1500,0.25,true,,,,\n"
            "copy.3,jit_step,,51,,,60,,false,,,,\n");
}

// Kernel profiling on both sides: the MXU's busy share and the verdicts, before and after.
TEST(WriteCaptureDiffTest, MxuAndVerdictsOfBothSides) {
  v1::CompareCapturesResponse r = TwoDeltas();
  v1::KernelDelta& d = *r.mutable_deltas(0);
  (*d.mutable_baseline()->mutable_insight()->mutable_kernel_profile()->mutable_units())["mxu"] =
      0.72;
  d.mutable_baseline()->mutable_insight()->set_verdict("compute bound");
  (*d.mutable_candidate()->mutable_insight()->mutable_kernel_profile()->mutable_units())["mxu"] =
      0.31;
  d.mutable_candidate()->mutable_insight()->set_verdict("throttled");
  std::ostringstream csv, table;
  WriteCaptureDiff(DiffRequest(), r, OutputFormat::kCsv, csv);
  EXPECT_EQ(Lines(csv.str())[1],
            "fusion.12,jit_step,1000,1100,0.1,1200,1500,0.25,true,0.72,0.31,compute bound,"
            "throttled");
  WriteCaptureDiff(DiffRequest(), r, OutputFormat::kTable, table);
  EXPECT_TRUE(absl::StrContains(table.str(), "72.0%→31.0%")) << table.str();
}

// Issue #53: `stats` showed the mxu_busy gauge's 72% where `diff` showed "-", and diff's JSON
// had kernel_id "0" on every row.
TEST(WriteCaptureDiffTest, MxuIsTheFigureStatsShowsWithItsSourceNamed) {
  v1::CompareCapturesResponse r = TwoDeltas();
  v1::KernelDelta& d = *r.mutable_deltas(0);
  (*d.mutable_baseline()->mutable_insight()->mutable_utilization())["mxu_busy"] = 0.72;
  (*d.mutable_candidate()->mutable_insight()->mutable_utilization())["mxu_busy"] = 0.5;
  d.mutable_candidate()->mutable_insight()->set_verdict("compute bound");
  std::ostringstream table, csv, json, stats;
  WriteCaptureDiff(DiffRequest(), r, OutputFormat::kTable, table);
  EXPECT_TRUE(absl::StrContains(table.str(), "72.0%→50.0%")) << table.str();
  EXPECT_TRUE(absl::StrContains(table.str(),
                                "\nMXU: the runtime's MXU-busy gauge over the kernel's runs\n"))
      << table.str();
  // The candidate's verdict, beside the kernel.
  EXPECT_TRUE(absl::StartsWith(Lines(table.str())[2], "fusion.12  REGRESSION  compute bound"))
      << table.str();
  // The figure `stats` prints for the same row.
  v1::GetKernelStatsResponse same;
  same.set_capture_id("cap-2");
  *same.add_stats() = d.candidate();
  same.mutable_stats(0)->set_chip_ordinal(-1);
  *same.mutable_stats(0)->mutable_kernel() = d.kernel();
  WriteKernelStats(same, StatsGrouping::kKernel, OutputFormat::kTable, stats);
  EXPECT_TRUE(absl::StrContains(stats.str(), "50.0%")) << stats.str();

  WriteCaptureDiff(DiffRequest(), r, OutputFormat::kCsv, csv);
  EXPECT_EQ(Lines(csv.str())[1],
            "fusion.12,jit_step,1000,1100,0.1,1200,1500,0.25,true,0.72,0.5,,compute bound");
  WriteCaptureDiff(DiffRequest(), r, OutputFormat::kJson, json);
  const nlohmann::json j = nlohmann::json::parse(json.str());
  EXPECT_DOUBLE_EQ(j["deltas"][0]["baseline"]["mxu"].get<double>(), 0.72);
  EXPECT_EQ(j["deltas"][0]["candidate"]["mxu_source"], "mxu_busy_gauge");
  for (const auto& delta : j["deltas"]) EXPECT_FALSE(delta.contains("kernel_id")) << delta;
}

TEST(WriteCaptureDiffTest, TableFlagsRegressionsAndCountsThem) {
  std::ostringstream out;
  WriteCaptureDiff(DiffRequest(), TwoDeltas(), OutputFormat::kTable, out);
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 5u) << out.str();
  EXPECT_EQ(lines[0], "baseline cap-1 vs candidate cap-2");
  EXPECT_TRUE(absl::StrContains(lines[1], "ΔMEAN%")) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[2], "+10.0%")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[2], "+25.0%")) << lines[2];
  // The flag stands right after the kernel, where the eye starts.
  EXPECT_TRUE(absl::StartsWith(lines[2], "fusion.12  REGRESSION")) << lines[2];
  EXPECT_TRUE(absl::StrContains(lines[3], "new")) << lines[3];
  EXPECT_FALSE(absl::StrContains(lines[3], "REGRESSION")) << lines[3];
  EXPECT_EQ(lines[4], "1 regression (p50 slower by more than 5%)");
  // "Δ" is two bytes but one column: ΔMEAN% ends where its values end.
  auto chars_before = [](const std::string& s, size_t bytes) {
    size_t n = 0;
    for (size_t i = 0; i < bytes; ++i) n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    return n;
  };
  EXPECT_EQ(chars_before(lines[1], lines[1].find("ΔMEAN%") + std::string("ΔMEAN%").size()),
            chars_before(lines[2], lines[2].find("+10.0%") + 6));
}

TEST(WriteImportResultTest, FileErrorsAreWarningsOnStderr) {
  v1::ImportXSpaceResponse r;
  r.set_capture_id("cap-new");
  r.mutable_summary()->set_status(v1::CAPTURE_STATUS_PARTIAL);
  r.mutable_summary()->add_hosts()->set_host_name("h0");
  r.mutable_summary()->set_kernel_count(7);
  *r.add_top_kernels() = TwoStatsRows().stats(0);
  r.add_file_errors("h1: malformed XSpace at byte offset 12");
  std::ostringstream out, err;
  WriteImportResult(r, OutputFormat::kTable, out, err);
  EXPECT_EQ(err.str(), "warning: h1: malformed XSpace at byte offset 12\n");
  EXPECT_TRUE(absl::StartsWith(out.str(), "imported capture cap-new: partial, 1 host, 0 chips"))
      << out.str();
  EXPECT_TRUE(absl::StrContains(out.str(), "fusion.12")) << out.str();

  std::ostringstream csv, csv_err;
  WriteImportResult(r, OutputFormat::kCsv, csv, csv_err);
  EXPECT_EQ(Lines(csv.str())[1],
            "cap-new,*,*,fusion.12,jit_step,convolution fusion,3,3000,900,1200,1001,1000,1100,1190,"
            "1000,2000,1000,0.5,0,0,0.5,0.125,0,compute bound,,,,,,,,,,");
}

TEST(TextTableTest, PadsByCharactersAndCutsLongCells) {
  TextTable table({{"ΔX", TextTable::Align::kRight}, {"NAME", TextTable::Align::kLeft, 6}});
  table.AddRow({"abc", "short"});
  table.AddRow({"d", "much-too-long"});
  std::ostringstream out;
  table.Write(out);
  EXPECT_EQ(out.str(),
            " ΔX  NAME\n"
            "abc  short\n"
            "  d  muc...\n");
}

TEST(FormatTest, TimestampAndCsvField) {
  EXPECT_EQ(FormatTimestampNs(kStartNs), "2024-05-01T12:00:00.123Z");
  EXPECT_EQ(FormatTimestampNs(0), "-");
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField("a,\"b\""), "\"a,\"\"b\"\"\"");
}

// ---- Flag values

TEST(ParseLabelsTest, PairsAndErrors) {
  absl::StatusOr<std::map<std::string, std::string>> labels =
      ParseLabels({"job=train", "expr=a=b", "empty="});
  ASSERT_OK(labels);
  EXPECT_EQ(*labels,
            (std::map<std::string, std::string>{{"job", "train"}, {"expr", "a=b"}, {"empty", ""}}));
  EXPECT_OK(ParseLabels({}));
  for (const char* bad : {"novalue", "=v"}) {
    absl::StatusOr<std::map<std::string, std::string>> r = ParseLabels({bad});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(r.status().message(), bad)) << r.status();
  }
  absl::StatusOr<std::map<std::string, std::string>> twice = ParseLabels({"k=1", "k=2"});
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(twice.status().message(), "twice")) << twice.status();
}

TEST(CaptureStatusTest, NamesRoundTrip) {
  EXPECT_EQ(CaptureStatusName(v1::CAPTURE_STATUS_CANCELLED), "cancelled");
  EXPECT_EQ(CaptureStatusName(v1::CAPTURE_STATUS_UNSPECIFIED), "unspecified");
  EXPECT_EQ(*ParseCaptureStatus("Complete"), v1::CAPTURE_STATUS_COMPLETE);
  EXPECT_EQ(*ParseCaptureStatus("partial"), v1::CAPTURE_STATUS_PARTIAL);
  absl::StatusOr<v1::CaptureStatus> bad = ParseCaptureStatus("done");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "failed")) << bad.status();
}

// ---- Import paths and chunks

TEST(ExpandImportPathsTest, SessionDirGivesItsXPlaneFilesSortedByName) {
  TempDir dir;
  dir.Write("10.0.0.2_9999.xplane.pb", "b");
  dir.Write("10.0.0.1_9999.xplane.pb", "a");
  dir.Write("notes.txt", "not a capture");
  std::filesystem::create_directory(dir.path() + "/nested.xplane.pb");
  absl::StatusOr<std::vector<ImportFile>> files = ExpandImportPaths({dir.path()});
  ASSERT_OK(files);
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].host_name, "10.0.0.1_9999");
  EXPECT_EQ((*files)[0].path, dir.path() + "/10.0.0.1_9999.xplane.pb");
  EXPECT_EQ((*files)[1].host_name, "10.0.0.2_9999");
}

TEST(ExpandImportPathsTest, FilesKeepTheirOrder) {
  TempDir dir;
  std::string b = dir.Write("b.xplane.pb", "b");
  std::string a = dir.Write("a.xplane.pb", "a");
  absl::StatusOr<std::vector<ImportFile>> files = ExpandImportPaths({b, a});
  ASSERT_OK(files);
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].host_name, "b");
  EXPECT_EQ((*files)[1].path, a);
}

TEST(ExpandImportPathsTest, ErrorsNameThePath) {
  TempDir dir;
  std::string missing = dir.path() + "/missing.xplane.pb";
  absl::StatusOr<std::vector<ImportFile>> r = ExpandImportPaths({missing});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(r.status().message(), missing)) << r.status();

  std::string empty_dir = dir.path() + "/empty";
  std::filesystem::create_directory(empty_dir);
  dir.Write("empty/readme.txt", "x");
  r = ExpandImportPaths({empty_dir});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), empty_dir)) << r.status();

  std::string stray = dir.Write("trace.json", "{}");
  r = ExpandImportPaths({stray});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), stray)) << r.status();
}

TEST(CheckDistinctHostsTest, SameHostTwiceNamesBothPaths) {
  EXPECT_OK(CheckDistinctHosts({{"h0", "/a/h0.xplane.pb"}, {"h1", "/a/h1.xplane.pb"}}));
  absl::Status s = CheckDistinctHosts({{"h0", "/a/h0.xplane.pb"}, {"h0", "/b/h0.xplane.pb"}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "/a/h0.xplane.pb")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "/b/h0.xplane.pb")) << s;
}

TEST(ForEachImportChunkTest, ChunksCarryHostAndOnlyTheFirstCarriesLabels) {
  TempDir dir;
  std::string big(2 * kImportChunkBytes + 12345, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  std::vector<ImportFile> files = {{"h0", dir.Write("h0.xplane.pb", big)},
                                   {"h1", dir.Write("h1.xplane.pb", "")}};
  std::vector<v1::ImportXSpaceChunk> chunks;
  absl::Status s = ForEachImportChunk(files, {{"job", "train"}}, kImportChunkBytes,
                                      [&](const v1::ImportXSpaceChunk& c) {
                                        chunks.push_back(c);
                                        return true;
                                      });
  ASSERT_OK(s);
  ASSERT_EQ(chunks.size(), 4u);
  std::string h0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(chunks[i].host_name(), "h0");
    EXPECT_LE(chunks[i].data().size(), kImportChunkBytes);
    EXPECT_EQ(chunks[i].labels_size(), i == 0 ? 1 : 0);
    h0 += chunks[i].data();
  }
  EXPECT_EQ(h0, big);
  EXPECT_EQ(chunks[0].labels().at("job"), "train");
  EXPECT_EQ(chunks[3].host_name(), "h1");
  EXPECT_TRUE(chunks[3].data().empty());
  EXPECT_EQ(chunks[3].labels_size(), 0);
}

TEST(ForEachImportChunkTest, StopsWhenTheStreamBreaks) {
  TempDir dir;
  std::vector<ImportFile> files = {{"h0", dir.Write("h0.xplane.pb", std::string(100, 'x'))},
                                   {"h1", dir.Write("h1.xplane.pb", "y")}};
  int sent = 0;
  absl::Status s =
      ForEachImportChunk(files, {}, 10, [&](const v1::ImportXSpaceChunk&) { return ++sent < 3; });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(sent, 3);
}

// ---- Against a fake aggregator

// Serves canned answers and records what it was asked. gRPC calls the handlers on its own
// threads; everything recorded is guarded by mu_.
class FakeAggregator final : public v1::Aggregator::Service {
 public:
  grpc::Status ListCaptures(grpc::ServerContext* context, const v1::ListCapturesRequest* request,
                            v1::ListCapturesResponse* response) override {
    absl::MutexLock lock(&mu_);
    list_requests_.push_back(*request);
    deadlines_.push_back(context->deadline());
    // Page 1 is cap-2, page 2 (token "p2") is cap-1; a server that loops repeats "p2".
    v1::ListCapturesResponse all = TwoCaptures();
    if (request->page_token().empty()) {
      *response->add_captures() = all.captures(0);
      response->set_next_page_token("p2");
    } else {
      *response->add_captures() = all.captures(1);
      if (repeat_token_) response->set_next_page_token("p2");
    }
    return grpc::Status::OK;
  }

  grpc::Status GetKernelStats(grpc::ServerContext* context,
                              const v1::GetKernelStatsRequest* request,
                              v1::GetKernelStatsResponse* response) override {
    absl::MutexLock lock(&mu_);
    stats_requests_.push_back(*request);
    deadlines_.push_back(context->deadline());
    if (request->capture_id() == "missing") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no capture \"missing\"");
    }
    *response = TwoStatsRows();
    return grpc::Status::OK;
  }

  grpc::Status KernelHistory(grpc::ServerContext* context, const v1::KernelHistoryRequest* request,
                             v1::KernelHistoryResponse* response) override {
    absl::MutexLock lock(&mu_);
    history_requests_.push_back(*request);
    deadlines_.push_back(context->deadline());
    *response = OneSeries();
    return grpc::Status::OK;
  }

  grpc::Status CompareCaptures(grpc::ServerContext* context,
                               const v1::CompareCapturesRequest* request,
                               v1::CompareCapturesResponse* response) override {
    absl::MutexLock lock(&mu_);
    diff_requests_.push_back(*request);
    deadlines_.push_back(context->deadline());
    *response = TwoDeltas();
    return grpc::Status::OK;
  }

  grpc::Status ImportXSpace(grpc::ServerContext* context,
                            grpc::ServerReader<v1::ImportXSpaceChunk>* reader,
                            v1::ImportXSpaceResponse* response) override {
    std::vector<v1::ImportXSpaceChunk> chunks;
    v1::ImportXSpaceChunk chunk;
    while (reader->Read(&chunk)) chunks.push_back(chunk);
    absl::MutexLock lock(&mu_);
    import_chunks_ = std::move(chunks);
    deadlines_.push_back(context->deadline());
    response->set_capture_id("cap-new");
    response->mutable_summary()->set_status(v1::CAPTURE_STATUS_PARTIAL);
    response->mutable_summary()->add_hosts()->set_host_name("a");
    *response->add_top_kernels() = TwoStatsRows().stats(0);
    response->add_file_errors("b: not an XSpace");
    return grpc::Status::OK;
  }

  grpc::Status GetTelemetry(grpc::ServerContext*, const v1::GetTelemetryRequest*,
                            v1::GetTelemetryResponse* response) override {
    *response = ThreeSeconds();
    return grpc::Status::OK;
  }

  absl::Mutex mu_;
  // Guarded by mu_.
  bool repeat_token_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<v1::ListCapturesRequest> list_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::GetKernelStatsRequest> stats_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::KernelHistoryRequest> history_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::CompareCapturesRequest> diff_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ImportXSpaceChunk> import_chunks_ ABSL_GUARDED_BY(mu_);
  std::vector<std::chrono::system_clock::time_point> deadlines_ ABSL_GUARDED_BY(mu_);
};

constexpr int64_t kTimeoutNs = int64_t{20} * 1'000'000'000;

class AggregatorCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port, 0);
    address_ = absl::StrCat("127.0.0.1:", port);
    client_ =
        std::make_unique<AggregatorClient>(AggregatorTarget{address_, kTimeoutNs, nullptr}, clock_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  // Every call carried a deadline about kTimeoutNs after it started.
  void ExpectDeadlines(size_t calls) {
    absl::MutexLock lock(&fake_.mu_);
    ASSERT_EQ(fake_.deadlines_.size(), calls);
    const auto now = std::chrono::system_clock::now();
    for (const auto& deadline : fake_.deadlines_) {
      EXPECT_GT(deadline, now + std::chrono::seconds(10));
      EXPECT_LE(deadline, now + std::chrono::seconds(21));
    }
  }

  FakeAggregator fake_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  // Deadlines are absolute wall times, so the fake clock starts at the real time (and stays).
  FakeClock clock_{RealClock().NowNs()};
  std::unique_ptr<AggregatorClient> client_;
};

TEST_F(AggregatorCommandsTest, CapturesAllFollowsPagesWithADeadlineOnEachCall) {
  CapturesOptions options;
  options.all = true;
  options.limit = 1;
  options.format = OutputFormat::kCsv;
  std::ostringstream out;
  ASSERT_OK(RunCaptures(*client_, options, out));
  std::ostringstream want;
  WriteCaptures(TwoCaptures(), OutputFormat::kCsv, want);
  EXPECT_EQ(out.str(), want.str());
  {
    absl::MutexLock lock(&fake_.mu_);
    ASSERT_EQ(fake_.list_requests_.size(), 2u);
    EXPECT_EQ(fake_.list_requests_[0].page_token(), "");
    EXPECT_EQ(fake_.list_requests_[1].page_token(), "p2");
    EXPECT_EQ(fake_.list_requests_[1].limit(), 1u);
  }
  ExpectDeadlines(2);
}

TEST_F(AggregatorCommandsTest, CapturesSendsFiltersAndSinceRelativeToTheClock) {
  CapturesOptions options;
  options.range.since_ago_ns = int64_t{3600} * 1'000'000'000;
  options.range.until_ns = 77;
  options.status = v1::CAPTURE_STATUS_FAILED;
  options.labels = {{"job", "train"}};
  std::ostringstream out;
  ASSERT_OK(RunCaptures(*client_, options, out));
  absl::MutexLock lock(&fake_.mu_);
  ASSERT_EQ(fake_.list_requests_.size(), 1u) << "without --all, one page";
  const v1::ListCapturesRequest& r = fake_.list_requests_[0];
  EXPECT_EQ(r.since_ns(), clock_.NowNs() - *options.range.since_ago_ns);
  EXPECT_EQ(r.until_ns(), 77);
  EXPECT_EQ(r.status(), v1::CAPTURE_STATUS_FAILED);
  EXPECT_EQ(r.label_selector().at("job"), "train");
  EXPECT_TRUE(absl::StrContains(out.str(), "--all")) << out.str();
}

TEST_F(AggregatorCommandsTest, CapturesStopsWhenAPageTokenRepeats) {
  {
    absl::MutexLock lock(&fake_.mu_);
    fake_.repeat_token_ = true;
  }
  CapturesOptions options;
  options.all = true;
  std::ostringstream out;
  absl::Status s = RunCaptures(*client_, options, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_TRUE(out.str().empty());
  absl::MutexLock lock(&fake_.mu_);
  EXPECT_EQ(fake_.list_requests_.size(), 2u);
}

TEST_F(AggregatorCommandsTest, StatsMapsOptionsOntoTheRequest) {
  StatsOptions options;
  options.capture_id = "cap-2";
  options.by = StatsGrouping::kHost;
  options.kernel_regex = "fusion\\.1.*";
  options.category = "convolution fusion";
  options.host = "h0";
  options.chip = 3;
  options.order = v1::KERNEL_ORDER_P99;
  std::ostringstream out;
  ASSERT_OK(RunStats(*client_, options, out));
  options = StatsOptions{};
  options.capture_id = "cap-2";
  options.format = OutputFormat::kCsv;
  ASSERT_OK(RunStats(*client_, options, out));

  absl::MutexLock lock(&fake_.mu_);
  ASSERT_EQ(fake_.stats_requests_.size(), 2u);
  const v1::GetKernelStatsRequest& table = fake_.stats_requests_[0];
  EXPECT_EQ(table.group_by(), v1::KERNEL_GROUPING_HOST);
  EXPECT_EQ(table.filter().op_regex(), "fusion\\.1.*");
  EXPECT_EQ(table.filter().category(), "convolution fusion");
  EXPECT_EQ(table.host_name(), "h0");
  ASSERT_TRUE(table.filter().has_chip_ordinal());
  EXPECT_EQ(table.filter().chip_ordinal(), 3);
  EXPECT_EQ(table.order(), v1::KERNEL_ORDER_P99);
  EXPECT_EQ(table.top_n(), 25u) << "the table shows 25 rows unless told";
  const v1::GetKernelStatsRequest& csv = fake_.stats_requests_[1];
  EXPECT_EQ(csv.group_by(), v1::KERNEL_GROUPING_CHIP) << "csv defaults to per-chip rows";
  EXPECT_TRUE(csv.per_chip());
  EXPECT_FALSE(csv.filter().has_chip_ordinal());
  EXPECT_EQ(csv.top_n(), 0u);
}

TEST_F(AggregatorCommandsTest, AnAnswerFromTheAggregatorIsItsMessageNotUnreachable) {
  StatsOptions options;
  options.capture_id = "missing";
  std::ostringstream out;
  absl::Status s = RunStats(*client_, options, out);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no capture \"missing\"; `podprof captures` lists the captures");
  EXPECT_TRUE(out.str().empty());
}

TEST_F(AggregatorCommandsTest, HistorySendsRegexModuleAndBounds) {
  HistoryOptions options;
  options.kernel_regex = "fusion";
  options.module = "jit_step";
  options.range.since_ns = 5;
  options.range.until_ns = 9;
  options.max_kernels = 3;
  options.format = OutputFormat::kCsv;
  std::ostringstream out;
  ASSERT_OK(RunHistory(*client_, options, out));
  EXPECT_EQ(Lines(out.str()).size(), 2u) << out.str();
  absl::MutexLock lock(&fake_.mu_);
  ASSERT_EQ(fake_.history_requests_.size(), 1u);
  const v1::KernelHistoryRequest& r = fake_.history_requests_[0];
  EXPECT_EQ(r.filter().op_regex(), "fusion");
  EXPECT_EQ(r.filter().module(), "jit_step");
  EXPECT_EQ(r.since_ns(), 5);
  EXPECT_EQ(r.until_ns(), 9);
  EXPECT_EQ(r.max_kernels(), 3u);
}

TEST_F(AggregatorCommandsTest, DiffReturnsTheRegressionCount) {
  DiffOptions options;
  options.baseline_capture_id = "cap-1";
  options.candidate_capture_id = "cap-2";
  options.kernel_regex = "fusion";
  options.threshold = 0.1;
  options.top = 7;
  std::ostringstream out;
  absl::StatusOr<uint32_t> regressions = RunDiff(*client_, options, out);
  ASSERT_OK(regressions);
  EXPECT_EQ(*regressions, 1u);
  EXPECT_TRUE(absl::StrContains(out.str(), "1 regression (p50 slower by more than 10%)"))
      << out.str();
  absl::MutexLock lock(&fake_.mu_);
  ASSERT_EQ(fake_.diff_requests_.size(), 1u);
  EXPECT_EQ(fake_.diff_requests_[0].filter().op_regex(), "fusion");
  EXPECT_DOUBLE_EQ(fake_.diff_requests_[0].regression_threshold(), 0.1);
  EXPECT_EQ(fake_.diff_requests_[0].top_n(), 7u);
}

TEST_F(AggregatorCommandsTest, ImportStreamsEveryFileAndWarnsAboutFileErrors) {
  TempDir dir;
  std::string a(kImportChunkBytes + 10, 'a');
  dir.Write("a.xplane.pb", a);
  dir.Write("b.xplane.pb", "bb");
  absl::StatusOr<std::vector<ImportFile>> files = ExpandImportPaths({dir.path()});
  ASSERT_OK(files);
  ImportOptions options;
  options.files = *files;
  options.labels = {{"job", "train"}};
  std::ostringstream out, err;
  absl::Status s = RunImport(*client_, options, out, err);
  ASSERT_OK(s);
  EXPECT_TRUE(absl::StartsWith(out.str(), "imported capture cap-new")) << out.str();
  EXPECT_EQ(err.str(), "warning: b: not an XSpace\n");
  {
    absl::MutexLock lock(&fake_.mu_);
    ASSERT_EQ(fake_.import_chunks_.size(), 3u);
    EXPECT_EQ(fake_.import_chunks_[0].host_name(), "a");
    EXPECT_EQ(fake_.import_chunks_[0].labels().at("job"), "train");
    EXPECT_EQ(fake_.import_chunks_[0].data() + fake_.import_chunks_[1].data(), a);
    EXPECT_EQ(fake_.import_chunks_[1].labels_size(), 0);
    EXPECT_EQ(fake_.import_chunks_[2].host_name(), "b");
    EXPECT_EQ(fake_.import_chunks_[2].data(), "bb");
  }
  ExpectDeadlines(1);
}

TEST_F(AggregatorCommandsTest, BinaryDiffExitsOneOnRegressionOnlyWhenAsked) {
  PodprofResult plain = RunPodprof("diff cap-1 cap-2 --aggregator " + address_);
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_TRUE(absl::StrContains(plain.out, "REGRESSION")) << plain.out;
  PodprofResult strict =
      RunPodprof("diff cap-1 cap-2 --fail-on-regression --format csv --aggregator " + address_);
  EXPECT_EQ(strict.exit_code, 1) << strict.err;
  EXPECT_EQ(Lines(strict.out)[0], kDiffCsvHeader);
}

// Issue #53: a table of 21 columns, 180-230 characters, whatever the terminal.
TEST_F(AggregatorCommandsTest, BinaryTablesFitColumnsAndWideShowsEveryColumn) {
  PodprofResult fitted = RunPodprof("stats cap-2 --by chip --aggregator " + address_, "COLUMNS=70");
  ASSERT_EQ(fitted.exit_code, 0) << fitted.err;
  EXPECT_LE(WidestLine(fitted.out), 70u) << fitted.out;
  const std::vector<std::string> header = Headers(Lines(fitted.out)[1]);
  ASSERT_GE(header.size(), 4u) << fitted.out;
  EXPECT_EQ(std::vector<std::string>(header.begin(), header.begin() + 4),
            (std::vector<std::string>{"HOST", "CHIP", "KERNEL", "VERDICT"}));
  // Without a terminal or $COLUMNS no width is set: only the columns without values go.
  PodprofResult piped = RunPodprof("stats cap-2 --by chip --aggregator " + address_, "COLUMNS=");
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  EXPECT_GT(WidestLine(piped.out), 70u) << piped.out;
  EXPECT_FALSE(absl::StrContains(Lines(piped.out)[1], "VALU")) << piped.out;
  PodprofResult wide =
      RunPodprof("stats cap-2 --by chip --wide --aggregator " + address_, "COLUMNS=70");
  ASSERT_EQ(wide.exit_code, 0) << wide.err;
  for (const char* column : {"VALU", "VST", "THROTTLE", "WAIT", "GB/S", "TFLOP/S"}) {
    EXPECT_TRUE(absl::StrContains(Lines(wide.out)[1], column)) << column << " in " << wide.out;
  }
  // The diff and history tables fit too; csv is whole whatever the width.
  for (const char* command : {"diff cap-1 cap-2", "history fusion"}) {
    PodprofResult r = RunPodprof(absl::StrCat(command, " --aggregator ", address_), "COLUMNS=60");
    ASSERT_EQ(r.exit_code, 0) << command << ": " << r.err;
    EXPECT_LE(WidestLine(r.out), 60u) << command << ":\n" << r.out;
  }
  PodprofResult csv =
      RunPodprof("stats cap-2 --by chip --format csv --aggregator " + address_, "COLUMNS=20");
  EXPECT_EQ(Lines(csv.out)[0], kKernelCsvHeader);
}

// Issue #53: 16 rows a second and no summary; "step time" did not say it is the device's.
TEST_F(AggregatorCommandsTest, BinaryTelemetrySummarisesEachChipWithItsRowsBehindAFlag) {
  PodprofResult summary = RunPodprof("telemetry --aggregator " + address_);
  ASSERT_EQ(summary.exit_code, 0) << summary.err;
  const std::vector<std::string> lines = Lines(summary.out);
  EXPECT_TRUE(absl::StartsWith(lines[0],
                               "device step (program run) time per chip, 6 rows from "
                               "2024-05-01T12:00:00.123Z to 2024-05-01T12:00:02.123Z"))
      << summary.out;
  // A line's words, by its first two.
  auto row_of = [&](const std::string& first, const std::string& second) {
    for (const std::string& line : lines) {
      const std::vector<std::string> words = Headers(line);
      if (words.size() > 1 && words[0] == first && words[1] == second) return words;
    }
    return std::vector<std::string>{};
  };
  const std::vector<std::string> header = row_of("HOST", "CHIP");
  ASSERT_GE(header.size(), 6u) << summary.out;
  ASSERT_EQ(std::vector<std::string>(header.begin(), header.begin() + 6),
            (std::vector<std::string>{"HOST", "CHIP", "STEPS", "LATEST", "MEDIAN", "WORST"}))
      << summary.out;
  // chip 0: newest 3.41 ms, median 3.40, worst 3.50; chip 1 idled last: newest stepping
  // second's mean (3.40), worst its 4.50 ms run.
  EXPECT_EQ(row_of("h0", "0"),
            (std::vector<std::string>{"h0", "0", "870", "3.41", "ms", "3.40", "ms", "3.50", "ms",
                                      "72.5%", "80.0", "GB", "0"}))
      << summary.out;
  EXPECT_EQ(row_of("h0", "1"),
            (std::vector<std::string>{"h0", "1", "580", "3.40", "ms", "3.40", "ms", "4.50", "ms",
                                      "72.5%", "80.0", "GB", "0"}))
      << summary.out;
  EXPECT_TRUE(absl::StrContains(summary.out, "the wall-clock step also holds")) << summary.out;

  PodprofResult rows = RunPodprof("telemetry --rows --aggregator " + address_);
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  size_t row_lines = 0;
  for (const std::string& line : Lines(rows.out)) row_lines += absl::StartsWith(line, "2024-");
  EXPECT_EQ(row_lines, 6u) << rows.out;
  EXPECT_TRUE(absl::StrContains(rows.out, "device step (program run) time")) << rows.out;
  PodprofResult csv = RunPodprof("telemetry --format csv --aggregator " + address_);
  EXPECT_EQ(Lines(csv.out).size(), 7u) << csv.out;  // the header and every row
}

TEST_F(AggregatorCommandsTest, BinaryReportsTheAggregatorsErrorOnOneLine) {
  PodprofResult r = RunPodprof("stats missing --aggregator " + address_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "podprof stats: no capture \"missing\"; `podprof captures` lists the captures\n");
  EXPECT_TRUE(r.out.empty());
}

// ---- The binary without an aggregator

TEST(AggregatorCliTest, UnreachableAggregatorIsOneLineAndExitThree) {
  TempDir dir;
  std::string file = dir.Write("h0.xplane.pb", "x");
  for (const std::string& command :
       {std::string("captures"), std::string("stats cap-1"), std::string("history fusion"),
        std::string("diff cap-1 cap-2"), "import '" + file + "'"}) {
    PodprofResult r = RunPodprof(command + " --aggregator 127.0.0.1:1 --timeout 10s");
    EXPECT_EQ(r.exit_code, 3) << command << ": " << r.err;
    std::vector<std::string> lines = Lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << command << ": " << r.err;
    const std::string name = command.substr(0, command.find(' '));
    const std::string want = "podprof " + name + ": no aggregator answers at 127.0.0.1:1 ";
    EXPECT_TRUE(absl::StartsWith(lines[0], want + "(connection refused)")) << lines[0];
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(AggregatorCliTest, ImportChecksPathsBeforeSending) {
  TempDir dir;
  std::string missing = dir.path() + "/gone";
  // An unroutable aggregator: a path error must come first, without a connection attempt.
  PodprofResult r = RunPodprof("import '" + missing + "' --aggregator 127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "podprof import: " + missing + ": no such file or directory\n");

  std::string h0 = dir.Write("h0.xplane.pb", "x");
  std::filesystem::create_directory(dir.path() + "/session");
  dir.Write("session/h0.xplane.pb", "y");
  r = RunPodprof("import '" + h0 + "' '" + dir.path() + "/session' --aggregator 127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "appears twice")) << r.err;
}

TEST(AggregatorCliTest, EverySubcommandHasHelpWithExamples) {
  for (const char* command : {"inspect", "captures", "stats", "history", "diff", "import", "agents",
                              "capture", "export", "demo"}) {
    PodprofResult r = RunPodprof(std::string(command) + " --help");
    EXPECT_EQ(r.exit_code, 0) << command;
    EXPECT_TRUE(absl::StrContains(r.out, "Examples:")) << command << ":\n" << r.out;
    EXPECT_TRUE(absl::StrContains(r.out, std::string("podprof ") + command)) << command;
  }
}

TEST_F(AggregatorCommandsTest, AProfileGivesTheAggregatorAndFormatAndFlagsOverrideIt) {
  const std::string path = ::testing::TempDir() + "/cli_profile_" + std::to_string(getpid());
  std::ofstream(path) << "aggregator = \"127.0.0.1:1\"\nformat = \"csv\"\ntimeout = \"5s\"\n"
                      << "[profiles.here]\naggregator = \"" << address_ << "\"\n";
  const std::string env = "PODPROF_CLI_CONFIG=" + path;
  // The defaults point nowhere...
  PodprofResult defaults = RunPodprof("captures", env);
  EXPECT_EQ(defaults.exit_code, 3) << defaults.err;
  EXPECT_TRUE(absl::StrContains(defaults.err, "127.0.0.1:1")) << defaults.err;
  // ...the profile to the aggregator, and the format still comes from the file.
  PodprofResult profile = RunPodprof("--profile here captures", env);
  ASSERT_EQ(profile.exit_code, 0) << profile.err;
  EXPECT_EQ(Lines(profile.out)[0], kCapturesCsvHeader);
  PodprofResult from_env = RunPodprof("captures", env + " PODPROF_PROFILE=here");
  EXPECT_EQ(from_env.exit_code, 0) << from_env.err;
  // A flag wins over both.
  PodprofResult flag = RunPodprof("captures --aggregator " + address_ + " --format json", env);
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_TRUE(nlohmann::json::parse(flag.out).is_array());
  // An unknown profile or key is a usage error naming the file.
  PodprofResult unknown = RunPodprof("--profile elsewhere captures", env);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(unknown.err, "no [profiles.elsewhere]")) << unknown.err;
  std::ofstream(path) << "aggregatr = \"x\"\n";
  PodprofResult typo = RunPodprof("captures", env);
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(typo.err, path + ": unknown key 'aggregatr'")) << typo.err;
}

TEST(AggregatorCliTest, AggregatorAddressFromTheEnvironment) {
  PodprofResult r = RunPodprof("captures --timeout 5s", "PODPROF_AGGREGATOR=127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "no aggregator answers at 127.0.0.1:1 ")) << r.err;
  // Or before the subcommand, as a global flag.
  PodprofResult global = RunPodprof("--aggregator 127.0.0.1:2 captures --timeout 5s");
  EXPECT_EQ(global.exit_code, 3) << global.err;
  EXPECT_TRUE(absl::StrContains(global.err, "no aggregator answers at 127.0.0.1:2 ")) << global.err;
}

TEST(AggregatorCliTest, BadFlagValuesAreUsageErrors) {
  for (const char* args :
       {"captures --label novalue", "captures --status done", "captures --timeout 0s",
        "stats cap --by module", "captures --since 1h --since-ns 5", "diff onlyone"}) {
    PodprofResult r = RunPodprof(std::string(args) + " --aggregator 127.0.0.1:1");
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_FALSE(r.err.empty()) << args;
  }
}

}  // namespace
}  // namespace podprof::cli
