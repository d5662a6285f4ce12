// The DCN verdicts of issue #56 on the simulator's own captures, ten seeds each: every host of a
// 4-slice job written as its XSpace (each host on a clock of its own), read back by podprof's
// reader, its DCN ops taken from the capture and put on one clock by the host's correction, and
// judged by AnalyseDcn. The window is 10 steps (20 rendezvous instances): a culprit must be
// named within it.
//
// - an injected 300 us delay on one slice's link is named as the network on that link (the
//   delayed slice -> its ring successor), not as a producer;
// - a slow slice (compute 1.3x) is named as the late producer, and no link;
// - a healthy job names nothing.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "gtest/gtest.h"
#include "insight/dcn.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "tests/util/status_matchers.h"
#include "trace/byte_source.h"
#include "trace/xspace_reader.h"

namespace podprof::sim {
namespace {

constexpr int kSlices = 4;
constexpr int kHosts = 4;  // one per slice
constexpr int kSteps = 10;
constexpr int64_t kStartNs = 1'800'000'000'000'000'000;

// Every host's DCN ops of a `steps`-step window of the job `config` (host_index ignored).
std::vector<insight::DcnHost> CaptureJob(PodConfig config, int steps = kSteps) {
  std::vector<insight::DcnHost> hosts;
  for (int h = 0; h < config.hosts; ++h) {
    config.host_index = h;
    absl::StatusOr<PodModel> model = PodModel::Create(config);
    EXPECT_OK(model);
    if (!model.ok()) return {};
    const int64_t period = model->step_period_ns();
    // The window starts a little into a step, as a capture's would.
    const int64_t first_step = kStartNs / period + 1;
    FakeClock truth(first_step * period + period / 7);
    // Each host's clock is off by its own milliseconds; the analysis gets the correction the
    // aggregator's alignment would have found.
    const int64_t offset_ns = (h % 2 ? 1 : -1) * (h + 1) * 1'300'000;
    const SkewedClock clock(truth, offset_ns, 0);
    SessionWindow w;
    w.true_start_ns = truth.NowNs();
    w.true_end_ns = w.true_start_ns + steps * period;
    w.host_name = absl::StrCat("host-", h);
    const std::string bytes = BuildXSpace(*model, clock, w).space.SerializeAsString();
    trace::MemorySource source(bytes, w.host_name);
    absl::StatusOr<trace::HostCapture> capture = trace::ReadXSpace(source);
    EXPECT_OK(capture);
    if (!capture.ok()) return {};
    trace::ClockCorrection correction;
    correction.offset_ns = offset_ns;
    hosts.push_back(insight::DcnHostFromCapture(*capture, model->slice(), correction));
  }
  return hosts;
}

PodConfig Job(uint64_t seed) {
  PodConfig c;
  c.generation = "v5e";
  c.chips = 4;
  c.hosts = kHosts;
  c.slices = kSlices;
  c.pod_seed = seed;
  return c;
}

int NamedCount(const std::vector<insight::DcnCulprit>& rows) {
  int n = 0;
  for (const insight::DcnCulprit& c : rows) n += c.named;
  return n;
}

TEST(DcnVerdictTest, ADelayedLinkIsNamedAsTheNetworkOnItsPairInTenOfTenSeeds) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    PodConfig c = Job(seed);
    const int slow = static_cast<int>(seed % kSlices);
    c.dcn_delays.push_back({slow, 300'000});
    const insight::DcnReport r = insight::AnalyseDcn(CaptureJob(c));
    ASSERT_EQ(r.slices, kSlices);
    EXPECT_EQ(r.unpaired, 0) << r.verdict;
    ASSERT_FALSE(r.links.empty()) << r.verdict;
    EXPECT_TRUE(r.links[0].named) << r.verdict;
    EXPECT_EQ(r.links[0].src_slice, slow) << r.verdict;
    EXPECT_EQ(r.links[0].dst_slice, (slow + 1) % kSlices) << r.verdict;
    EXPECT_EQ(NamedCount(r.links), 1) << r.verdict;
    EXPECT_EQ(NamedCount(r.producers), 0) << r.verdict;
    EXPECT_GE(r.named_after_instances, 1);
    EXPECT_LE(r.named_after_instances, 2 * kSteps) << r.verdict;
  }
}

TEST(DcnVerdictTest, ASlowSliceIsNamedAsTheLateProducerInTenOfTenSeeds) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    PodConfig c = Job(seed);
    const int slow = static_cast<int>((seed + 2) % kSlices);
    c.slow_slices.push_back({slow, 1.3});
    const insight::DcnReport r = insight::AnalyseDcn(CaptureJob(c));
    ASSERT_FALSE(r.producers.empty()) << r.verdict;
    EXPECT_TRUE(r.producers[0].named) << r.verdict;
    EXPECT_EQ(r.producers[0].src_slice, slow) << r.verdict;
    EXPECT_EQ(NamedCount(r.producers), 1) << r.verdict;
    EXPECT_EQ(NamedCount(r.links), 0) << r.verdict;
    EXPECT_LE(r.named_after_instances, 2 * kSteps) << r.verdict;
  }
}

// Over a long capture (800 instances) the links not into a slow slice run within a few hundred
// ns of each other: some are "last" far more often than chance (p < 1e-8 here), yet none is
// slow. Only the slice is named (a link must also run beyond the network's noise: the demo
// once named one at 0 us of excess without that rule).
TEST(DcnVerdictTest, ALongCaptureOfASlowSliceNamesNoLink) {
  PodConfig c = Job(1);
  c.generation = "v5p";
  c.hosts = 8;  // two a slice, as the demo runs them
  c.slow_slices.push_back({2, 1.3});
  const insight::DcnReport r = insight::AnalyseDcn(CaptureJob(c, 400));
  ASSERT_FALSE(r.producers.empty());
  EXPECT_TRUE(r.producers[0].named) << r.verdict;
  EXPECT_EQ(r.producers[0].src_slice, 2) << r.verdict;
  EXPECT_EQ(NamedCount(r.links), 0) << r.verdict;
}

TEST(DcnVerdictTest, AHealthyJobNamesNothingInTenOfTenSeeds) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    const insight::DcnReport r = insight::AnalyseDcn(CaptureJob(Job(seed)));
    EXPECT_GT(r.transfers, 0);
    EXPECT_EQ(NamedCount(r.links), 0) << r.verdict;
    EXPECT_EQ(NamedCount(r.producers), 0) << r.verdict;
    EXPECT_EQ(r.named_after_instances, -1) << r.verdict;
  }
}

}  // namespace
}  // namespace podprof::sim
