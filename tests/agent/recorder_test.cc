// The flight recorder's ring (agent/recorder.h) against a real podprof-simhost process, whose
// profiler service answers continuous mode as JAX's server does
// (tests/peers/test_continuous_profiling.py holds the two to the same answers).
#include "agent/recorder.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/capture_runner.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "launch/pod_launcher.h"
#include "proto/profiler_service.grpc.pb.h"
#include "sim/services.h"
#include "sim/sim_host.h"
#include "tests/util/child_process.h"
#include "tests/util/status_matchers.h"

namespace podprof::agent {
namespace {

namespace fs = std::filesystem;
using podprof::testing::ChildProcess;

class RecorderTest : public ::testing::Test {
 public:
  static tensorflow::ProfileRequest Request() {
    tensorflow::ProfileRequest r;
    r.mutable_opts()->set_host_tracer_level(2);
    r.mutable_opts()->set_device_tracer_level(1);
    r.set_emit_xspace(true);
    return r;
  }

 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / absl::StrCat("recorder_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    pod_.bin_dir = PODPROF_BIN_DIR;
    pod_.dir = dir_.string();
    pod_.generation = "v5e";
    pod_.chips = 2;
    pod_.aggregator = false;
    pod_.host.resize(1);
    pod_.host[0].name = "host-a";
    const int64_t epoch = RealClock().NowNs();
    sim_ = std::make_unique<ChildProcess>(launch::SimhostArgs(pod_, 0, epoch),
                                          launch::SimhostReadyFile(pod_, 0));
    ASSERT_TRUE(sim_->ready()) << "podprof-simhost did not start";
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", sim_->info()["profiler_port"].get<int>()),
                            grpc::InsecureChannelCredentials());
    stub_ = tensorflow::ProfilerService::NewStub(channel_);
  }
  void TearDown() override {
    sim_.reset();
    fs::remove_all(dir_);
  }

  RealClock clock_;
  fs::path dir_;
  launch::PodOptions pod_;
  std::unique_ptr<ChildProcess> sim_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tensorflow::ProfilerService::Stub> stub_;
};

// The ring on the house's clock: a simulated host in process (its profiler service on
// loopback, its true time the test's FakeClock), whose snapshots take as long as the test says
// (the clock moves on while one is served). A freeze whose own snapshot is slow (600 ms here,
// hundreds of ms on a loaded host) still holds the window's start: the ring let go of the
// window's first segment, measured from after the snapshot, just before freezing it.
class SlowSnapshots final : public tensorflow::ProfilerService::Service {
 public:
  SlowSnapshots(sim::SimHost* host, FakeClock& clock) : impl_(host), clock_(clock) {}
  grpc::Status StartContinuousProfiling(grpc::ServerContext* c, const tensorflow::ProfileRequest* r,
                                        tensorflow::ContinuousProfilingResponse* out) override {
    return impl_.StartContinuousProfiling(c, r, out);
  }
  grpc::Status GetSnapshot(grpc::ServerContext* c, const tensorflow::GetSnapshotRequest* r,
                           tensorflow::ProfileResponse* out) override {
    grpc::Status s = impl_.GetSnapshot(c, r, out);
    clock_.AdvanceNs(delay_ns.load());  // the snapshot's time, after what it covers
    return s;
  }
  grpc::Status StopContinuousProfiling(grpc::ServerContext* c,
                                       const tensorflow::StopContinuousProfilingRequest* r,
                                       tensorflow::StopContinuousProfilingResponse* out) override {
    return impl_.StopContinuousProfiling(c, r, out);
  }
  std::atomic<int64_t> delay_ns{0};

 private:
  sim::ProfilerServiceImpl impl_;
  FakeClock& clock_;
};

// A simulated host in process whose true time is the test's FakeClock, serving its profiler
// (through SlowSnapshots) on loopback.
class RecorderClockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::SimHostOptions o;
    o.pod.generation = "v5e";
    o.pod.chips = 2;
    o.host_name = "host-a";
    absl::StatusOr<std::unique_ptr<sim::SimHost>> host = sim::SimHost::Create(o, clock_);
    ASSERT_OK(host.status());
    host_ = *std::move(host);
    service_ = std::make_unique<SlowSnapshots>(host_.get(), clock_);
    int port = 0;
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    stub_ = tensorflow::ProfilerService::NewStub(channel_);
  }
  // Call after the recorder is disarmed: no call is left to wait for.
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  FakeClock clock_{1'800'000'000'000'000'000};
  std::unique_ptr<sim::SimHost> host_;
  std::unique_ptr<SlowSnapshots> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tensorflow::ProfilerService::Stub> stub_;
};

