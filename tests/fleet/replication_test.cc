// The replicator against a real ClickHouse server: captures arrive once with the SQLite
// store's percentiles, retries never double them, ClickHouse killed and restarted loses
// nothing, refused rows are reported by capture, the backlog is bounded.
#include <filesystem>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fleet/queries.h"
#include "fleet/replicator.h"
#include "gtest/gtest.h"
#include "ingest/capture_ingest.h"
#include "storage/sqlite.h"
#include "tests/fleet/fleet_test_util.h"
#include "tests/util/clickhouse_server.h"

namespace podprof::fleet {
namespace {

namespace fs = std::filesystem;
using podprof::testing::ClickHouseServer;
using podprof::testing::SyntheticPod;

constexpr int64_t kStart = 1'795'000'000'000'000'000;  // 2026-11-18
constexpr int64_t kHour = 3'600'000'000'000;

class ReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!podprof::testing::HaveClickHouse()) {
      GTEST_SKIP() << "clickhouse-server is not installed (scripts/install-deps.sh installs it)";
    }
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("fleet_", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                        "_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    server_ = std::make_unique<ClickHouseServer>(dir_ / "ch", podprof::testing::FreePorts());
    ASSERT_TRUE(server_->started().ok()) << server_->started();
    ASSERT_EQ(server_->Sql("CREATE DATABASE podprof"), "");
    auto store = storage::Store::Open((dir_ / "pod.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }
  void TearDown() override {
    replicator_.reset();
    store_.reset();
    server_.reset();
    if (!HasFailure()) fs::remove_all(dir_);
  }

  std::unique_ptr<Replicator> MakeReplicator(ReplicatorOptions o = {}) {
    if (o.pod.empty()) o.pod = "pod-a";
    return std::make_unique<Replicator>(*store_, server_->Client("writer"), o, clock_);
  }
  void Store(ingest::CaptureInput in) {
    ASSERT_TRUE(ingest::StoreCapture(*store_, std::move(in)).ok());
  }
  int64_t Count(const std::string& table, const std::string& where = "1") {
    int64_t n = -1;
    std::string s =
        server_->Sql(absl::StrCat("SELECT count() FROM podprof.", table, "_all WHERE ", where));
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(s), &n)) << s;
    return n;
  }
  // Kernel identities repeat by design (one per capture that ran them) until ClickHouse merges
  // them away: readers count them distinct.
  int64_t KernelIdentities() {
    int64_t n = -1;
    std::string s = server_->Sql(
        "SELECT count() FROM (SELECT DISTINCT module, op_name, program_id, hlo_hash, pod "
        "FROM podprof.kernels_all)");
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(s), &n)) << s;
    return n;
  }
  // Every table's row count, to compare before and after a retry.
  std::string Counts() {
    std::string out;
    for (Table t : kTables) {
      absl::StrAppend(&out, Definition(t).name, "=",
                      t == Table::kKernels ? KernelIdentities() : Count(Definition(t).name), " ");
    }
    return out;
  }
  // Runs batches until the backlog is empty.
  void Drain(Replicator& r) {
    for (int i = 0; i < 100; ++i) {
      absl::StatusOr<int> n = r.ReplicateBatch();
      ASSERT_TRUE(n.ok()) << n.status();
      if (*n == 0) return;
    }
    FAIL() << "the backlog did not drain";
  }

  RealClock clock_;
  fs::path dir_;
  std::unique_ptr<ClickHouseServer> server_;
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<Replicator> replicator_;
};

TEST_F(ReplicationTest, SettingsThatAreWrongAreNamed) {
  ClickHouseOptions o;
  o.url = absl::StrCat("http://127.0.0.1:", podprof::testing::FreePort());
  ReplicatorOptions ro;
  ro.pod = "p";
  Replicator nothing(*store_, *ClickHouse::Create(o), ro, clock_);
  absl::Status s = nothing.Prepare();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "[fleet] clickhouse_url = " + o.url)) << s;

  o.url = server_->url();
  o.user = "writer";
  o.password = "wrong";
  Replicator refused(*store_, *ClickHouse::Create(o), ro, clock_);
  s = refused.Prepare();
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "[fleet] user 'writer'")) << s;

  ro.database = "nope";
  Replicator no_db(*store_, server_->Client("writer"), ro, clock_);
  s = no_db.Prepare();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "[fleet] database 'nope' does not exist")) << s;

  o.url = "https://ch:8443";
  EXPECT_TRUE(absl::IsInvalidArgument(ClickHouse::Create(o).status()));
}

