// `podprof telemetry`'s summary per chip (report/telemetry_summary.h).
#include "report/telemetry_summary.h"

#include "gtest/gtest.h"

namespace podprof::report {
namespace {

void AddRow(v1::GetTelemetryResponse& r, const std::string& host, int chip, int64_t time_ns,
            int64_t steps, double mean_us, double max_us, double duty, int64_t hbm,
            int64_t collectives = 0, double collective_mean_us = -1) {
  v1::TelemetryRow* row = r.add_rows();
  row->set_host(host);
  row->set_time_ns(time_ns);
  row->set_interval_ns(1'000'000'000);
  v1::ChipTelemetry* t = row->mutable_chip();
  t->set_chip(chip);
  t->set_steps(steps);
  t->set_step_mean_us(mean_us);
  t->set_step_max_us(max_us);
  t->set_duty_cycle_percent(duty);
  t->set_hbm_used_bytes(hbm);
  t->set_queued(-1);
  t->set_collectives(collectives);
  t->set_collective_mean_us(collective_mean_us);
}

TEST(TelemetrySummaryTest, LatestMedianAndWorstPerChip) {
  v1::GetTelemetryResponse r;
  // host-1 chip 0 over four seconds, out of order; the newest has no steps (an idle second).
  AddRow(r, "host-1", 0, 3'000, 200, 3400, 3600, 70, 100, 10, 100);
  AddRow(r, "host-1", 0, 1'000, 210, 3390, 9000, 72, 90, 30, 200);
  AddRow(r, "host-1", 0, 2'000, 205, 5000, 5200, 71, 95);
  AddRow(r, "host-1", 0, 4'000, 0, 0, 0, -1, -1);
  AddRow(r, "host-0", 3, 1'000, 100, 1000, 1100, 50, 7);
  const std::vector<ChipTelemetrySummary> s = SummarizeTelemetry(r);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].host, "host-0");  // by host, then chip
  EXPECT_EQ(s[0].chip, 3);
  EXPECT_DOUBLE_EQ(s[0].median_step_us, 1000);
  EXPECT_EQ(s[0].collectives, 0);
  EXPECT_DOUBLE_EQ(s[0].collective_mean_us, -1);
  const ChipTelemetrySummary& c = s[1];
  EXPECT_EQ(c.rows, 4);
  EXPECT_EQ(c.first_ns, 1'000);
  EXPECT_EQ(c.last_ns, 4'000);
  EXPECT_EQ(c.steps, 615);
  EXPECT_DOUBLE_EQ(c.latest_step_us, 3400);  // the newest row with steps
  EXPECT_DOUBLE_EQ(c.median_step_us, 3400);  // of 3390, 3400, 5000
  EXPECT_DOUBLE_EQ(c.worst_step_us, 9000);   // the longest single run
  EXPECT_DOUBLE_EQ(c.duty_cycle_percent, 71);
  EXPECT_EQ(c.hbm_used_bytes, 100);  // the newest reported
  EXPECT_EQ(c.queued, -1);           // never reported
  EXPECT_EQ(c.collectives, 40);
  EXPECT_DOUBLE_EQ(c.collective_mean_us, (10 * 100.0 + 30 * 200.0) / 40);
}

TEST(TelemetrySummaryTest, AChipThatNeverSteppedHasNoStepTimes) {
  v1::GetTelemetryResponse r;
  AddRow(r, "h", 0, 1'000, 0, 0, 0, 10, 5);
  AddRow(r, "h", 0, 2'000, 0, 0, 0, 20, 6);
  const std::vector<ChipTelemetrySummary> s = SummarizeTelemetry(r);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_DOUBLE_EQ(s[0].latest_step_us, -1);
  EXPECT_DOUBLE_EQ(s[0].median_step_us, -1);
  EXPECT_DOUBLE_EQ(s[0].worst_step_us, -1);
  EXPECT_DOUBLE_EQ(s[0].duty_cycle_percent, 15);  // the even count's middle two
  EXPECT_TRUE(SummarizeTelemetry({}).empty());
}

}  // namespace
}  // namespace podprof::report