TEST_F(RecorderClockTest, ASlowFreezeStillHoldsTheWindowsStart) {
  RecorderOptions ro;
  ro.window_ns = 2'000'000'000;
  ro.rotate_ns = 500'000'000;
  tensorflow::ProfileRequest req;
  req.set_emit_xspace(true);
  Recorder r(stub_.get(), clock_, ro, req);
  ASSERT_OK(r.Arm());
  // Rotations every half second, each snapshot taking 100 ms: segments of 600 ms.
  service_->delay_ns = 100'000'000;
  for (int i = 0; i < 8; ++i) {
    clock_.AdvanceNs(500'000'000);
    ASSERT_OK(r.Rotate());
  }
  // The segments that reach into the last 2 s, the one holding its start first: four.
  EXPECT_EQ(r.segments(), 4u);
  // The freeze's own snapshot takes 600 ms: the window is the 2 s before `at`, not before
  // the snapshot's end.
  clock_.AdvanceNs(230'000'000);
  service_->delay_ns = 600'000'000;
  const int64_t at = clock_.NowNs();
  absl::StatusOr<std::vector<RecorderSegment>> frozen = r.Freeze(at);
  ASSERT_OK(frozen.status());
  ASSERT_FALSE(frozen->empty());
  EXPECT_LE(frozen->front().start_ns, at - ro.window_ns) << "the window's start is held";
  EXPECT_GE(frozen->back().stop_ns, at) << "up to the freeze";
  int64_t covered = 0;
  for (size_t i = 0; i < frozen->size(); ++i) {
    const RecorderSegment& s = (*frozen)[i];
    covered += std::min(s.stop_ns, at) - std::max(s.start_ns, at - ro.window_ns);
    if (i > 0) {
      EXPECT_GE(s.start_ns, (*frozen)[i - 1].stop_ns) << "segments do not overlap";
    }
  }
  EXPECT_EQ(covered, ro.window_ns) << "every ns of the window is in a segment";
  ASSERT_OK(r.Disarm());
}

// The ring as the agent's driver turns it (Rotate called every 50 ms, a snapshot only when one
// is due), on the house's clock: it holds the segments reaching into the last 2 s, from the
// one holding its start, each with the workload's events, and a freeze covers the window. It
// ran on the real clock and failed under load (2 segments where it wanted 3). Snapshots come
// as the agent takes them: as bytes on the channel, never parsed.
TEST_F(RecorderClockTest, TheRingHoldsTheLastWindowAndAFreezeCoversIt) {
  RecorderOptions o;
  o.window_ns = 2'000'000'000;
  o.rotate_ns = 500'000'000;
  Recorder r(stub_.get(), clock_, o, RecorderTest::Request(), channel_);
  ASSERT_OK(r.Arm());
  EXPECT_EQ(r.state(), RecorderState::kArmed);
  service_->delay_ns = 20'000'000;  // each snapshot takes 20 ms
  for (int i = 0; i < 70; ++i) {    // 3.5 s
    clock_.AdvanceNs(50'000'000);
    ASSERT_OK(r.Rotate());
  }
  // A rotation every 0.52 s (0.5 s due, plus the snapshot's 20 ms): seven in 3.64 s. The ring
  // keeps those reaching into the last 2 s from the one holding its start (1.64 s in): the
  // segments from 1.56 s on, four.
  EXPECT_EQ(r.segments(), 4u);

  const int64_t at = clock_.NowNs();
  absl::StatusOr<std::vector<RecorderSegment>> frozen = r.Freeze(at);
  ASSERT_OK(frozen.status());
  ASSERT_FALSE(frozen->empty());
  EXPECT_LE(frozen->front().start_ns, at - o.window_ns) << "the window's start is held";
  EXPECT_GE(frozen->back().stop_ns, at) << "up to the freeze";
  for (size_t i = 0; i < frozen->size(); ++i) {
    const RecorderSegment& s = (*frozen)[i];
    if (i > 0) {
      EXPECT_EQ(s.start_ns, (*frozen)[i - 1].stop_ns) << "the server restarts its session at once";
    }
    tensorflow::profiler::XSpace space;
    ASSERT_TRUE(space.ParseFromString(*s.xspace));
    int64_t events = 0;
    for (const auto& plane : space.planes()) {
      for (const auto& line : plane.lines()) events += line.events_size();
    }
    EXPECT_GT(events, 0) << "segment " << i;
  }
  ASSERT_OK(r.Disarm());
  EXPECT_EQ(r.state(), RecorderState::kOff);
  EXPECT_EQ(r.segments(), 0u);
}

