// podprof-aggregator as a real process with a real SQLite file, driven over gRPC.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "storage/health.h"
#include "storage/sqlite.h"
#include "storage/store.h"
#include "tests/util/child_process.h"
#include "tests/util/notify_socket.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof::aggregator {
namespace {

namespace fs = std::filesystem;
using podprof::testing::ChildProcess;
using podprof::testing::FixturePath;
namespace v1 = podprof::v1;

// podprof-aggregator on a loopback port with the database `db`, announcing itself in
// `ready_file`: how the storage-fault tests start one.
std::vector<std::string> AggregatorArgv(const std::string& db, const fs::path& ready_file) {
  return {std::string(PODPROF_BIN_DIR) + "/podprof-aggregator", "--insecure",
          "--listen=127.0.0.1:0", "--db=" + db, "--ready-file=" + ready_file.string()};
}

class AggregatorProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("agg_", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                        "_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "none.toml") << "";  // an explicit, empty config: all defaults
    Start();
  }
  void TearDown() override {
    stub_.reset();
    process_.reset();
    fs::remove_all(dir_);
  }
  void Start() {
    stub_.reset();
    process_.reset();
    fs::remove(dir_ / "ready.json");
    process_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{std::string(PODPROF_BIN_DIR) + "/podprof-aggregator", "--insecure",
                                 "--config=" + (dir_ / "none.toml").string(),
                                 "--listen=127.0.0.1:0", "--db=" + (dir_ / "podprof.db").string(),
                                 "--ready-file=" + (dir_ / "ready.json").string()},
        (dir_ / "ready.json").string());
    ASSERT_TRUE(process_->ready());
    stub_ = v1::Aggregator::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", process_->info()["port"].get<int>()),
                            grpc::InsecureChannelCredentials()));
  }
  // Uploads files as one import: (host, bytes) pairs.
  grpc::Status Import(const std::vector<std::pair<std::string, std::string>>& files,
                      v1::ImportXSpaceResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto writer = stub_->ImportXSpace(&ctx, resp);
    bool first = true;
    for (const auto& [host, bytes] : files) {
      for (size_t off = 0; off < bytes.size() || off == 0; off += 256 << 10) {
        v1::ImportXSpaceChunk chunk;
        chunk.set_host_name(host);
        chunk.set_data(bytes.substr(off, 256 << 10));
        if (first) (*chunk.mutable_labels())["job"] = "import-test";
        first = false;
        writer->Write(chunk);
        if (bytes.empty()) break;
      }
    }
    writer->WritesDone();
    return writer->Finish();
  }
  fs::path dir_;
  std::unique_ptr<ChildProcess> process_;
  std::unique_ptr<v1::Aggregator::Stub> stub_;
};

std::string Fixture(const char* name) { return podprof::testing::ReadTestFile(FixturePath(name)); }