TEST_F(ReplicationTest, CapturesArriveOnceWithTheStoresPercentiles) {
  store_->QueueForFleet(100);
  for (int i = 0; i < 4; ++i) {
    Store(SyntheticPod(absl::StrCat("c", i), kStart + i * kHour, "fusion.1", 1'000'000 + i * 50'000,
                       2, 200, 20'000, {{"job", "llm"}}));
  }
  replicator_ = MakeReplicator();
  ASSERT_TRUE(replicator_->Prepare().ok());
  Drain(*replicator_);
  EXPECT_EQ(Count("captures"), 4);
  EXPECT_EQ(Count("capture_hosts"), 8);
  EXPECT_EQ(Count("kernel_stats"), 4 * 2 * 2 * 2);  // captures x hosts x chips x kernels
  EXPECT_EQ(Count("kernel_rollups"), 4 * 2);
  EXPECT_EQ(KernelIdentities(), 2);
  EXPECT_EQ(replicator_->Status().backlog.pending, 0);

  // The fleet's percentiles are the SQLite store's, capture by capture.
  storage::HistoryQuery hq;
  hq.op_regex = "^fusion\\.1$";
  auto local = store_->KernelHistory(hq);
  ASSERT_TRUE(local.ok()) << local.status();
  ASSERT_EQ(local->size(), 1u);
  FleetFilter f;
  f.labels["job"] = "llm";
  auto fleet = FleetHistory(server_->Client("reader"), "^fusion\\.1$", f);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  ASSERT_EQ(fleet->size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const storage::HistoryPoint& want = (*local)[0].points[i];
    const FleetPoint& got = (*fleet)[i];
    EXPECT_EQ(got.capture_id, want.capture_id);
    EXPECT_EQ(got.pod, "pod-a");
    EXPECT_EQ(got.count, want.count);
    EXPECT_EQ(got.total_ps, want.total_ps);
    for (double q : {0.5, 0.9, 0.99}) {
      EXPECT_EQ(got.sketch.Quantile(q), want.sketch.Quantile(q)) << got.capture_id << " q" << q;
    }
  }
  f.labels["job"] = "other";
  EXPECT_TRUE(FleetHistory(server_->Client("reader"), "fusion", f)->empty());

  // An answer lost after ClickHouse wrote (a crash between the INSERT and the outbox's
  // delete): the captures are queued again, and sending them again doubles nothing.
  const std::string before = Counts();
  {
    auto db = storage::Connection::Open((dir_ / "pod.db").string(), false);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO fleet_outbox (capture_id, queued_ns) "
                           "SELECT id, created_ns FROM captures")
                    .ok());
  }
  EXPECT_EQ(replicator_->Status().backlog.pending, 4);
  Drain(*replicator_);
  EXPECT_EQ(Counts(), before);
}

TEST_F(ReplicationTest, ClickHouseKilledMidBacklogLosesAndDoublesNothing) {
  store_->QueueForFleet(1000);
  ReplicatorOptions o;
  o.batch_captures = 2;
  o.flush_interval_ns = 20'000'000;
  o.max_backoff_ns = 200'000'000;
  replicator_ = MakeReplicator(o);
  for (int i = 0; i < 12; ++i) {
    Store(SyntheticPod(absl::StrCat("k", i), kStart + i * kHour, "fusion.2", 2'000'000, 4, 400));
  }
  replicator_->Start();
  // Kill it as soon as the first batches have landed, while the rest are on their way.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (replicator_->Status().replicated == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  server_->Kill();
  // Captures go on being stored while ClickHouse is down.
  for (int i = 12; i < 15; ++i) {
    Store(SyntheticPod(absl::StrCat("k", i), kStart + i * kHour, "fusion.2", 2'000'000, 4, 400));
  }
  absl::SleepFor(absl::Milliseconds(500));
  ReplicatorStatus down = replicator_->Status();
  EXPECT_GT(down.backlog.pending, 0);
  EXPECT_TRUE(absl::StrContains(down.last_error, server_->url())) << down.last_error;
  ASSERT_TRUE(server_->Start().ok());
  while (replicator_->Status().backlog.pending > 0 && absl::Now() < give_up + absl::Seconds(30)) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_EQ(replicator_->Status().backlog.pending, 0);
  EXPECT_EQ(replicator_->Status().last_error, "");
  EXPECT_EQ(Count("captures"), 15);
  EXPECT_EQ(Count("capture_hosts"), 15 * 4);
  EXPECT_EQ(Count("kernel_stats"), 15 * 4 * 2 * 2);
  EXPECT_EQ(Count("kernel_rollups"), 15 * 2);
  EXPECT_EQ(Count("captures", "capture_id = 'k3'"), 1);
}

