// The one MXU figure (report/mxu.h): the performance counters' where sampled, else the
// mxu_busy gauge's, with its source named.
#include "report/mxu.h"

#include <sstream>

#include "gtest/gtest.h"

namespace podprof::report {
namespace {

v1::KernelInsight Gauge(double busy) {
  v1::KernelInsight in;
  in.set_has_counters(true);
  (*in.mutable_utilization())["mxu_busy"] = busy;
  return in;
}

TEST(MxuTest, CountersBeforeTheGaugeAndNothingWithoutEither) {
  v1::KernelInsight in = Gauge(0.72);
  EXPECT_EQ(MxuOf(in).source, MxuSource::kGauge);
  EXPECT_DOUBLE_EQ(MxuOf(in).busy, 0.72);
  (*in.mutable_kernel_profile()->mutable_units())["mxu"] = 0.31;
  EXPECT_EQ(MxuOf(in).source, MxuSource::kPerfCounters);
  EXPECT_DOUBLE_EQ(MxuOf(in).busy, 0.31);
  EXPECT_FALSE(MxuOf(v1::KernelInsight()).known());
}

// Regression (#53): `history` showed "-" where `stats` showed the gauge's 72%.
TEST(MxuTest, AHistoryPointHasTheFigureStatsHas) {
  v1::KernelHistoryPoint p;
  EXPECT_FALSE(MxuOf(p).known());
  (*p.mutable_utilization())["mxu_busy"] = 0.72;
  EXPECT_EQ(MxuOf(p).source, MxuSource::kGauge);
  EXPECT_DOUBLE_EQ(MxuOf(p).busy, MxuOf(Gauge(0.72)).busy);
  (*p.mutable_kernel_profile()->mutable_units())["mxu"] = 0.5;
  EXPECT_EQ(MxuOf(p).source, MxuSource::kPerfCounters);
}

TEST(MxuTest, CellsAndFootnoteNameTheSource) {
  const MxuFigure gauge{0.72, MxuSource::kGauge}, perf{0.31, MxuSource::kPerfCounters};
  MxuSources none;
  EXPECT_EQ(none.Cell({}), "-");
  EXPECT_EQ(none.Footnote(), "");
  MxuSources gauges;
  gauges.Add(gauge);
  EXPECT_EQ(gauges.Cell(gauge), "72.0%");
  EXPECT_EQ(gauges.Cell({0, MxuSource::kGauge}), "0.0%");  // measured idle is not "-"
  EXPECT_EQ(gauges.Footnote(), "MXU: the runtime's MXU-busy gauge over the kernel's runs");
  MxuSources both = gauges;
  both.Add(perf);
  EXPECT_EQ(both.Cell(perf), "31.0%");
  EXPECT_EQ(both.Cell(gauge), "~72.0%");
  EXPECT_NE(both.Footnote().find("~ marks the runtime's MXU-busy gauge"), std::string::npos);
  EXPECT_STREQ(MxuSourceName(MxuSource::kGauge), "mxu_busy_gauge");
  EXPECT_STREQ(MxuSourceName(MxuSource::kPerfCounters), "perf_counters");
}

TEST(MxuTest, TheFootnoteFollowsTheColumn) {
  MxuSources gauges;
  gauges.Add({0.72, MxuSource::kGauge});
  TextTable t({{"KERNEL"}, {"MXU", TextTable::Align::kRight, 0, 10}, {"MEAN"}});
  t.AddRow({"fusion.1", "72.0%", "343 us"});
  std::ostringstream shown, dropped;
  WriteMxuFootnote(gauges, t, {}, shown);
  EXPECT_EQ(shown.str(), "MXU: the runtime's MXU-busy gauge over the kernel's runs\n");
  WriteMxuFootnote(gauges, t, {14, false}, dropped);  // too narrow for MXU: no footnote
  EXPECT_EQ(dropped.str(), "");
}

}  // namespace
}  // namespace podprof::report