TEST_F(AggregatorProcessTest, ImportStoresWhatTheReaderComputesAndReportsBadFiles) {
  v1::ImportXSpaceResponse resp;
  std::string bad = Fixture(podprof::testing::kTpuFixture).substr(0, 5000);
  grpc::Status s = Import({{"tpu-host", Fixture(podprof::testing::kTpuFixture)},
                           {"broken-host", bad},
                           {"gpu-host", Fixture(podprof::testing::kGpuFixture)}},
                          &resp);
  ASSERT_OK(s);
  ASSERT_EQ(resp.file_errors_size(), 1);
  EXPECT_TRUE(absl::StartsWith(resp.file_errors(0), "broken-host.xplane.pb: "))
      << resp.file_errors(0);
  EXPECT_TRUE(absl::StrContains(resp.file_errors(0), "byte offset")) << resp.file_errors(0);
  EXPECT_EQ(resp.summary().status(), v1::CAPTURE_STATUS_PARTIAL);
  EXPECT_GT(resp.summary().created_ns(), 1'600'000'000'000'000'000);
  EXPECT_EQ(resp.summary().hosts_size(), 2);
  EXPECT_EQ(resp.summary().labels().at("job"), "import-test");
  EXPECT_EQ(resp.top_kernels_size(), 10);

  for (const auto& [host, file] : std::vector<std::pair<std::string, const char*>>{
           {"tpu-host", podprof::testing::kTpuFixture},
           {"gpu-host", podprof::testing::kGpuFixture}}) {
    grpc::ClientContext ctx;
    v1::GetKernelStatsRequest req;
    req.set_capture_id(resp.capture_id());
    req.set_group_by(v1::KERNEL_GROUPING_CHIP);
    req.set_host_name(host);
    v1::GetKernelStatsResponse stats;
    ASSERT_OK(stub_->GetKernelStats(&ctx, req, &stats));
    auto cap = trace::ReadXSpaceFile(FixturePath(file));
    std::map<std::pair<int, std::string>, std::tuple<int64_t, int64_t, int64_t, int64_t>> want, got;
    for (const auto& k : trace::ComputeKernelStats(*cap)) {
      auto& t = want[{cap->host.chips[k.chip].ordinal, cap->kernels[k.kernel].name}];
      std::get<0>(t) += k.count;
      std::get<1>(t) += k.total_ps;
      std::get<2>(t) = k.min_ps;
      std::get<3>(t) = k.QuantilePs(0.5);
    }
    for (const auto& k : stats.stats()) {
      EXPECT_EQ(k.host_name(), host);
      auto& t = got[{k.chip_ordinal(), k.kernel().op_name()}];
      std::get<0>(t) += k.count();
      std::get<1>(t) += k.total_ps();
      std::get<2>(t) = k.min_ps();
      std::get<3>(t) = k.p50_ps();
    }
    // Per-chip rows are single kernels except where a name repeats; compare totals exactly.
    ASSERT_EQ(got.size(), want.size()) << host;
    for (const auto& [key, w] : want) {
      EXPECT_EQ(std::get<0>(got[key]), std::get<0>(w)) << key.second;
      EXPECT_EQ(std::get<1>(got[key]), std::get<1>(w)) << key.second;
    }
  }
}

TEST_F(AggregatorProcessTest, HistoryCompareAndListAcrossImports) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    v1::ImportXSpaceResponse resp;
    ASSERT_OK(Import({{"tpu-host", Fixture(podprof::testing::kTpuFixture)}}, &resp));
    ids.push_back(resp.capture_id());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // distinct ids
  }
  {
    grpc::ClientContext ctx;
    v1::ListCapturesRequest req;
    req.set_limit(2);
    v1::ListCapturesResponse resp;
    ASSERT_OK(stub_->ListCaptures(&ctx, req, &resp));
    EXPECT_EQ(resp.captures_size(), 2);
    EXPECT_FALSE(resp.next_page_token().empty());
  }
  {
    grpc::ClientContext ctx;
    v1::KernelHistoryRequest req;
    req.mutable_filter()->set_op_regex("^all-reduce$");
    v1::KernelHistoryResponse resp;
    ASSERT_OK(stub_->KernelHistory(&ctx, req, &resp));
    ASSERT_EQ(resp.series_size(), 1);
    EXPECT_EQ(resp.series(0).kernel().module(), "jit__psum");
    // The same file thrice: three points at the same instant, 12 runs each.
    ASSERT_EQ(resp.series(0).points_size(), 3);
    for (const auto& p : resp.series(0).points()) EXPECT_EQ(p.count(), 12u);
  }
  {
    grpc::ClientContext ctx;
    v1::CompareCapturesRequest req;
    req.set_baseline_capture_id(ids[0]);
    req.set_candidate_capture_id(ids[1]);
    v1::CompareCapturesResponse resp;
    ASSERT_OK(stub_->CompareCaptures(&ctx, req, &resp));
    EXPECT_EQ(resp.regression_count(), 0u);  // identical captures
    EXPECT_GT(resp.deltas_size(), 5);
  }
}

