// The replicator against a real ClickHouse server: captures arrive once with the SQLite
// store's percentiles and `podprof stragglers`'s judgement, retries never double them,
// ClickHouse killed and restarted loses nothing, refused rows are reported by capture, tables
// an older podprof created are upgraded, the backlog is bounded.
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "fleet/queries.h"
#include "fleet/replicator.h"
#include "gtest/gtest.h"
#include "harness/clickhouse_server.h"
#include "harness/wait.h"
#include "ingest/capture_ingest.h"
#include "insight/evidence.h"
#include "storage/sqlite.h"
#include "tests/fleet/fleet_test_util.h"
#include "tests/util/status_matchers.h"

namespace podprof::fleet {
namespace {

namespace fs = std::filesystem;
using podprof::testing::AddCollectives;
using podprof::testing::ClickHouseServer;
using podprof::testing::SyntheticPod;

constexpr int64_t kStart = 1'795'000'000'000'000'000;  // 2026-11-18
constexpr int64_t kHour = 3'600'000'000'000;

// A pod of 4 chips at 200 collectives where host-1 chip 1 (pod chip 3) is last in 3 of 4
// instances (chance gives 1 in 4) and the last of the others rotates.
ingest::CaptureInput WithStraggler(const std::string& id, int64_t start_ns) {
  ingest::CaptureInput in = SyntheticPod(id, start_ns, "fusion.6", 1'000'000, 2, 20);
  AddCollectives(in, 200, [](int i) { return i % 4 == 0 ? (i / 4) % 4 : 3; });
  return in;
}

// The same pod where the last chip is drawn at random: noise, no straggler.
ingest::CaptureInput WithNoise(const std::string& id, int64_t start_ns) {
  ingest::CaptureInput in = SyntheticPod(id, start_ns, "fusion.6", 1'000'000, 2, 20);
  std::mt19937 rng(7);  // its output is fixed by the standard: the same draws everywhere
  AddCollectives(in, 200, [&rng](int) { return static_cast<int>(rng() % 4); });
  return in;
}

// The stragglers table and its Merge table as podprof created them before the straggler
// test's columns.
constexpr char kOldStragglers[] =
    "CREATE TABLE podprof.stragglers (pod String, capture_id String, start_ns UInt64, "
    "host String, chip UInt32, times_last UInt64, instances UInt64, caused_ps Int64, "
    "lateness_ps Int64, steps Array(Int64)) ENGINE = MergeTree "
    "PARTITION BY toYYYYMM(toDateTime(intDiv(start_ns, 1000000000))) "
    "ORDER BY (pod, start_ns, host, chip)";
constexpr char kOldStragglersAll[] =
    "CREATE TABLE podprof.stragglers_all AS podprof.stragglers "
    "ENGINE = Merge(podprof, '^stragglers$')";

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
    ASSERT_OK(server_->started());
    ASSERT_EQ(server_->Sql("CREATE DATABASE podprof"), "");
    auto store = storage::Store::Open((dir_ / "pod.db").string());
    ASSERT_OK(store);
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
    ASSERT_OK(ingest::StoreCapture(store_->writer(), std::move(in)));
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
  // The column names of podprof.`table`, in order.
  std::vector<std::string> ColumnNames(const std::string& table) {
    return absl::StrSplit(server_->Sql(absl::StrCat("SELECT name FROM system.columns WHERE "
                                                    "database = 'podprof' AND table = '",
                                                    table, "' FORMAT TabSeparatedRaw")),
                          '\n', absl::SkipEmpty());
  }
  // Checks that the fleet's straggler rows of capture `id` carry what JudgeStragglers says of
  // the store's rows; returns how many it judged significant.
  int CheckStragglerRows(const std::string& id) {
    auto report = store_->insights().Stragglers(id);
    EXPECT_OK(report);
    if (!report.ok()) return -1;
    const insight::StragglerVerdict v = insight::JudgeStragglers(report->chips);
    EXPECT_TRUE(v.judged) << v.text;
    std::map<std::pair<std::string, std::string>, std::vector<std::string>> fleet;
    for (absl::string_view line : absl::StrSplit(
             server_->Sql(absl::StrCat("SELECT host, chip, times_last, expected_last, p_value, "
                                       "significant FROM podprof.stragglers_all WHERE "
                                       "capture_id = '",
                                       id, "' FORMAT TabSeparatedRaw")),
             '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(line, '\t');
      EXPECT_EQ(f.size(), 6u) << line;
      if (f.size() == 6) fleet[{f[0], f[1]}] = {f.begin() + 2, f.end()};
    }
    EXPECT_EQ(fleet.size(), report->chips.size()) << id;
    int significant = 0;
    for (size_t i = 0; i < report->chips.size(); ++i) {
      const trace::StragglerRow& r = report->chips[i];
      const std::string chip = absl::StrCat(r.host, " chip ", r.chip_ordinal);
      auto row = fleet.find({r.host, absl::StrCat(r.chip_ordinal)});
      if (row == fleet.end()) {
        ADD_FAILURE() << id << ": " << chip << " is not in the fleet";
        continue;
      }
      const std::vector<std::string>& got = row->second;
      double expected = -2, p = -2;
      EXPECT_EQ(got[0], absl::StrCat(r.times_last)) << id << " " << chip;
      EXPECT_TRUE(absl::SimpleAtod(got[1], &expected) && absl::SimpleAtod(got[2], &p)) << chip;
      EXPECT_DOUBLE_EQ(expected, r.expected_last) << id << " " << chip;
      EXPECT_DOUBLE_EQ(p, v.p_values[i]) << id << " " << chip;
      EXPECT_EQ(got[3], v.significant[i] ? "1" : "0") << id << " " << chip;
      significant += v.significant[i];
    }
    return significant;
  }
  // Runs batches until the backlog is empty.
  void Drain(Replicator& r) {
    for (int i = 0; i < 100; ++i) {
      absl::StatusOr<int> n = r.ReplicateBatch();
      ASSERT_OK(n);
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
  store_->outbox().QueueForFleet(100);
  for (int i = 0; i < 4; ++i) {
    Store(SyntheticPod(absl::StrCat("c", i), kStart + i * kHour, "fusion.1", 1'000'000 + i * 50'000,
                       2, 200, 20'000, {{"job", "llm"}}));
  }
  replicator_ = MakeReplicator();
  ASSERT_OK(replicator_->Prepare());
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
  auto local = store_->kernels().History(hq);
  ASSERT_OK(local);
  ASSERT_EQ(local->size(), 1u);
  FleetFilter f;
  f.labels["job"] = "llm";
  auto fleet = FleetHistory(server_->Client("reader"), "^fusion\\.1$", f);
  ASSERT_OK(fleet);
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
    ASSERT_OK(db);
    ASSERT_OK(
        (*db)->Exec("INSERT INTO fleet_outbox (capture_id, queued_ns) "
                    "SELECT id, created_ns FROM captures"));
  }
  EXPECT_EQ(replicator_->Status().backlog.pending, 4);
  Drain(*replicator_);
  EXPECT_EQ(Counts(), before);
}

TEST_F(ReplicationTest, ClickHouseKilledMidBacklogLosesAndDoublesNothing) {
  store_->outbox().QueueForFleet(1000);
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
  // Until the replicator has tried the dead server (its error names it).
  podprof::testing::WaitFor(
      [&] {
        const ReplicatorStatus now = replicator_->Status();
        return now.backlog.pending > 0 && absl::StrContains(now.last_error, server_->url());
      },
      absl::Seconds(10));
  ReplicatorStatus down = replicator_->Status();
  EXPECT_GT(down.backlog.pending, 0);
  EXPECT_TRUE(absl::StrContains(down.last_error, server_->url())) << down.last_error;
  ASSERT_OK(server_->Start());
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
  ASSERT_OK(MakeReplicator(o)->Prepare());
  ASSERT_EQ(server_->Sql("DROP TABLE podprof.captures"), "");
  std::string ddl = CreateLocal(Table::kCaptures, "podprof");
  ddl.replace(ddl.find("\n) ENGINE"), 0,
              ",\n  guard UInt8 MATERIALIZED throwIf(arrayExists(v -> length(v) > 16, "
              "label_values))");
  ASSERT_EQ(server_->Sql(ddl), "");
  store_->outbox().QueueForFleet(100);
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

// The fleet names no straggler on noise either: each chip's row carries its chance count, the
// binomial p-value and whether it was significantly often last, as `podprof stragglers`
// judges it.
TEST_F(ReplicationTest, StragglerRowsCarryTheStragglerTestsJudgement) {
  store_->outbox().QueueForFleet(100);
  Store(WithStraggler("late", kStart));
  Store(WithNoise("noise", kStart + kHour));
  replicator_ = MakeReplicator();
  ASSERT_OK(replicator_->Prepare());
  Drain(*replicator_);
  EXPECT_EQ(CheckStragglerRows("late"), 1);
  EXPECT_EQ(CheckStragglerRows("noise"), 0);
  EXPECT_EQ(Count("stragglers",
                  "capture_id = 'late' AND significant = 1 AND host = 'host-1' "
                  "AND chip = 1 AND expected_last = 50 AND p_value < 1e-30"),
            1);
  // The noise pod's chips were each last about as often as chance gives (50 of 200), and
  // host-1 chip 1 most often (61, p 0.045): ranked by times last it would be named.
  EXPECT_EQ(Count("stragglers", "capture_id = 'noise' AND expected_last = 50"), 4);
  EXPECT_EQ(Count("stragglers", "capture_id = 'noise' AND significant = 1"), 0);
  EXPECT_EQ(Count("stragglers",
                  "capture_id = 'noise' AND host = 'host-1' AND chip = 1 AND "
                  "times_last = 61 AND p_value < 0.05"),
            1);
}

// A fleet store whose tables an older podprof created, without the straggler test's columns,
// keeps working: Prepare adds them (the older rows read as not judged), makes stragglers_all
// again to show them (a Merge table keeps its table's columns of when it was made), and the
// new rows land beside the old.
TEST_F(ReplicationTest, TablesOfAnOlderPodprofGainTheNewColumns) {
  ASSERT_EQ(server_->Sql(kOldStragglers), "");
  ASSERT_EQ(server_->Sql(kOldStragglersAll), "");
  const std::string old_row = absl::StrCat(
      "INSERT INTO podprof.stragglers (pod, capture_id, start_ns, host, chip, times_last, "
      "instances, caused_ps, lateness_ps, steps) VALUES ('pod-a', 'older', ",
      kStart - kHour, ", 'host-0', 0, 5, 10, 100, 10, [])");
  ASSERT_EQ(server_->Sql(old_row), "");
  store_->outbox().QueueForFleet(100);
  Store(WithStraggler("late", kStart));
  replicator_ = MakeReplicator();
  absl::Status prepared = replicator_->Prepare();
  ASSERT_OK(prepared);
  for (const char* table : {"stragglers", "stragglers_all"}) {
    std::vector<std::string> want;
    for (const Column& c : Definition(Table::kStragglers).columns) want.push_back(c.name);
    EXPECT_EQ(ColumnNames(table), want) << table;
  }
  Drain(*replicator_);
  EXPECT_EQ(CheckStragglerRows("late"), 1);
  // An older podprof's rows, written before the upgrade or by one still running after it.
  ASSERT_EQ(server_->Sql(absl::StrReplaceAll(old_row, {{"'older'", "'older-after'"}})), "");
  EXPECT_EQ(Count("stragglers",
                  "capture_id IN ('older', 'older-after') AND expected_last = -1 AND "
                  "p_value = 1 AND significant = 0 AND times_last = 5"),
            2);
  // Upgraded once: Prepare again changes nothing.
  ASSERT_OK(replicator_->Prepare());
  EXPECT_EQ(ColumnNames("stragglers_all").size(), Definition(Table::kStragglers).columns.size());
  EXPECT_EQ(Count("stragglers"), 4 + 2);
}

// Each host's row carries its slice of a multi-slice job as stored (-1: none known).
TEST_F(ReplicationTest, HostRowsCarryTheirSlice) {
  store_->outbox().QueueForFleet(100);
  ingest::CaptureInput pod = SyntheticPod("sliced", kStart, "fusion.1", 1'000'000, 3);
  pod.hosts[0].slice = 2;
  pod.hosts[2].slice = 0;
  Store(std::move(pod));
  replicator_ = MakeReplicator();
  ASSERT_OK(replicator_->Prepare());
  Drain(*replicator_);
  EXPECT_EQ(server_->Sql("SELECT host, slice FROM podprof.capture_hosts_all WHERE capture_id = "
                         "'sliced' ORDER BY host FORMAT TabSeparatedRaw"),
            "host-0\t2\nhost-1\t-1\nhost-2\t0\n");
}

// A pod whose history predates the fleet store: its stored captures are queued once asked,
// and asking again doubles nothing.
TEST_F(ReplicationTest, StoredCapturesAreBackfilledOnce) {
  for (int i = 0; i < 3; ++i) {  // stored before [fleet] was on: not queued
    Store(SyntheticPod(absl::StrCat("old", i), kStart + i * kHour, "fusion.5", 1'000'000, 1, 10));
  }
  store_->outbox().QueueForFleet(100);
  EXPECT_EQ(store_->outbox().Backlog()->pending, 0);
  auto queued = store_->outbox().QueueStored(kStart + kHour);  // the last two
  ASSERT_OK(queued);
  EXPECT_EQ(*queued, 2);
  replicator_ = MakeReplicator();
  ASSERT_OK(replicator_->Prepare());
  Drain(*replicator_);
  EXPECT_EQ(Count("captures"), 2);
  const std::string before = Counts();
  ASSERT_EQ(*store_->outbox().QueueStored(0), 3);
  Drain(*replicator_);
  EXPECT_EQ(Count("captures"), 3);
  EXPECT_EQ(Count("captures", "capture_id = 'old1'"), 1);
  EXPECT_EQ(Count("kernel_stats"), 3 * 2 * 2);
}

TEST_F(ReplicationTest, AFullBacklogKeepsTheOldest) {
  store_->outbox().QueueForFleet(2);
  for (int i = 0; i < 3; ++i) {
    Store(SyntheticPod(absl::StrCat("b", i), kStart + i * kHour, "fusion.4", 1'000'000, 1, 10));
  }
  auto b = store_->outbox().Backlog();
  ASSERT_OK(b);
  EXPECT_EQ(b->pending, 2);
  EXPECT_EQ(b->not_queued, 1);
  auto pending = store_->outbox().Pending(10);
  ASSERT_OK(pending);
  ASSERT_EQ(pending->size(), 2u);
  EXPECT_EQ((*pending)[0], "b0");
  EXPECT_EQ((*pending)[1], "b1");
}

}  // namespace
}  // namespace podprof::fleet
