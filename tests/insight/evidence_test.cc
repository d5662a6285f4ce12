// The straggler test: a chip is named only on evidence (insight/evidence.h).
#include "insight/evidence.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "insight/collectives.h"

namespace podprof::insight {
namespace {

TEST(BinomialUpperTail, MatchesExactSums) {
  // P(X >= 3), X ~ Bin(4, 0.5) = (4 + 1) / 16.
  EXPECT_NEAR(BinomialUpperTail(3, 4, 0.5), 5.0 / 16, 1e-12);
  // P(X >= 10), X ~ Bin(10, 0.1) = 1e-10.
  EXPECT_NEAR(BinomialUpperTail(10, 10, 0.1) / 1e-10, 1, 1e-9);
  // At or under the mean there is no evidence: 1, not computed.
  EXPECT_EQ(BinomialUpperTail(242, 3878, 1.0 / 16), 1);
  EXPECT_EQ(BinomialUpperTail(0, 10, 0.3), 1);
  EXPECT_EQ(BinomialUpperTail(11, 10, 0.3), 0);
  // Far in the tail it underflows to 0 rather than overflowing.
  EXPECT_GE(BinomialUpperTail(3800, 3878, 1.0 / 16), 0);
  EXPECT_LT(BinomialUpperTail(3800, 3878, 1.0 / 16), 1e-300);
}

// Rows for `chips` chips at `instances` pod-wide collectives, each last `times[c]` times.
std::vector<trace::StragglerRow> Rows(const std::vector<int64_t>& times, int64_t instances,
                                      int64_t caused_per_time_ps) {
  std::vector<trace::StragglerRow> rows;
  for (size_t c = 0; c < times.size(); ++c) {
    trace::StragglerRow r;
    r.host = "host-" + std::to_string(c / 4);
    r.chip_ordinal = static_cast<int>(c % 4);
    r.times_last = times[c];
    r.instances = instances;
    r.expected_last = static_cast<double>(instances) / static_cast<double>(times.size());
    r.caused_ps = times[c] * caused_per_time_ps;
    rows.push_back(r);
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.caused_ps > b.caused_ps; });
  return rows;
}

TEST(JudgeStragglers, TheIssuesNoisePodNamesNobody) {
  // The default demo: 16 chips, 3878 collectives, the top chip last in 239 (6.2%, chance 1/16).
  std::vector<int64_t> times = {239, 251, 236, 247, 240, 244, 238, 250,
                                243, 246, 237, 241, 245, 239, 240, 242};
  const StragglerVerdict v = JudgeStragglers(Rows(times, 3878, 1000));
  EXPECT_FALSE(v.named);
  for (bool s : v.significant) EXPECT_FALSE(s);
  EXPECT_EQ(v.text.rfind("no clear straggler: ", 0), 0u) << v.text;
}

TEST(JudgeStragglers, NoiseDrawnAtRandomNamesNobodyInAThousandPods) {
  // Bonferroni keeps the pod-wide false alarm rate under kStragglerAlpha: in 1,000 noise pods
  // of 16 chips, expect about 1 false alarm at most; more than 5 means the test is broken.
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> chip(0, 15);
  int named = 0;
  for (int pod = 0; pod < 1000; ++pod) {
    std::vector<int64_t> times(16, 0);
    for (int i = 0; i < 2000; ++i) ++times[chip(rng)];
    named += JudgeStragglers(Rows(times, 2000, 1000)).named;
  }
  EXPECT_LE(named, 5);
}

TEST(JudgeStragglers, AnInjectedStragglerIsNamedWithItsEvidence) {
  std::vector<int64_t> times(16, 20);
  times[5] = 3878 - 15 * 20;
  const StragglerVerdict v = JudgeStragglers(Rows(times, 3878, 1000));
  ASSERT_TRUE(v.named);
  EXPECT_EQ(v.row, 0u);
  EXPECT_TRUE(v.significant[0]);
  EXPECT_EQ(v.text,
            "host-1 chip 1 is a straggler: last in 3578 of 3878 collectives where chance gives "
            "242 (p < 1e-300), causing 92.3% of the waiting where chance gives 6.2%")
      << v.text;
}

TEST(JudgeStragglers, OftenLastButCausingLittleWaitingIsNotNamed) {
  std::vector<int64_t> times(16, 100);
  times[0] = 1000;
  std::vector<trace::StragglerRow> rows = Rows(times, 2500, 1000);
  for (auto& r : rows) {
    if (r.times_last == 1000) r.caused_ps = 1;  // last, but by a hair each time
  }
  const StragglerVerdict v = JudgeStragglers(rows);
  EXPECT_FALSE(v.named) << v.text;
}

TEST(JudgeStragglers, AChipLastEveryTimeIsTheOnlyRowAndIsNamed) {
  trace::StragglerRow r;
  r.host = "host-1";
  r.chip_ordinal = 1;
  r.times_last = r.instances = 515;
  r.expected_last = 515.0 / 4;
  r.caused_ps = 1'000'000;
  const StragglerVerdict v = JudgeStragglers({r});
  EXPECT_TRUE(v.named) << v.text;
  EXPECT_NEAR(v.chance_share, 0.25, 1e-12);
}

TEST(JudgeStragglers, RowsStoredWithoutChanceCountsAreNotJudged) {
  std::vector<trace::StragglerRow> rows = Rows({900, 10, 10, 10}, 930, 1000);
  rows[1].expected_last = -1;
  const StragglerVerdict v = JudgeStragglers(rows);
  EXPECT_FALSE(v.judged);
  EXPECT_FALSE(v.named);
}

// The chance a chip is last is 1/members of each instance it joined: in groups of 4 of a
// 16-chip pod, a chip last in a third of its instances is a straggler, though a third of its
// instances is under 1/16 of the pod's.
TEST(JudgeStragglers, ChanceComesFromEachInstancesMembers) {
  std::vector<CollectiveRun> runs;
  CollectiveNames names;
  names.hosts = {"h0", "h1", "h2", "h3"};
  names.kernels[1] = "all-reduce";
  uint64_t id = 1;
  for (int step = 0; step < 300; ++step) {
    for (int group = 0; group < 4; ++group, ++id) {
      for (int member = 0; member < 4; ++member) {
        CollectiveRun r;
        r.id = id;
        r.host = group;
        r.chip_ordinal = member;
        r.chip_key = group * 4 + member;
        r.kernel_key = 1;
        r.duration_ns = 100'000;
        // Chip 0 of host 0 is last in 1 of 3 of its instances; otherwise the last rotates.
        const bool late = group == 0 && member == 0 && step % 3 == 0;
        const int rotating = (step + group) % 4;
        r.start_ns = step * 1'000'000 + (late ? 50'000 : (member == rotating ? 10'000 : member));
        runs.push_back(r);
      }
    }
  }
  const CollectiveReport report = AnalyzeCollectives(runs, names);
  EXPECT_EQ(report.left_out, 0);
  const StragglerVerdict v = JudgeStragglers(report.stragglers);
  ASSERT_TRUE(v.named) << v.text;
  EXPECT_EQ(report.stragglers[v.row].host, "h0");
  EXPECT_EQ(report.stragglers[v.row].chip_ordinal, 0);
  EXPECT_NEAR(report.stragglers[v.row].expected_last, 300.0 / 4, 1e-9);
}

