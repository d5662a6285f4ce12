#include "loadgen/capture_source.h"

#include <map>
#include <set>

#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "loadgen/emulated_host.h"
#include "sim/xspace_builder.h"
#include "stream/capture_decoder.h"
#include "tests/util/status_matchers.h"

namespace podprof::loadgen {
namespace {

sim::PodConfig Pod() {
  sim::PodConfig pod;
  pod.generation = "v5p";
  pod.chips = 2;
  pod.hosts = 4;
  pod.pod_seed = 3;
  return pod;
}

TEST(EmulatedHostTest, ClockErrorsAreDeterministicAndWithinTheirBounds) {
  std::set<int64_t> offsets;
  for (int i = 0; i < 100; ++i) {
    const int64_t o = HostClockOffsetNs(7, i, 50'000'000);
    EXPECT_EQ(o, HostClockOffsetNs(7, i, 50'000'000));
    EXPECT_LE(std::llabs(o), 50'000'000);
    EXPECT_LE(std::abs(HostClockDriftPpm(7, i, 50)), 50);
    offsets.insert(o);
  }
  EXPECT_GT(offsets.size(), 95u);
  EXPECT_NE(HostClockOffsetNs(7, 0, 50'000'000), HostClockOffsetNs(8, 0, 50'000'000));
}

// Two hosts of one pod: chunks within the limit, a trailer that counts what was sent, the
// window on each host's own clock, and the same collective ids on both.
TEST(CaptureSourceTest, HostsShareCollectivesOnTheirOwnClocks) {
  auto source = CaptureSource::Create(Pod(), /*counters=*/true);
  ASSERT_OK(source);
  RealClock truth;
  std::vector<std::unique_ptr<EmulatedHost>> hosts = MakeHosts(1, 2, 3, 40'000'000, 20, truth);
  const int64_t true_start = truth.NowNs() - 2'000'000'000;
  // Per host: every collective in its window, and those starting well inside it (a collective
  // near an edge can start before the window on one host and after it on the other).
  std::vector<std::set<uint64_t>> collectives(2), inner(2);
  for (int h = 0; h < 2; ++h) {
    const int64_t host_start = hosts[h]->clock.ToHost(true_start);
    auto capture = (*source)->Generate(*hosts[h], host_start, 200, 64 << 10);
    ASSERT_OK(capture);
    ASSERT_TRUE(capture->chunks.front().has_host_info());
    EXPECT_EQ(capture->chunks.front().host_info().host_name(), hosts[h]->name);
    stream::CaptureDecoder decoder;
    for (const auto& chunk : capture->chunks) {
      EXPECT_LE(chunk.ByteSizeLong(), size_t{64} << 10);
      ASSERT_OK(decoder.Add(chunk));
    }
    ASSERT_TRUE(decoder.done());
    const podprof::v1::CaptureTrailer& trailer = capture->chunks.back().trailer();
    EXPECT_EQ(trailer.event_count(), decoder.events());
    EXPECT_GT(trailer.counter_sample_count(), 0u);
    EXPECT_NEAR(static_cast<double>(trailer.actual_start_ns()), static_cast<double>(host_start),
                1000);
    const trace::HostCapture& c = decoder.capture();
    ASSERT_EQ(c.host.chips.size(), 2u);
    EXPECT_EQ(c.host.chips[1].global_id, hosts[h]->index * 2 + 1);
    for (const trace::EventBlock& b : c.blocks) {
      for (size_t i = 0; i < b.size(); ++i) {
        const int64_t t = b.base_ns + b.start_ps[i] / 1000;
        EXPECT_GE(t, host_start - 1'000'000) << b.line;
        EXPECT_LT(t, host_start + 201'000'000) << b.line;
        if (b.collective[i] == 0) continue;
        collectives[h].insert(b.collective[i]);
        if (t >= host_start + 50'000'000 && t < host_start + 150'000'000) {
          inner[h].insert(b.collective[i]);
        }
      }
    }
  }
  EXPECT_GT(inner[0].size(), 5u);
  // The hosts share their collectives: each one inside a host's window is in the other's.
  for (int h = 0; h < 2; ++h) {
    for (uint64_t id : inner[h]) EXPECT_EQ(collectives[1 - h].count(id), 1u) << "host " << h;
  }
}

// A multi-slice pod (#56): an emulated host's capture is the XSpace podprof-simhost writes for
// the same host (the shared step schedule carries the other slices' DCN arrivals), and its
// agent reports the host's slice and worker.
TEST(CaptureSourceTest, MultiSliceCaptureIsTheSimulatedHostsAndNamesItsSlice) {
  sim::PodConfig pod = Pod();
  pod.hosts = 8;
  pod.slices = 4;
  pod.dcn_delays.push_back({2, 300'000, INT64_MIN});
  auto source = CaptureSource::Create(pod, /*counters=*/false);
  ASSERT_OK(source);
  FakeClock truth(1'800'000'000'000'000'000);
  std::vector<std::unique_ptr<EmulatedHost>> hosts = MakeHosts(5, 1, 3, 0, 0, truth);
  const EmulatedHost& host = *hosts[0];
  auto capture = (*source)->Generate(host, host.clock.ToHost(truth.NowNs()), 50, 1 << 20,
                                     /*summarise=*/false, /*keep_xspace=*/true);
  ASSERT_OK(capture);
  sim::PodConfig own = pod;
  own.host_index = 5;
  auto model = sim::PodModel::Create(own);
  ASSERT_OK(model);
  sim::SessionWindow window;
  window.true_start_ns = truth.NowNs();
  window.true_end_ns = window.true_start_ns + 50'000'000;
  window.host_name = host.name;
  const std::string alone = sim::BuildXSpace(*model, host.clock, window).space.SerializeAsString();
  // Equal as messages: a map's entries may serialize in another order after a parse.
  tensorflow::profiler::XSpace streamed, built;
  ASSERT_TRUE(streamed.ParseFromString(capture->xspace));
  ASSERT_TRUE(built.ParseFromString(alone));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(streamed, built))
      << "the shared schedule gives host 5 another capture";
  EXPECT_NE(alone.find("recv-done.102"), std::string::npos);

  const podprof::v1::HostInfo info = DescribeHost(host, "127.0.0.1", (*source)->model());
  EXPECT_EQ(info.slice(), 2);
  EXPECT_EQ(info.slice_worker(), 1);
  EXPECT_FALSE(DescribeHost(host, "127.0.0.1", sim::PodModel::Create(Pod()).value()).has_slice());
}

TEST(CaptureSourceTest, RefusesBadDurations) {
  auto source = CaptureSource::Create(Pod(), false);
  ASSERT_OK(source);
  RealClock truth;
  auto hosts = MakeHosts(0, 1, 3, 0, 0, truth);
  EXPECT_EQ((*source)->Generate(*hosts[0], truth.NowNs(), 0, 64 << 10).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace podprof::loadgen