TEST_F(AggregatorProcessTest, BadRequestsGetClearStatusesAndTheServerStaysUp) {
  v1::GetKernelStatsResponse stats;
  {
    grpc::ClientContext ctx;
    v1::GetKernelStatsRequest req;
    req.set_capture_id("no-such-capture");
    grpc::Status s = stub_->GetKernelStats(&ctx, req, &stats);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "no-such-capture"));
  }
  {
    grpc::ClientContext ctx;
    v1::KernelHistoryRequest req;
    req.mutable_filter()->set_op_regex("([");
    v1::KernelHistoryResponse resp;
    EXPECT_EQ(stub_->KernelHistory(&ctx, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::ListCapturesRequest req;
    req.set_since_ns(100);
    req.set_until_ns(50);
    v1::ListCapturesResponse resp;
    EXPECT_EQ(stub_->ListCaptures(&ctx, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    v1::ImportXSpaceResponse resp;
    grpc::Status s = Import({{"junk", "not an xspace at all"}}, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "junk.xplane.pb")) << s.error_message();
  }
  v1::ImportXSpaceResponse ok;
  EXPECT_OK(Import({{"tpu-host", Fixture(podprof::testing::kTpuFixture)}}, &ok));
}

TEST_F(AggregatorProcessTest, DataSurvivesARestart) {
  v1::ImportXSpaceResponse resp;
  ASSERT_OK(Import({{"tpu-host", Fixture(podprof::testing::kTpuFixture)}}, &resp));
  Start();
  grpc::ClientContext ctx;
  v1::GetKernelStatsRequest req;
  req.set_capture_id(resp.capture_id());
  v1::GetKernelStatsResponse stats;
  ASSERT_OK(stub_->GetKernelStats(&ctx, req, &stats));
  EXPECT_GT(stats.stats_size(), 5);
}

// The CLI end to end: `podprof import` the real captures, then `podprof stats --format csv`
// must give exactly the rows `podprof inspect --format csv` gives for the same files.
TEST_F(AggregatorProcessTest, CliImportThenStatsEqualsInspect) {
  const std::string agg =
      absl::StrCat("--aggregator 127.0.0.1:", process_->info()["port"].get<int>());
  for (const char* fixture : {podprof::testing::kTpuFixture, podprof::testing::kGpuFixture}) {
    const std::string path = FixturePath(fixture);
    auto imported =
        podprof::testing::RunPodprof(absl::StrCat("import ", agg, " --format json '", path, "'"));
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    std::string id = nlohmann::json::parse(imported.out)["capture"];
    ASSERT_FALSE(id.empty()) << imported.out;

    auto stats = podprof::testing::RunPodprof(
        absl::StrCat("stats ", agg, " ", id, " --by chip --format csv --top 0"));
    ASSERT_EQ(stats.exit_code, 0) << stats.err;
    auto inspect = podprof::testing::RunPodprof(absl::StrCat("inspect --format csv '", path, "'"));
    ASSERT_EQ(inspect.exit_code, 0) << inspect.err;

    // One header and the same rows: the first column names the capture (the file, for
    // inspect) and hosts are named by file on import (as XProf names them), so compare from
    // the chip column on, verdicts and rates included.
    auto tail = [](const std::string& line) {
      size_t at = 0;
      for (int i = 0; i < 2; ++i) at = line.find(',', at) + 1;
      return line.substr(at);
    };
    std::vector<std::string> want, got;
    auto inspect_lines = podprof::testing::Lines(inspect.out);
    auto stats_lines = podprof::testing::Lines(stats.out);
    ASSERT_EQ(stats_lines[0], inspect_lines[0]);
    for (size_t i = 1; i < inspect_lines.size(); ++i) want.push_back(tail(inspect_lines[i]));
    for (size_t i = 1; i < stats_lines.size(); ++i) {
      EXPECT_TRUE(absl::StartsWith(stats_lines[i], id + ",")) << stats_lines[i];
      got.push_back(tail(stats_lines[i]));
    }
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << fixture;
  }
  auto listed = podprof::testing::RunPodprof(absl::StrCat("captures ", agg, " --format csv"));
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(podprof::testing::Lines(listed.out).size(), 3u);
  auto unknown = podprof::testing::RunPodprof(absl::StrCat("stats ", agg, " no-such-capture"));
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(unknown.err, "no-such-capture")) << unknown.err;
}

TEST_F(AggregatorProcessTest, AgentsRegisterAndTheirClockOffsetsAreRecovered) {
  const int port = process_->info()["port"].get<int>();
  const int64_t offsets[2] = {25'000'000, -40'000'000};
  std::vector<std::unique_ptr<ChildProcess>> agents;
  for (int i = 0; i < 2; ++i) {
    fs::create_directories(dir_ / ("nosys" + std::to_string(i)));
    std::ofstream(dir_ / "agent.toml") << "";
    std::string ready = (dir_ / ("agent" + std::to_string(i) + ".json")).string();
    agents.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{
            std::string(PODPROF_BIN_DIR) + "/podprof-agent", "--insecure",
            "--config=" + (dir_ / "agent.toml").string(), "--listen=127.0.0.1:0",
            "--advertise=127.0.0.1:0", "--profiler-service-listen=none",
            "--host-name=host-" + std::to_string(i),
            "--sysfs-root=" + (dir_ / ("nosys" + std::to_string(i))).string(),
            "--workload-profiler=127.0.0.1:1", "--workload-metrics=none",
            absl::StrCat("--aggregator=127.0.0.1:", port), "--label=pod=p1",
            absl::StrCat("--clock-offset=", offsets[i] / 1000, "us"), "--ready-file=" + ready},
        ready));
    ASSERT_TRUE(agents.back()->ready());
  }
  v1::ListAgentsResponse resp;
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    grpc::ClientContext ctx;
    v1::ListAgentsRequest req;
    (*req.mutable_label_selector())["pod"] = "p1";
    resp.Clear();
    ASSERT_OK(stub_->ListAgents(&ctx, req, &resp));
    if (resp.agents_size() == 2 && resp.agents(0).clock().probe_count() > 0 &&
        resp.agents(1).clock().probe_count() > 0) {
      break;
    }
  }
  ASSERT_EQ(resp.agents_size(), 2);
  for (int i = 0; i < 2; ++i) {
    const v1::AgentStatus& a = resp.agents(i);
    EXPECT_EQ(a.host().host_name(), "host-" + std::to_string(i));
    EXPECT_EQ(a.state(), v1::AGENT_STATE_ONLINE);
    ASSERT_GT(a.clock().probe_count(), 0u);
    // Loopback round trips are well under a millisecond: the offset is pinned tightly.
    EXPECT_NEAR(static_cast<double>(a.clock().offset_ns()), static_cast<double>(offsets[i]),
                500'000)
        << a.host().host_name();
    EXPECT_LE(std::llabs(a.clock().offset_ns() - offsets[i]), a.clock().uncertainty_ns() + 1000);
  }
  grpc::ClientContext ctx;
  v1::ListAgentsRequest other;
  (*other.mutable_label_selector())["pod"] = "p2";
  v1::ListAgentsResponse none;
  ASSERT_OK(stub_->ListAgents(&ctx, other, &none));
  EXPECT_EQ(none.agents_size(), 0);
}