// Real TPUs number all_reduce_unique_id per chip (the v6e fixture: chip 0's first all-reduce
// has the id chips 1-3 give their third): arrivals that cannot be one execution are left out.
TEST(Collectives, AnIdJoiningDifferentExecutionsIsLeftOutNotWaitedOn) {
  CollectiveNames names;
  names.hosts = {"h"};
  names.kernels[1] = "all-reduce";
  std::vector<CollectiveRun> runs;
  auto run = [&](uint64_t id, int chip, int64_t start_ns) {
    CollectiveRun r;
    r.id = id;
    r.chip_key = chip;
    r.chip_ordinal = chip;
    r.kernel_key = 1;
    r.start_ns = start_ns;
    r.duration_ns = 120'000'000;
    runs.push_back(r);
  };
  // Executions at 0, 3.5 s and 6.3 s; chip 0 counts two executions ahead.
  const int64_t at[] = {0, 3'500'000'000, 6'300'000'000};
  for (int e = 0; e < 3; ++e) {
    run(131073 + 65536 * e, 0, at[e]);
    for (int c = 1; c < 4; ++c) run(1 + 65536 * e, c, at[e] + 1000 * c);
  }
  const CollectiveReport report = AnalyzeCollectives(runs, names);
  EXPECT_EQ(report.left_out, 1);
  EXPECT_EQ(report.left_out_example, "all-reduce (all_reduce_unique_id 131073, 4 arrivals)");
  int64_t wait_ps = 0;
  for (const auto& [key, w] : report.waits) wait_ps += w.wait_ps;
  // Only the two whole executions of chips 1-3 count: 2 x (2 + 1) us.
  EXPECT_EQ(wait_ps, 2 * 3'000'000);
}

}  // namespace
}  // namespace podprof::insight
