// A pod of 16 hosts emulated by one podprof-loadgen against a real podprof-aggregator: every
// host delivers, the aggregator recovers each host's clock error from its probes and the
// collectives, and matches collectives on every host.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "tests/util/child_process.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;
using podprof::testing::ChildProcess;
using podprof::testing::ReadTestFile;

std::string Bin(const std::string& n) { return std::string(PODPROF_BIN_DIR) + "/" + n; }

constexpr int kHosts = 16;

class LoadgenPodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / absl::StrCat("loadgen_pod_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(P("agg.toml")) << "[agents]\nheartbeat_interval = \"500ms\"\n"
                                    "probe_interval = \"1s\"\n";
    aggregator_ = testing::StartAggregator(Bin("podprof-aggregator"), dir_);
    ASSERT_TRUE(aggregator_->ready());
    const int port = aggregator_->info()["port"];
    loadgen_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{
            Bin("podprof-loadgen"), "--insecure", absl::StrCat("--aggregator=127.0.0.1:", port),
            absl::StrCat("--agents=", kHosts), "--chips=2", "--pod-seed=5",
            "--max-clock-offset=40ms", "--max-drift-ppm=20", "--exit-after=5m",
            "--truth-file=" + P("truth.json"), "--ready-file=" + P("loadgen.json")},
        P("loadgen.json"));
    ASSERT_TRUE(loadgen_->ready());
    stub_ = v1::Aggregator::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    stub_.reset();
    loadgen_.reset();
    aggregator_.reset();
    fs::remove_all(dir_);
  }
  std::string P(const std::string& f) const { return (dir_ / f).string(); }

  // Until every host is online with its clock probed (up to 20 s).
  bool WaitForProbedAgents() {
    for (int i = 0; i < 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::ListAgentsResponse resp;
      if (!stub_->ListAgents(&ctx, v1::ListAgentsRequest(), &resp).ok()) continue;
      int probed = 0;
      for (const auto& a : resp.agents()) {
        probed += a.state() == v1::AGENT_STATE_ONLINE && a.clock().probe_count() > 0;
      }
      if (probed == kHosts) return true;
    }
    return false;
  }

  // Starts a capture of every host and watches it to the end; the last progress message.
  v1::CaptureProgress CaptureAll(int duration_ms, std::string* id) {
    grpc::ClientContext sctx;
    sctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::StartCaptureRequest req;
    req.set_duration_ms(duration_ms);
    v1::StartCaptureResponse started;
    grpc::Status s = stub_->StartCapture(&sctx, req, &started);
    EXPECT_OK(s);
    EXPECT_EQ(started.host_names_size(), kHosts);
    *id = started.capture_id();
    grpc::ClientContext wctx;
    wctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::WatchCaptureRequest w;
    w.set_capture_id(started.capture_id());
    auto reader = stub_->WatchCapture(&wctx, w);
    v1::CaptureProgress p, last;
    while (reader->Read(&p)) last = p;
    EXPECT_OK(reader->Finish());
    EXPECT_TRUE(last.done());
    return last;
  }

  fs::path dir_;
  std::unique_ptr<ChildProcess> aggregator_, loadgen_;
  std::unique_ptr<v1::Aggregator::Stub> stub_;
};

TEST_F(LoadgenPodTest, SixteenHostsDeliverAndTheirClocksAreRecovered) {
  ASSERT_TRUE(WaitForProbedAgents()) << "the emulated agents did not all register";
  std::string id;
  v1::CaptureProgress last = CaptureAll(500, &id);
  ASSERT_TRUE(last.done());
  EXPECT_EQ(last.status(), v1::CAPTURE_STATUS_COMPLETE) << last.summary().error_message();
  ASSERT_EQ(last.summary().hosts_size(), kHosts);
  uint64_t events = 0;
  int matched = 0;
  for (const auto& h : last.summary().hosts()) {
    events += h.event_count();
    matched += h.collectives_matched() > 0;
  }
  EXPECT_GT(events, 0u);
  EXPECT_EQ(last.summary().event_count(), events) << "the summary's total is the hosts' sum";
  // Every host, the reference included, is pinned by the collectives it shares with others.
  EXPECT_EQ(matched, kHosts);

  // The host clock reads true time + offset + drift * (true time - epoch); the aggregator's
  // correction is the host's error at the middle of the window (its clock is true time).
  const auto truth = nlohmann::json::parse(ReadTestFile(P("truth.json")));
  std::map<std::string, nlohmann::json> truth_of;
  for (const auto& h : truth["hosts"]) truth_of[h["host_name"]] = h;
  const int64_t mid = last.summary().start_ns() + 250'000'000;
  for (const auto& h : last.summary().hosts()) {
    SCOPED_TRACE(h.host_name());
    EXPECT_EQ(h.status(), v1::CAPTURE_STATUS_COMPLETE) << h.error_message();
    EXPECT_GT(h.event_count(), 0u);
    ASSERT_TRUE(truth_of.count(h.host_name()));
    const auto& t = truth_of[h.host_name()];
    const int64_t epoch = t["clock_epoch_ns"];
    const double drift_ppm = t["clock_drift_ppm"];
    const int64_t error = t["clock_offset_ns"].get<int64_t>() +
                          std::llround(drift_ppm * 1e-6 * static_cast<double>(mid - epoch));
    EXPECT_LT(std::llabs(h.clock_offset_ns() - error), 300'000)
        << "correction " << h.clock_offset_ns() << " truth " << error;
  }
}

// Queries on a stored capture are answered while the pod's next capture streams in and is
// analysed and written: readers never queue behind the ingest or the writer.
TEST_F(LoadgenPodTest, QueriesAreAnsweredWhileAPodIngests) {
  ASSERT_TRUE(WaitForProbedAgents()) << "the emulated agents did not all register";
  std::string first;
  ASSERT_EQ(CaptureAll(300, &first).status(), v1::CAPTURE_STATUS_COMPLETE);
  std::atomic<bool> ingesting{true};
  std::atomic<int> answered{0}, failed{0};
  std::string failure;
  std::thread querier([&] {
    while (ingesting) {
      // Every query must be answered well inside what a person waits for at a prompt.
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::GetKernelStatsRequest req;
      req.set_capture_id(first);
      v1::GetKernelStatsResponse resp;
      grpc::Status s = stub_->GetKernelStats(&ctx, req, &resp);
      if (s.ok() && resp.stats_size() > 0) {
        ++answered;
      } else if (failed++ == 0) {
        failure = s.ok() ? "no statistics" : s.error_message();
      }
    }
  });
  std::string second;
  v1::CaptureProgress last = CaptureAll(1000, &second);
  ingesting = false;
  querier.join();
  EXPECT_EQ(last.status(), v1::CAPTURE_STATUS_COMPLETE) << last.summary().error_message();
  EXPECT_EQ(failed, 0) << failure;
  EXPECT_GT(answered, 10);
}

}  // namespace
}  // namespace podprof