TEST_F(ReplicationTest, RefusedRowsAreReportedByCaptureAndTheOthersGoOn) {
  // An operator's table that refuses label values over 16 bytes.
  ReplicatorOptions o;
  o.pod = "pod-a";
  ASSERT_TRUE(MakeReplicator(o)->Prepare().ok());
  ASSERT_EQ(server_->Sql("DROP TABLE podprof.captures"), "");
  std::string ddl = CreateLocal(Table::kCaptures, "podprof");
  ddl.replace(ddl.find("\n) ENGINE"), 0,
              ",\n  guard UInt8 MATERIALIZED throwIf(arrayExists(v -> length(v) > 16, "
              "label_values))");
  ASSERT_EQ(server_->Sql(ddl), "");
  store_->QueueForFleet(100);
  Store(SyntheticPod("ok-1", kStart, "fusion.3", 1'000'000, 1, 10, 0, {{"job", "short"}}));
  Store(SyntheticPod("long", kStart + kHour, "fusion.3", 1'000'000, 1, 10, 0,
                     {{"job", std::string(40, 'x')}}));
  Store(SyntheticPod("ok-2", kStart + 2 * kHour, "fusion.3", 1'000'000, 1, 10, 0, {{"job", "s"}}));
  replicator_ = MakeReplicator(o);
  Drain(*replicator_);
  ReplicatorStatus s = replicator_->Status();
  EXPECT_EQ(s.backlog.pending, 0);
  ASSERT_EQ(s.backlog.rejected, 1);
  EXPECT_EQ(s.backlog.rejections[0].first, "long");
  EXPECT_TRUE(absl::StrContains(s.backlog.rejections[0].second, "table captures"))
      << s.backlog.rejections[0].second;
  EXPECT_TRUE(absl::StrContains(s.backlog.rejections[0].second, "throwIf"))
      << s.backlog.rejections[0].second;
  EXPECT_EQ(Count("captures"), 2);
  EXPECT_EQ(Count("captures", "capture_id = 'long'"), 0);
}

// A pod whose history predates the fleet store: its stored captures are queued once asked,
// and asking again doubles nothing.
TEST_F(ReplicationTest, StoredCapturesAreBackfilledOnce) {
  for (int i = 0; i < 3; ++i) {  // stored before [fleet] was on: not queued
    Store(SyntheticPod(absl::StrCat("old", i), kStart + i * kHour, "fusion.5", 1'000'000, 1, 10));
  }
  store_->QueueForFleet(100);
  EXPECT_EQ(store_->FleetBacklogStatus()->pending, 0);
  auto queued = store_->QueueStoredForFleet(kStart + kHour);  // the last two
  ASSERT_TRUE(queued.ok()) << queued.status();
  EXPECT_EQ(*queued, 2);
  replicator_ = MakeReplicator();
  ASSERT_TRUE(replicator_->Prepare().ok());
  Drain(*replicator_);
  EXPECT_EQ(Count("captures"), 2);
  const std::string before = Counts();
  ASSERT_EQ(*store_->QueueStoredForFleet(0), 3);
  Drain(*replicator_);
  EXPECT_EQ(Count("captures"), 3);
  EXPECT_EQ(Count("captures", "capture_id = 'old1'"), 1);
  EXPECT_EQ(Count("kernel_stats"), 3 * 2 * 2);
}

TEST_F(ReplicationTest, AFullBacklogKeepsTheOldest) {
  store_->QueueForFleet(2);
  for (int i = 0; i < 3; ++i) {
    Store(SyntheticPod(absl::StrCat("b", i), kStart + i * kHour, "fusion.4", 1'000'000, 1, 10));
  }
  auto b = store_->FleetBacklogStatus();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->pending, 2);
  EXPECT_EQ(b->not_queued, 1);
  auto pending = store_->FleetPending(10);
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(pending->size(), 2u);
  EXPECT_EQ((*pending)[0], "b0");
  EXPECT_EQ((*pending)[1], "b1");
}

}  // namespace
}  // namespace podprof::fleet
