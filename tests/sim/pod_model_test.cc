#include "sim/pod_model.h"

#include <map>

#include "absl/strings/match.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "gtest/gtest.h"
#include "sim/xspace_builder.h"
#include "tests/util/status_matchers.h"
#include "trace/byte_source.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof::sim {
namespace {

PodConfig Pod(int hosts, int index, uint64_t seed = 7) {
  PodConfig c;
  c.generation = "v5e";
  c.chips = 4;
  c.hosts = hosts;
  c.host_index = index;
  c.pod_seed = seed;
  return c;
}

TEST(PodModelTest, DeterministicForASeed) {
  auto a = PodModel::Create(Pod(2, 0)), b = PodModel::Create(Pod(2, 0));
  ASSERT_OK(a);
  ASSERT_OK(b);
  std::vector<ChipStep> sa = a->Step(1234), sb = b->Step(1234);
  ASSERT_EQ(sa.size(), 4u);
  for (int c = 0; c < 4; ++c) {
    ASSERT_EQ(sa[c].runs.size(), sb[c].runs.size());
    for (size_t i = 0; i < sa[c].runs.size(); ++i) {
      EXPECT_EQ(sa[c].runs[i].start_ps, sb[c].runs[i].start_ps);
      EXPECT_EQ(sa[c].runs[i].duration_ps, sb[c].runs[i].duration_ps);
    }
  }
  auto other = PodModel::Create(Pod(2, 0, 8));
  EXPECT_NE(other->Step(1234)[0].runs[0].duration_ps, sa[0].runs[0].duration_ps);
}

// The pod-wide part of a step is the same from every host's model, and a host's step built
// from it is the step the host computes alone.
TEST(PodModelTest, SharedCollectiveEndsGiveEveryHostItsOwnStep) {
  auto h0 = PodModel::Create(Pod(3, 0)), h2 = PodModel::Create(Pod(3, 2));
  ASSERT_OK(h0);
  ASSERT_OK(h2);
  for (int64_t step : {0, 41}) {
    const StepSchedule schedule = h0->Schedule(step);
    ASSERT_FALSE(schedule.collective_ends.empty());
    EXPECT_EQ(h2->Schedule(step).collective_ends, schedule.collective_ends);
    EXPECT_TRUE(schedule.dcn_arrivals.empty());
    std::vector<ChipStep> alone = h2->Step(step), shared = h2->Step(step, schedule);
    ASSERT_EQ(alone.size(), shared.size());
    for (size_t c = 0; c < alone.size(); ++c) {
      EXPECT_EQ(alone[c].busy_end_ps, shared[c].busy_end_ps);
      ASSERT_EQ(alone[c].runs.size(), shared[c].runs.size());
      for (size_t i = 0; i < alone[c].runs.size(); ++i) {
        EXPECT_EQ(alone[c].runs[i].start_ps, shared[c].runs[i].start_ps);
        EXPECT_EQ(alone[c].runs[i].duration_ps, shared[c].runs[i].duration_ps);
        EXPECT_EQ(alone[c].runs[i].collective_id, shared[c].runs[i].collective_id);
      }
    }
  }
}

TEST(PodModelTest, HostsOfOnePodAgreeOnCollectives) {
  auto h0 = PodModel::Create(Pod(2, 0)), h1 = PodModel::Create(Pod(2, 1));
  ASSERT_OK(h0);
  ASSERT_OK(h1);
  for (int64_t step : {0, 17, 99999}) {
    std::vector<ChipStep> all = h0->Step(step);
    for (ChipStep& cs : h1->Step(step)) all.push_back(cs);
    ASSERT_EQ(all.size(), 8u);
    int collectives = 0;
    for (size_t i = 0; i < all[0].runs.size(); ++i) {
      const OpRun& ref = all[0].runs[i];
      if (ref.collective_id == 0) continue;
      ++collectives;
      for (const ChipStep& cs : all) {
        EXPECT_EQ(cs.runs[i].collective_id, ref.collective_id);
        EXPECT_EQ(cs.runs[i].start_ps + cs.runs[i].duration_ps, ref.start_ps + ref.duration_ps)
            << "collective " << i << " must end at one instant on every chip";
      }
    }
    EXPECT_EQ(collectives, 9);
    EXPECT_LT(all[0].busy_end_ps, h0->step_period_ns() * 1000);
  }
}

TEST(PodModelTest, StragglerMakesOthersWait) {
  PodConfig slow = Pod(2, 0);
  slow.stragglers.push_back({1, 2, 2.0});
  auto base = PodModel::Create(Pod(2, 0)), with = PodModel::Create(slow);
  ASSERT_OK(base);
  ASSERT_OK(with);
  std::vector<ChipStep> b = base->Step(5), w = with->Step(5);
  // Host 0's chips are not slow themselves, but wait longer in collectives.
  int64_t base_wait = 0, slow_wait = 0;
  for (size_t i = 0; i < b[0].runs.size(); ++i) {
    if (b[0].runs[i].collective_id == 0) {
      EXPECT_EQ(b[0].runs[i].duration_ps, w[0].runs[i].duration_ps);
    } else {
      base_wait += b[0].runs[i].duration_ps;
      slow_wait += w[0].runs[i].duration_ps;
    }
  }
  EXPECT_GT(slow_wait, base_wait * 2);
  EXPECT_GT(with->step_period_ns(), base->step_period_ns());
}

TEST(PodModelTest, RooflineBoundsDurations) {
  auto m = PodModel::Create(Pod(1, 0));
  ASSERT_OK(m);
  const auto& gen = m->generation();
  const std::vector<ChipStep> step = m->Step(3);
  for (const OpRun& r : step[1].runs) {
    const OpTemplate& op = m->ops()[r.op];
    if (op.collective) continue;
    double bound_ps =
        std::max(op.flops / (gen.peak_tflops * 1e12), op.bytes / (gen.peak_hbm_gbps * 1e9)) * 1e12;
    EXPECT_GT(r.duration_ps, bound_ps * 0.85) << op.name;  // no kernel beats the roofline
    EXPECT_LT(r.duration_ps, bound_ps / op.efficiency * 1.25) << op.name;
  }
}

TEST(PodModelTest, BadConfigsAreClear) {
  PodConfig c = Pod(1, 0);
  c.generation = "v9";
  EXPECT_TRUE(absl::StrContains(PodModel::Create(c).status().message(), "v9"));
  EXPECT_FALSE(PodModel::Create(Pod(2, 2)).ok());
  PodConfig s = Pod(2, 0);
  s.stragglers.push_back({3, 0, 2});
  EXPECT_TRUE(absl::StrContains(PodModel::Create(s).status().message(), "straggler"));
}

// The generated XSpace through the production reader, with a fake true clock so the clock
// errors can be checked exactly.
TEST(XSpaceBuilderTest, ReaderSeesChipsKernelsAndExactClockErrors) {
  auto m = PodModel::Create(Pod(2, 1));
  ASSERT_OK(m);
  FakeClock truth(1'800'000'000'000'000'000);
  SkewedClock host(truth, -37'500'000, 0);
  SessionWindow w;
  w.true_start_ns = truth.NowNs() + 123'456;
  w.true_end_ns = w.true_start_ns + 200'000'000;
  w.device_offset_ns = 120'000;
  w.counters = true;
  w.host_name = "sim-a";
  BuildResult built = BuildXSpace(*m, host, w);
  std::string bytes = built.space.SerializeAsString();
  trace::MemorySource src(bytes);
  auto c = trace::ReadXSpace(src);
  ASSERT_OK(c);
  EXPECT_EQ(c->host.name, "sim-a");
  ASSERT_EQ(c->host.chips.size(), 4u);
  EXPECT_EQ(c->host.chips[2].generation, "v5e");
  EXPECT_EQ(c->host.chips[2].global_id, 6);
  EXPECT_EQ(c->host.profile_start_ns, w.true_start_ns - 37'500'000);
  EXPECT_EQ(static_cast<int64_t>(c->EventCount()) > built.kernel_events, true);
  EXPECT_EQ(c->counters.size(), 4u * 8);  // 6 busy and stall gauges, 2 energy totals

  // Every kernel's start, read back, is its true start + host offset + device offset.
  const int64_t first_step = m->StepAt(w.true_start_ns);
  std::map<std::pair<int, int64_t>, int64_t> true_start_by_chip_and_id;
  for (int64_t s = first_step; s <= m->StepAt(w.true_end_ns); ++s) {
    std::vector<ChipStep> st = m->Step(s);
    for (int chip = 0; chip < 4; ++chip) {
      for (const OpRun& r : st[chip].runs) {
        if (r.collective_id)
          true_start_by_chip_and_id[{chip, r.collective_id}] =
              st[chip].start_ns * 1000 + r.start_ps;
      }
    }
  }
  int checked = 0;
  for (const trace::EventBlock& b : c->blocks) {
    if (b.kind != trace::LineKind::kOps) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      if (b.collective[i] == 0) continue;
      int64_t read_ps = b.base_ns * 1000 + b.start_ps[i];
      int64_t true_ps = true_start_by_chip_and_id.at({b.chip, b.collective[i]});
      EXPECT_EQ(read_ps - true_ps, (-37'500'000 + 120'000) * int64_t{1000});
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
  auto stats = trace::RollUpByKernel(trace::ComputeKernelStats(*c));
  EXPECT_EQ(stats.size(), m->ops().size());
}

TEST(SkewedClockTest, OffsetAndDriftAreExact) {
  FakeClock truth(1'700'000'000'000'000'000);
  SkewedClock host(truth, -37'500'000, 50.0);  // 50 ppm fast
  EXPECT_EQ(host.NowNs(), truth.NowNs() - 37'500'000);
  truth.AdvanceNs(10'000'000'000);  // 10 s later the drift adds 500 us
  EXPECT_EQ(host.NowNs(), truth.NowNs() - 37'500'000 + 500'000);
  EXPECT_EQ(host.ToTrue(host.NowNs()), truth.NowNs());
  EXPECT_EQ(host.HostIntervalPs(1'000'000'000'000), 1'000'050'000'000);
}

TEST(XSpaceBuilderTest, DriftStretchesHostTimeButNotDeviceDurations) {
  auto m = PodModel::Create(Pod(1, 0));
  ASSERT_OK(m);
  FakeClock truth(1'800'000'000'000'000'000);
  SkewedClock host(truth, 0, 100.0);
  SessionWindow w;
  w.true_start_ns = truth.NowNs() + 1'000'000'000;  // 1 s after the clock's epoch: +100 us
  w.true_end_ns = w.true_start_ns + 100'000'000;
  BuildResult built = BuildXSpace(*m, host, w);
  std::string bytes = built.space.SerializeAsString();
  trace::MemorySource src(bytes);
  auto c = trace::ReadXSpace(src);
  ASSERT_OK(c);
  EXPECT_EQ(c->host.profile_start_ns, w.true_start_ns + 100'000);
  EXPECT_EQ(c->host.profile_stop_ns - c->host.profile_start_ns, 100'010'000);
  // Kernel durations are device-measured (device_duration_ps): the true ones.
  const int64_t s = m->StepAt(w.true_start_ns) + 1;
  const std::vector<ChipStep> step = m->Step(s);
  int matched = 0;
  for (const trace::EventBlock& b : c->blocks) {
    if (b.kind != trace::LineKind::kOps || b.chip != 0) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      for (const OpRun& r : step[0].runs) {
        int64_t true_ps = step[0].start_ns * 1000 + r.start_ps;
        int64_t host_ps = (b.base_ns - c->host.profile_start_ns) * 1000 + b.start_ps[i];
        if (host_ps == host.HostIntervalPs(true_ps - w.true_start_ns * 1000)) {
          EXPECT_EQ(b.duration_ps[i], r.duration_ps);
          ++matched;
        }
      }
    }
  }
  EXPECT_EQ(matched, static_cast<int>(step[0].runs.size()));
}

}  // namespace
}  // namespace podprof::sim
