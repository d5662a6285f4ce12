// A multi-slice job end to end (#56): real podprof-simhost and podprof-agent processes, one
// host per slice of a 4-slice ring, one podprof-aggregator; captures over gRPC, then GetDcn
// (and once `podprof dcn`) says who made the cross-slice receivers wait.
//
// One pod, three phases of the job's true time, timed from one fault epoch given to every
// simulated host: healthy, then slice 2 computing 1.3x slower, then slice 1's outgoing DCN link
// 300 us slow. Each capture's window is placed inside its phase by its start instant, so the
// test waits for nothing but the processes.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "harness/capture_watch.h"
#include "harness/wait.h"
#include "launch/pod_launcher.h"
#include "nlohmann/json.hpp"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;

constexpr int64_t kMs = 1'000'000;
constexpr int kSlices = 4;
// The window: at least 12 of the simulated steps (their period, a few ms, is the pod's; the
// test reads it from the ground truth) of two rendezvous each: the analysis names a 300 us
// link delay within 10 steps and a 1.3x slice within 8 on this ring (docs/INSIGHT.md).
constexpr int kWindowMs = 150;
// From the fault epoch: the healthy phase, then the slow slice until kSlowEndNs, then the slow
// link. The healthy window must be over before kSlowFromNs: the pod's start (4 hosts) and the
// capture's lead take about 1 s here.
constexpr int64_t kSlowFromNs = 3'500 * kMs;
constexpr int64_t kSlowEndNs = kSlowFromNs + 1'500 * kMs;
constexpr int64_t kDelayFromNs = kSlowEndNs;
// A capture starts this long after its phase began and ends this long before it ends.
constexpr int64_t kMarginNs = 100 * kMs;
constexpr int kSlowSlice = 2;
constexpr int kDelayedSlice = 1;  // its link is kDelayedSlice -> kDelayedSlice + 1 (the ring)

class DcnPodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / absl::StrCat("dcn_pod_", getpid());
    fs::remove_all(dir_);
    epoch_ns_ = absl::GetCurrentTimeNanos();
    launch::PodOptions o;
    o.bin_dir = PODPROF_BIN_DIR;
    o.dir = dir_.string();
    o.hosts = kSlices;
    o.chips = 1;  // one chip a host: a chip sends to the same chip of the next slice
    o.generation = "v5e";
    o.seed = 5;
    o.counters = false;
    o.aggregator_config = "[agents]\nheartbeat_interval = \"500ms\"\nprobe_interval = \"1s\"\n";
    // Slice 2 is back to speed at kSlowEndNs: the second factor undoes the first (they
    // multiply), so the slow link's phase has the one fault.
    const std::string from = absl::StrCat(kSlowFromNs / kMs, "ms");
    const std::string to = absl::StrCat(kSlowEndNs / kMs, "ms");
    o.simhost_flags = {absl::StrCat("--slices=", kSlices),
                       absl::StrCat("--fault-epoch-ns=", epoch_ns_),
                       absl::StrCat("--slow-slice-at=", from, ":", kSlowSlice, ":1.3"),
                       absl::StrCat("--slow-slice-at=", to, ":", kSlowSlice, ":", 1 / 1.3),
                       absl::StrCat("--dcn-delay-at=", to, ":", kDelayedSlice, ":300")};
    // Host clocks milliseconds wrong: the analysis runs on the aligned clock. No device clock
    // errors: a slice of one host has no collective to find its device error by, and it would
    // read as transit (docs/MEGASCALE.md, "Clocks across slices").
    for (int64_t offset_ms : {3, -2, 1, -4}) {
      launch::HostOptions h;
      h.clock_offset_ns = offset_ms * kMs;
      o.host.push_back(h);
    }
    o.log_files = false;  // the daemons' output in the test's
    pod_ = std::make_unique<launch::Pod>(o);
    ASSERT_OK(pod_->Start());
    stub_ = v1::Aggregator::NewStub(
        grpc::CreateChannel(pod_->aggregator_address(), grpc::InsecureChannelCredentials()));
    ASSERT_TRUE(testing::WaitFor([&] { return testing::ProbedAgents(*stub_) == kSlices; },
                                 absl::Seconds(20)))
        << "the agents did not all register and get probed";
  }
  void TearDown() override {
    stub_.reset();
    pod_.reset();
    fs::remove_all(dir_);
  }

  // A capture of kWindowMs starting no sooner than `not_before_ns` (the aggregator's clock is
  // this machine's), watched to its end; its id, or "" after a failure the test reports.
  std::string Capture(int64_t not_before_ns) {
    v1::StartCaptureRequest req;
    req.set_duration_ms(kWindowMs);
    const int64_t wait_ns = not_before_ns - absl::GetCurrentTimeNanos();
    req.set_delay_ms(static_cast<uint32_t>(std::max<int64_t>(0, wait_ns / kMs + 1)));
    absl::StatusOr<testing::WatchedCapture> c =
        testing::StartAndWatchCapture(*stub_, req, absl::Seconds(60));
    EXPECT_OK(c.status());
    if (!c.ok()) return "";
    EXPECT_EQ(c->last.summary().status(), v1::CAPTURE_STATUS_COMPLETE) << c->last.DebugString();
    window_start_ns_ = c->started.start_ns();
    return c->started.capture_id();
  }
  v1::GetDcnResponse Dcn(const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetDcnRequest req;
    req.set_capture_id(id);
    v1::GetDcnResponse r;
    EXPECT_OK(stub_->GetDcn(&ctx, req, &r)) << id;
    return r;
  }
  // "src->dst" of each named link, "slice s" of each named producer.
  static std::vector<std::string> Named(const v1::GetDcnResponse& r) {
    std::vector<std::string> named;
    for (const v1::DcnCulprit& l : r.links()) {
      if (l.named()) named.push_back(absl::StrCat(l.src_slice(), "->", l.dst_slice()));
    }
    for (const v1::DcnCulprit& p : r.producers()) {
      if (p.named()) named.push_back(absl::StrCat("slice ", p.src_slice()));
    }
    return named;
  }

  fs::path dir_;
  int64_t epoch_ns_ = 0;
  int64_t window_start_ns_ = 0;
  std::unique_ptr<launch::Pod> pod_;
  std::unique_ptr<v1::Aggregator::Stub> stub_;
};