int Count(const std::vector<std::string>& msgs, const std::string& what) {
  int n = 0;
  for (const std::string& m : msgs) n += absl::StrContains(m, what);
  return n;
}

// The service contract with systemd, over a real notify socket: READY once the port answers
// and the database is migrated; WATCHDOG at half of WATCHDOG_USEC while the store can take
// its write lock, none while another process holds it; RELOADING then READY on SIGHUP;
// STOPPING last on SIGTERM, and exit 0.
TEST(AggregatorLifecycleTest, SdNotifyReadyWatchdogFollowsTheStoreReloadStopping) {
  fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("agg_notify_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "none.toml") << "";
  testing::NotifySocket sock((dir / "notify.sock").string());
  const std::string db = (dir / "podprof.db").string();
  ChildProcess agg({std::string(PODPROF_BIN_DIR) + "/podprof-aggregator", "--insecure",
                    "--config=" + (dir / "none.toml").string(), "--listen=127.0.0.1:0",
                    "--db=" + db, "--ready-file=" + (dir / "ready.json").string()},
                   "", {"NOTIFY_SOCKET=" + (dir / "notify.sock").string(), "WATCHDOG_USEC=400000"});
  std::vector<std::string> msgs = sock.ReadUntil("READY=1");
  ASSERT_FALSE(msgs.empty());
  EXPECT_TRUE(absl::StartsWith(msgs[0], "READY=1\nSTATUS=listening on port")) << msgs[0];
  // At READY the port serves queries on a migrated database.
  auto info = nlohmann::json::parse(testing::ReadTestFile((dir / "ready.json").string()));
  auto stub = v1::Aggregator::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", info["port"].get<int>()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListCapturesResponse list;
  ASSERT_OK(stub->ListCaptures(&ctx, v1::ListCapturesRequest(), &list));

  // About every 200 ms while healthy.
  const int healthy = Count(sock.ReadFor(1200), "WATCHDOG=1");
  EXPECT_GE(healthy, 3);
  EXPECT_LE(healthy, 9);
  {
    // Another process takes the write lock: the store is wedged, the pings stop.
    auto wedge = storage::Connection::Open(db, false);
    ASSERT_OK(wedge);
    ASSERT_OK((*wedge)->Exec("BEGIN EXCLUSIVE"));
    sock.ReadFor(300);  // a check that began before the lock may still ping
    EXPECT_EQ(Count(sock.ReadFor(1200), "WATCHDOG=1"), 0);
    ASSERT_OK((*wedge)->Exec("ROLLBACK"));
  }
  EXPECT_GE(Count(sock.ReadFor(1200), "WATCHDOG=1"), 2) << "the pings did not come back";

  agg.Signal(SIGHUP);
  msgs = sock.ReadUntil("READY=1\nSTATUS");
  agg.Signal(SIGTERM);
  msgs = sock.ReadUntil("STOPPING=1");
  int status = agg.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  int reloading = -1, ready_again = -1, stopping = -1;
  for (int i = 0; i < static_cast<int>(msgs.size()); ++i) {
    if (absl::StrContains(msgs[i], "RELOADING=1")) reloading = i;
    if (reloading >= 0 && i > reloading && ready_again < 0 &&
        absl::StrContains(msgs[i], "READY=1")) {
      ready_again = i;
    }
    if (absl::StrContains(msgs[i], "STOPPING=1")) stopping = i;
  }
  EXPECT_GT(reloading, 0);
  EXPECT_GT(ready_again, reloading);
  EXPECT_EQ(stopping, static_cast<int>(msgs.size()) - 1);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace podprof::aggregator

namespace podprof::aggregator {
namespace {

// Requests with absurd values get INVALID_ARGUMENT, floods RESOURCE_EXHAUSTED, and the server
// stays up through all of it.
TEST(AggregatorLimitsTest, AbsurdRequestsAndFloodsAreRefusedClearly) {
  fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("agg_limits_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "limits.toml") << "[limits]\nmax_captures_per_minute = 3\n"
                                        "max_message_bytes = 1048576\n";
  ChildProcess agg({std::string(PODPROF_BIN_DIR) + "/podprof-aggregator", "--insecure",
                    "--config=" + (dir / "limits.toml").string(), "--listen=127.0.0.1:0",
                    "--db=" + (dir / "p.db").string(), "--ready-file=" + (dir / "r.json").string()},
                   (dir / "r.json").string());
  ASSERT_TRUE(agg.ready());
  auto stub = v1::Aggregator::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", agg.info()["port"].get<int>()),
                          grpc::InsecureChannelCredentials()));
  auto start = [&](const v1::StartCaptureRequest& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::StartCaptureResponse resp;
    return stub->StartCapture(&ctx, req, &resp);
  };
  v1::StartCaptureRequest zero;  // duration 0
  grpc::Status s = start(zero);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "duration_ms")) << s.error_message();
  v1::StartCaptureRequest huge;
  huge.set_duration_ms(uint64_t{1} << 40);
  EXPECT_EQ(start(huge).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::StartCaptureRequest many;
  many.set_duration_ms(100);
  for (int i = 0; i < 10'001; ++i) many.add_host_names(absl::StrCat("h", i));
  s = start(many);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "10000")) << s.error_message();
  v1::StartCaptureRequest long_name;
  long_name.set_duration_ms(100);
  long_name.add_host_names(std::string(100'000, 'x'));
  EXPECT_EQ(start(long_name).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::StartCaptureRequest late;
  late.set_duration_ms(100);
  late.set_delay_ms(4'000'000'000u);
  EXPECT_EQ(start(late).error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  // Valid requests (no agent is online, so each fails its precondition) count against the
  // per-minute budget of 3; the fourth is refused as a flood.
  v1::StartCaptureRequest ok;
  ok.set_duration_ms(100);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(start(ok).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  s = start(ok);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "last minute")) << s.error_message();

  // An unknown capture id, and a message above max_message_bytes.
  {
    grpc::ClientContext ctx;
    v1::WatchCaptureRequest w;
    w.set_capture_id("cap-none");
    auto reader = stub->WatchCapture(&ctx, w);
    v1::CaptureProgress p;
    while (reader->Read(&p)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    // The insight queries: an unknown capture, an unknown kernel, an empty or absurd name.
    grpc::ClientContext c1, c2, c3, c4;
    v1::GetStragglersRequest sr;
    sr.set_capture_id("cap-none");
    v1::GetStragglersResponse sresp;
    EXPECT_EQ(stub->GetStragglers(&c1, sr, &sresp).error_code(), grpc::StatusCode::NOT_FOUND);
    v1::DescribeKernelRequest kr;
    v1::DescribeKernelResponse kresp;
    EXPECT_EQ(stub->DescribeKernel(&c2, kr, &kresp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
    kr.set_op_name("fusion.none");
    grpc::Status none = stub->DescribeKernel(&c3, kr, &kresp);
    EXPECT_EQ(none.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(none.error_message(), "fusion.none")) << none.error_message();
    kr.set_op_name(std::string(100'000, 'k'));
    EXPECT_EQ(stub->DescribeKernel(&c4, kr, &kresp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    v1::ImportXSpaceResponse resp;
    auto writer = stub->ImportXSpace(&ctx, &resp);
    v1::ImportXSpaceChunk chunk;
    chunk.set_host_name("h");
    chunk.set_data(std::string(2 << 20, 'x'));
    writer->Write(chunk);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  }
  // Still serving.
  grpc::ClientContext ctx;
  v1::ListCapturesResponse list;
  EXPECT_OK(stub->ListCaptures(&ctx, v1::ListCapturesRequest(), &list));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace podprof::aggregator

namespace podprof::aggregator {
namespace {

// A full disk under the database: the import that does not fit fails with a clear error,
// everything stored before stays queryable, the daemon keeps serving, the file stays sound.
// Needs a small tmpfs (root with mount rights); skipped where the machine does not allow it.
TEST(AggregatorStorageFaultTest, DiskFullFailsTheImportClearlyAndKeepsServing) {
  fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("agg_full_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir / "small");
  if (mount("tmpfs", (dir / "small").c_str(), "tmpfs", 0, "size=3m") != 0) {
    GTEST_SKIP() << "cannot mount a 3 MB tmpfs here: " << std::strerror(errno);
  }
  struct Unmount {
    fs::path p;
    ~Unmount() { umount2(p.c_str(), MNT_DETACH); }
  } unmount{dir / "small"};
  const std::string db = (dir / "small" / "p.db").string();
  ChildProcess agg(AggregatorArgv(db, dir / "r.json"), (dir / "r.json").string());
  ASSERT_TRUE(agg.ready());
  const std::string addr = absl::StrCat("127.0.0.1:", agg.info()["port"].get<int>());
  const std::string fixture = testing::FixturePath("tpu_v6e_4chip_host_offload.xplane.pb");
  int stored = 0;
  testing::PodprofResult failed;
  for (int i = 0; i < 60; ++i) {
    testing::PodprofResult r =
        testing::RunPodprof("import " + fixture + " --format json --aggregator " + addr);
    if (r.exit_code != 0) {
      failed = r;
      break;
    }
    ++stored;
  }
  ASSERT_GT(stored, 0);
  ASSERT_NE(failed.exit_code, 0) << "3 MB never filled up";
  EXPECT_EQ(failed.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(failed.err, "full")) << failed.err;
  // What was stored is all there, and the daemon answers.
  testing::PodprofResult list = testing::RunPodprof("captures --format json --aggregator " + addr);
  ASSERT_EQ(list.exit_code, 0) << list.err;
  auto captures = nlohmann::json::parse(list.out);
  EXPECT_EQ(static_cast<int>(captures.size()), stored) << list.out;
  testing::PodprofResult stats = testing::RunPodprof(
      "stats " + captures[0]["capture"].get<std::string>() + " --aggregator " + addr);
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  agg.Stop();
  auto store = storage::Store::Open(db);
  ASSERT_OK(store);
  EXPECT_OK(storage::CheckIntegrity((*store)->database()));
  store->reset();
  umount2((dir / "small").c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace podprof::aggregator

namespace podprof::aggregator {
namespace {

// Another process holds the database's write lock for longer than the store waits: the import
// in between fails with an error that says so, reads go on meanwhile (WAL), and once the lock
// is gone the same import succeeds.
TEST(AggregatorStorageFaultTest, AnOutsideWriteLockFailsWritesClearlyWhileReadsGoOn) {
  fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("agg_locked_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string db = (dir / "p.db").string();
  ChildProcess agg(AggregatorArgv(db, dir / "r.json"), (dir / "r.json").string());
  ASSERT_TRUE(agg.ready());
  const std::string addr = absl::StrCat("127.0.0.1:", agg.info()["port"].get<int>());
  const std::string fixture = testing::FixturePath("tpu_v6e_4chip_host_offload.xplane.pb");
  ASSERT_EQ(testing::RunPodprof("import " + fixture + " --aggregator " + addr).exit_code, 0);

  auto outside = storage::Connection::Open(db, false);
  ASSERT_OK(outside);
  ASSERT_OK((*outside)->Exec("BEGIN IMMEDIATE"));
  testing::PodprofResult blocked =
      testing::RunPodprof("import " + fixture + " --aggregator " + addr);
  EXPECT_EQ(blocked.exit_code, 2) << blocked.err;
  EXPECT_TRUE(absl::StrContains(blocked.err, "locked")) << blocked.err;
  testing::PodprofResult reads = testing::RunPodprof("captures --format json --aggregator " + addr);
  EXPECT_EQ(reads.exit_code, 0) << reads.err;
  EXPECT_EQ(nlohmann::json::parse(reads.out).size(), 1u);
  ASSERT_OK((*outside)->Exec("ROLLBACK"));
  outside->reset();

  EXPECT_EQ(testing::RunPodprof("import " + fixture + " --aggregator " + addr).exit_code, 0);
  reads = testing::RunPodprof("captures --format json --aggregator " + addr);
  EXPECT_EQ(nlohmann::json::parse(reads.out).size(), 2u);
  agg.Stop();
  auto store = storage::Store::Open(db);
  ASSERT_OK(store);
  EXPECT_OK(storage::CheckIntegrity((*store)->database()));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace podprof::aggregator

namespace podprof::aggregator {
namespace {

// The database's file system turns read-only (a full root file system remounted read-only, a
// volume mounted read-only for inspection): the aggregator still starts and serves the history
// it holds, refuses imports with an error naming the database and why, and leaves the file
// byte for byte as it was.
TEST(AggregatorStorageFaultTest, ReadOnlyDatabaseServesItsHistoryAndRefusesWritesClearly) {
  fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("agg_ro_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir / "vol");
  const bool mounted = mount("tmpfs", (dir / "vol").c_str(), "tmpfs", 0, "size=16m") == 0;
  if (!mounted && geteuid() == 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (and root ignores file modes): "
                 << std::strerror(errno);
  }
  struct Unmount {
    fs::path p;
    bool on;
    ~Unmount() {
      if (on) umount2(p.c_str(), MNT_DETACH);
    }
  } unmount{dir / "vol", mounted};
  const std::string db = (dir / "vol" / "p.db").string();
  const std::vector<std::string> argv = AggregatorArgv(db, dir / "r.json");
  const std::string fixture = testing::FixturePath("tpu_v6e_4chip_host_offload.xplane.pb");
  {
    ChildProcess agg(argv, (dir / "r.json").string());
    ASSERT_TRUE(agg.ready());
    const std::string addr = absl::StrCat("127.0.0.1:", agg.info()["port"].get<int>());
    testing::PodprofResult imported =
        testing::RunPodprof("import " + fixture + " --format json --aggregator " + addr);
    ASSERT_EQ(imported.exit_code, 0) << imported.err;
    ASSERT_EQ(agg.Stop(), 0);
  }
  fs::remove(dir / "r.json");
  if (mounted) {
    ASSERT_EQ(mount(nullptr, (dir / "vol").c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0)
        << std::strerror(errno);
  } else {
    fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    fs::permissions(dir / "vol", fs::perms::owner_read | fs::perms::owner_exec);
  }
  const std::string before = testing::ReadTestFile(db);
  ASSERT_FALSE(before.empty());

  ChildProcess agg(argv, (dir / "r.json").string());
  ASSERT_TRUE(agg.ready()) << "the aggregator refused a read-only database";
  const std::string addr = absl::StrCat("127.0.0.1:", agg.info()["port"].get<int>());
  testing::PodprofResult list = testing::RunPodprof("captures --format json --aggregator " + addr);
  ASSERT_EQ(list.exit_code, 0) << list.err;
  auto captures = nlohmann::json::parse(list.out);
  ASSERT_EQ(captures.size(), 1u) << list.out;
  testing::PodprofResult stats = testing::RunPodprof(
      "stats " + captures[0]["capture"].get<std::string>() + " --format json --aggregator " + addr);
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_FALSE(nlohmann::json::parse(stats.out).empty()) << stats.out;

  testing::PodprofResult refused =
      testing::RunPodprof("import " + fixture + " --aggregator " + addr);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_TRUE(absl::StrContains(refused.err, "read-only")) << refused.err;
  EXPECT_TRUE(absl::StrContains(refused.err, db)) << refused.err;
  // Still serving after the refusal.
  EXPECT_EQ(testing::RunPodprof("captures --aggregator " + addr).exit_code, 0);
  EXPECT_EQ(agg.Stop(), 0);
  EXPECT_EQ(testing::ReadTestFile(db), before) << "the read-only database changed";

  if (mounted) {
    umount2((dir / "vol").c_str(), MNT_DETACH);
  } else {
    fs::permissions(dir / "vol", fs::perms::owner_all);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace podprof::aggregator
