// What `podprof captures` prints of a capture's labels (cli/capture_rows.h): a triggered
// snapshot's cause as a sentence from its evidence, never the evidence's JSON (#53).
#include "cli/capture_rows.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace podprof::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ProtoLabels Labels(std::initializer_list<std::pair<const std::string, std::string>> pairs) {
  ProtoLabels out;
  for (const auto& [k, v] : pairs) out[k] = v;
  return out;
}

// Each automatic trigger's evidence, as aggregator/recorder/triggers.cc writes it, said in a
// sentence.
TEST(TriggerSummaryTest, EachTriggersEvidenceIsASentence) {
  EXPECT_EQ(
      TriggerSummary(Labels({{"trigger", "step_time"},
                             {"telemetry", R"({"recent_step_us": 4730, "baseline_step_us": 3390,
                     "ratio": 1.395, "threshold": 1.1, "recent": [[1, 4730]]})"}})),
      "step_time: step time 1.40x its baseline (4.73 ms against 3.39 ms; fires past 1.10x)");
  EXPECT_EQ(TriggerSummary(
                Labels({{"trigger", "straggler"}, {"telemetry", R"({"host": "host-2", "chip": 1,
                                      "step_us": 5400, "ratio_to_pod_median": 1.6})"}})),
            "straggler: chip 1 of host-2 at 1.60x the pod's median step (5.40 ms)");
  EXPECT_EQ(TriggerSummary(
                Labels({{"trigger", "duty_cycle"}, {"telemetry", R"({"recent_duty_percent": 47.1,
                                      "baseline_duty_percent": 72.7, "threshold": 0.85})"}})),
            "duty_cycle: duty cycle down 35% (47.1% from 72.7%; fires past 15%)");
  EXPECT_EQ(TriggerSummary(Labels({{"trigger", "hang"}, {"telemetry", R"({"quiet_seconds": 31,
                                      "last_step_second": 100})"}})),
            "hang: no step ended on any chip for 31 s");
  EXPECT_EQ(TriggerSummary(Labels({{"trigger", "dcn"}, {"telemetry", R"({"host": "host-5",
                                      "slice": 1, "recent_p50_us": 342.1, "baseline_p50_us": 40.2,
                                      "ratio": 8.51})"}})),
            "dcn: DCN into host-5 (slice 1) at 8.51x its baseline (p50 342 us against 40 us)");
}

// Without usable evidence (a webhook, a person, a damaged label) the reason stands in, cut to
// 80 characters; a capture no trigger took has no summary and keeps its labels as they are.
TEST(TriggerSummaryTest, WithoutEvidenceTheReasonStandsIn) {
  EXPECT_EQ(TriggerSummary(Labels({{"trigger", "webhook"}, {"reason", "GoodputLow: 61%"}})),
            "webhook: GoodputLow: 61%");
  const std::string said = TriggerSummary(Labels(
      {{"trigger", "step_time"}, {"telemetry", "{not json"}, {"reason", std::string(200, 'x')}}));
  EXPECT_EQ(said.size(), std::string("step_time: ").size() + 80) << said;
  EXPECT_EQ(TriggerSummary(Labels({{"trigger", "manual"}})), "manual");
  EXPECT_EQ(TriggerSummary(Labels({{"run", "baseline"}})), "");
  EXPECT_EQ(TableLabels(Labels({{"run", "baseline"}, {"job", "llm"}})), "job=llm;run=baseline");
}

// The table's labels: the sentence in place of the reserved labels, the others after it.
TEST(TriggerSummaryTest, TheTableShowsTheSentenceNotTheJson) {
  const std::string shown =
      TableLabels(Labels({{"trigger", "hang"},
                          {"trigger_ns", "1796591631001000000"},
                          {"reason", "no step ended on any chip for 4 s"},
                          {"telemetry", R"({"quiet_seconds": 4, "holding": ["hang"]})"},
                          {"window", "before-request"}}));
  EXPECT_EQ(shown, "hang: no step ended on any chip for 4 s;window=before-request");
  EXPECT_THAT(shown, Not(HasSubstr("{")));
}

}  // namespace
}  // namespace podprof::cli