TEST_F(DcnPodTest, NamesTheSlowLinkAsTheNetworkAndTheSlowSliceAsTheLateProducer) {
  // Healthy: every receive paired with its send, nothing named. (Before the agent sent its
  // chips' pod-wide ids with its first capture, no receive was paired at all.)
  const std::string healthy = Capture(0);
  ASSERT_FALSE(healthy.empty());
  ASSERT_LT(window_start_ns_ + kWindowMs * kMs, epoch_ns_ + kSlowFromNs)
      << "the pod took too long to start: the healthy window ran into the slow slice";
  const v1::GetDcnResponse h = Dcn(healthy);
  EXPECT_EQ(h.slices(), kSlices);
  const nlohmann::json truth =
      nlohmann::json::parse(testing::ReadTestFile(launch::TruthFile(pod_->options(), 0)));
  const int64_t steps = kWindowMs * kMs / truth["step_period_ns"].get<int64_t>();
  ASSERT_GE(steps, 12) << truth.dump();
  // Four one-chip hosts, two rendezvous a step: a receive each, but for the window's edges.
  EXPECT_GE(h.transfers(), static_cast<uint64_t>(kSlices * 2 * (steps - 1))) << h.verdict();
  EXPECT_LE(h.unpaired(), 8u) << h.verdict();  // only those the window's edges cut
  EXPECT_TRUE(Named(h).empty()) << h.verdict();
  EXPECT_TRUE(absl::StartsWith(h.verdict(), "no DCN culprit")) << h.verdict();
  // Every host wrote the runtime's action graph: the network's parts come from its own
  // latencies (34-46 us of network in the simulator) against its 60 us budget.
  EXPECT_TRUE(h.runtime_network());
  EXPECT_TRUE(h.runtime_budget());
  EXPECT_EQ(h.expected_runtime_latency_ns(), 60'000);
  for (const v1::DcnTransfer& t : h.worst()) {
    EXPECT_GE(t.runtime_latency_ns(), 33'000) << t.dst_host() << " " << t.step();
    EXPECT_LE(t.runtime_latency_ns(), 47'000) << t.dst_host() << " " << t.step();
    EXPECT_EQ(t.transmission_budget_ns(), 60'000);
    EXPECT_EQ(t.network_ns(), 0);
  }

  // Slice 2 computes 1.3x slower: it is the late producer.
  const std::string slow = Capture(epoch_ns_ + kSlowFromNs + kMarginNs);
  ASSERT_FALSE(slow.empty());
  ASSERT_LE(window_start_ns_ + kWindowMs * kMs, epoch_ns_ + kSlowEndNs - kMarginNs)
      << "the capture started too late for the slow slice's phase";
  const v1::GetDcnResponse s = Dcn(slow);
  std::vector<std::string> producers;
  for (const v1::DcnCulprit& p : s.producers()) {
    if (p.named()) producers.push_back(absl::StrCat("slice ", p.src_slice()));
  }
  EXPECT_EQ(producers, std::vector<std::string>{absl::StrCat("slice ", kSlowSlice)}) << s.verdict();
  EXPECT_TRUE(
      absl::StrContains(s.verdict(), absl::StrCat("slice ", kSlowSlice, " is the late producer")))
      << s.verdict();

  // Slice 1's data arrives 300 us late at slice 2: the network on that link, no producer.
  const std::string delayed = Capture(epoch_ns_ + kDelayFromNs + kMarginNs);
  ASSERT_FALSE(delayed.empty());
  const v1::GetDcnResponse d = Dcn(delayed);
  const std::string link = absl::StrCat(kDelayedSlice, "->", (kDelayedSlice + 1) % kSlices);
  EXPECT_EQ(Named(d), std::vector<std::string>{link}) << d.verdict();
  EXPECT_TRUE(d.runtime_network());
  for (const v1::DcnCulprit& l : d.links()) {
    if (!l.named()) continue;
    // The excess is the runtime's latency beyond its 60 us budget: the injected delay and the
    // network's own 34-46 us.
    EXPECT_NEAR(l.excess_ns(), 300'000 + 40'000 - 60'000, 10'000) << d.verdict();
  }
  EXPECT_TRUE(absl::StrContains(d.verdict(), "the runtime's network latency")) << d.verdict();

  // The CLI's table says the same, through the same call.
  const testing::PodprofResult cli = testing::RunPodprof(
      absl::StrCat("dcn ", delayed, " --aggregator ", pod_->aggregator_address()));
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_TRUE(absl::StartsWith(
      cli.out, absl::StrCat("capture ", delayed, ": the link slice ", kDelayedSlice, " -> slice ",
                            (kDelayedSlice + 1) % kSlices, " is slow")))
      << cli.out;
  EXPECT_TRUE(absl::StrContains(cli.out, absl::StrCat("\n", link, " "))) << cli.out;
}

}  // namespace
}  // namespace podprof