// A snapshot's window is joined and read in memory, as bytes: it once went through a file in
// [capture] temp_dir, and a host whose temp_dir could not be written lost its snapshots.
TEST_F(RecorderClockTest, ASnapshotIsReadFromMemoryWithNoTemporaryFile) {
  RecorderOptions o;
  o.window_ns = 2'000'000'000;
  o.rotate_ns = 500'000'000;
  Workload workload;
  workload.profiler_address = "the simulated host";
  workload.recorder =
      std::make_unique<Recorder>(stub_.get(), clock_, o, RecorderTest::Request(), channel_);
  ASSERT_OK(workload.recorder->Arm());
  for (int i = 0; i < 30; ++i) {  // 1.5 s
    clock_.AdvanceNs(50'000'000);
    ASSERT_OK(workload.recorder->Rotate());
  }
  podprof::v1::CaptureRequest request;
  request.set_capture_id("snap");
  request.set_snapshot(true);
  request.set_duration_ms(1000);
  podprof::v1::HostInfo host;
  host.set_host_name("host-a");
  RunnerLimits limits;
  limits.temp_dir = "/nonexistent/podprof-no-temp-dir";
  struct Chunks final : stream::ChunkSink {
    bool Write(const podprof::v1::CaptureChunk& chunk) override {
      if (chunk.has_trailer()) trailer = chunk.trailer();
      return true;
    }
    podprof::v1::CaptureTrailer trailer;
  } sink;
  CaptureOutcome outcome;
  CaptureRunner runner(clock_, workload);
  ASSERT_OK(runner.Run(request, host, limits, nullptr, &sink, &outcome));
  EXPECT_GT(sink.trailer.event_count(), 0u);
  EXPECT_GT(sink.trailer.xspace_bytes(), 0u);
  EXPECT_EQ(outcome.chips.size(), 2u);
  ASSERT_OK(workload.recorder->Disarm());
}

// A snapshot larger than max_bytes by itself is let go, and the ring stays armed: it once kept
// the newest whatever its size (14 MB snapshots against max_bytes of 1 MiB took the agent to
// 379 MiB). A freeze with nothing held fails naming the bound and what to change.
TEST_F(RecorderTest, ASnapshotPastTheBudgetIsLetGoAndTheRingStaysArmed) {
  RecorderOptions o;
  o.max_bytes = 1;
  Recorder r(stub_.get(), clock_, o, Request());
  ASSERT_OK(r.Arm());
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(r.Rotate(/*force=*/true),
                testing::StatusIs(absl::StatusCode::kResourceExhausted,
                                  ::testing::HasSubstr("passed max_bytes")));
  }
  EXPECT_EQ(r.state(), RecorderState::kArmed);
  EXPECT_EQ(r.segments(), 0u);
  EXPECT_EQ(r.bytes(), 0u);
  EXPECT_THAT(r.reason(), ::testing::HasSubstr("3 let go since armed"));
  EXPECT_THAT(r.Freeze(clock_.NowNs()).status(),
              testing::StatusIs(absl::StatusCode::kResourceExhausted,
                                ::testing::HasSubstr("raise [recorder] max_bytes")));
  ASSERT_OK(r.Disarm());
}

TEST_F(RecorderTest, AWorkloadHeldByAnotherRecorderIsBusyAndFreeAgainOnceDisarmed) {
  Recorder first(stub_.get(), clock_, {}, Request());
  Recorder second(stub_.get(), clock_, {}, Request());
  ASSERT_OK(first.Arm());
  EXPECT_EQ(second.Arm().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.state(), RecorderState::kBusy);
  EXPECT_NE(second.reason().find("another client"), std::string::npos) << second.reason();
  EXPECT_EQ(second.Rotate(true).code(), absl::StatusCode::kFailedPrecondition);
  // While armed the workload's one session is taken: a capture's Profile call is refused.
  grpc::ClientContext ctx;
  tensorflow::ProfileRequest p = Request();
  p.mutable_opts()->set_duration_ms(100);
  p.set_repository_root((dir_ / "profiles").string());
  p.set_session_id("capture");
  p.set_host_name("host-a");
  tensorflow::ProfileResponse resp;
  EXPECT_EQ(stub_->Profile(&ctx, p, &resp).error_code(), grpc::StatusCode::INTERNAL);
  ASSERT_OK(first.Disarm());
  ASSERT_OK(second.Arm());
  ASSERT_OK(second.Disarm());
}

// A profiler server built before continuous mode: every continuous RPC is UNIMPLEMENTED.
class OldProfiler final : public tensorflow::ProfilerService::Service {};

TEST_F(RecorderTest, AServerWithoutContinuousModeLeavesTheRecorderUnsupported) {
  OldProfiler old;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&old);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = tensorflow::ProfilerService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  Recorder r(stub.get(), clock_, {}, Request());
  EXPECT_EQ(r.Arm().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.state(), RecorderState::kUnsupported);
  EXPECT_NE(r.reason().find("no continuous mode"), std::string::npos) << r.reason();
  EXPECT_EQ(r.Freeze(clock_.NowNs()).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_OK(r.Disarm());
  server->Shutdown();
}

}  // namespace
}  // namespace podprof::agent
