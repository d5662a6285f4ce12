// Telemetry rows written one way for `podprof telemetry` and /api/v1/telemetry
// (report/telemetry_rows.h).
#include "report/telemetry_rows.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace podprof::report {
namespace {

v1::GetTelemetryResponse TwoRows() {
  v1::GetTelemetryResponse r;
  v1::TelemetryRow* row = r.add_rows();
  row->set_host("host,1");  // a comma, quoted in CSV
  row->set_time_ns(1'714'564'800'123'000'000);
  row->set_interval_ns(10'000'000'000);
  v1::ChipTelemetry* t = row->mutable_chip();
  t->set_chip(3);
  t->set_steps(870);
  t->set_step_mean_us(3412.3456789);
  t->set_step_max_us(3500);
  t->set_duty_cycle_percent(72.5);
  t->set_hbm_used_bytes(80'000'000'000);
  t->set_queued(-1);
  t->set_collectives(40);
  t->set_collective_mean_us(1203.25);
  v1::TelemetryRow* idle = r.add_rows();
  idle->set_host("h0");
  idle->mutable_chip()->set_duty_cycle_percent(-1);
  return r;
}

// The CLI's CSV printed 6 significant digits (3412.35) where the HTTP API's had them all.
TEST(TelemetryRowsTest, CsvHoldsEveryFieldAsJsonWritesIt) {
  std::ostringstream csv;
  WriteTelemetryCsv(TwoRows(), csv);
  const std::vector<std::string> lines = absl::StrSplit(csv.str(), '\n');
  ASSERT_EQ(lines.size(), 4u) << csv.str();  // the header, two rows, the last newline
  EXPECT_EQ(lines[0], kTelemetryCsvHeader);
  EXPECT_EQ(lines[1],
            "1714564800123000000,\"host,1\",3,10000000000,870,3412.3456789,3500.0,72.5,"
            "80000000000,-1,40,1203.25,0,-1.0,-1.0");
  EXPECT_EQ(lines[2], "0,h0,0,0,0,0.0,0.0,-1.0,0,0,0,0.0,0,-1.0,-1.0");
  EXPECT_EQ(lines[3], "");
}

TEST(TelemetryRowsTest, JsonKeysAreTheCsvHeaderInOrder) {
  const nlohmann::ordered_json rows = TelemetryRowsJson(TwoRows());
  ASSERT_EQ(rows.size(), 2u);
  std::vector<std::string> keys;
  for (auto it = rows[0].begin(); it != rows[0].end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(absl::StrJoin(keys, ","), kTelemetryCsvHeader);
  EXPECT_EQ(rows[0]["host"], "host,1");
  EXPECT_EQ(rows[0]["step_mean_us"], 3412.3456789);
  EXPECT_EQ(rows[1]["duty_cycle_percent"], -1.0);
}

TEST(TelemetryRowsTest, NoRowsIsTheHeaderAlone) {
  std::ostringstream csv;
  WriteTelemetryCsv(v1::GetTelemetryResponse(), csv);
  EXPECT_EQ(csv.str(), std::string(kTelemetryCsvHeader) + "\n");
  EXPECT_TRUE(TelemetryRowsJson(v1::GetTelemetryResponse()).is_array());
}

TEST(TelemetryRowsTest, TheRowsTableSaysWhatWasNotReported) {
  std::ostringstream out;
  WriteTelemetryRowsTable(TwoRows(), TableFit(), out);
  EXPECT_NE(out.str().find("3.41 ms"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("1203.2 us"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("72.5%"), std::string::npos) << out.str();
  // A single slice's rows have no DCN columns.
  EXPECT_EQ(out.str().find("DCN"), std::string::npos) << out.str();
}

// A multi-slice host's DCN latencies (issue #56): in the CSV and JSON, and as columns of both
// tables once a row has transfers.
TEST(TelemetryRowsTest, DcnLatenciesShowWhereARowHasTransfers) {
  v1::GetTelemetryResponse r = TwoRows();
  v1::ChipTelemetry* t = r.mutable_rows(0)->mutable_chip();
  t->set_dcn_transfers(1600);
  t->set_dcn_latency_p50_us(41.25);
  t->set_dcn_latency_p99_us(344.5);
  std::ostringstream csv;
  WriteTelemetryCsv(r, csv);
  EXPECT_NE(csv.str().find(",40,1203.25,1600,41.25,344.5\n"), std::string::npos) << csv.str();
  EXPECT_EQ(TelemetryRowsJson(r)[0]["dcn_latency_p99_us"], 344.5);
  std::ostringstream rows, summary;
  WriteTelemetryRowsTable(r, TableFit(), rows);
  EXPECT_NE(rows.str().find("DCN P50"), std::string::npos) << rows.str();
  EXPECT_NE(rows.str().find("41.2 us"), std::string::npos) << rows.str();
  EXPECT_NE(rows.str().find("344.5 us"), std::string::npos) << rows.str();
  WriteTelemetrySummaryTable(r, TableFit(), summary);
  EXPECT_NE(summary.str().find("DCN P99"), std::string::npos) << summary.str();
  EXPECT_NE(summary.str().find("344.5 us"), std::string::npos) << summary.str();
}

}  // namespace
}  // namespace podprof::report
