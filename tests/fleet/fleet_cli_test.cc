// `podprof fleet` and the aggregator's [fleet] as a user meets them: real aggregators, real
// ClickHouse servers (two of them as the shards of one cluster), the real podprof binary.
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fleet/replicator.h"
#include "gtest/gtest.h"
#include "harness/clickhouse_server.h"
#include "harness/wait.h"
#include "ingest/capture_ingest.h"
#include "nlohmann/json.hpp"
#include "tests/fleet/fleet_test_util.h"
#include "tests/util/child_process.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ChildProcess;
using testing::ClickHouseServer;
using testing::RunPodprof;

class FleetCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveClickHouse()) {
      GTEST_SKIP() << "clickhouse-server is not installed (scripts/install-deps.sh installs it)";
    }
    dir_ =
        fs::path(::testing::TempDir()) /
        absl::StrCat("fleetcli_", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                     "_", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "writer.pw") << "w-secret\n";
    std::ofstream(dir_ / "reader.pw") << "r-secret\n";
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // An aggregator in dir_/name replicating as `pod` to `url` (through `cluster`, if any).
  std::unique_ptr<ChildProcess> Aggregator(const std::string& name, const std::string& pod,
                                           const std::string& url,
                                           const std::string& cluster = "") {
    fs::path d = dir_ / name;
    fs::create_directories(d);
    std::ofstream(d / "agg.toml") << "[fleet]\nclickhouse_url = \"" << url
                                  << "\"\nuser = \"writer\"\npassword_file = \""
                                  << (dir_ / "writer.pw").string() << "\"\npod = \"" << pod
                                  << "\"\ncluster = \"" << cluster
                                  << "\"\nflush_interval = \"100ms\"\n";
    auto agg = testing::StartAggregator(std::string(PODPROF_BIN_DIR) + "/podprof-aggregator", d);
    EXPECT_TRUE(agg->ready()) << "aggregator " << name << " did not start";
    return agg;
  }
  static std::string Addr(const ChildProcess& agg) {
    return absl::StrCat("--aggregator 127.0.0.1:", agg.info()["port"].get<int>());
  }
  std::string Reader(const ClickHouseServer& ch) {
    return absl::StrCat("--clickhouse ", ch.url(), " --clickhouse-user reader ",
                        "--clickhouse-password-file ", (dir_ / "reader.pw").string());
  }
  // `podprof fleet status` until nothing waits; its JSON.
  json WaitDrained(const ChildProcess& agg) {
    json j;
    const absl::Time give_up = absl::Now() + absl::Seconds(40);
    while (absl::Now() < give_up) {
      auto r = RunPodprof("fleet status --format json " + Addr(agg));
      j = json::parse(r.out, nullptr, false);
      if (!j.is_discarded() && j["pending"] == 0 && j["replicated"].get<int>() > 0) return j;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ADD_FAILURE() << "the backlog did not drain: " << j.dump();
    return j;
  }

  fs::path dir_;
};

TEST_F(FleetCliTest, TwoPodsOnTwoShardsAnswerAsOne) {
  const auto p1 = testing::FreePorts(), p2 = testing::FreePorts();
  ClickHouseServer ch1(dir_ / "ch1", p1, {p1, p2}), ch2(dir_ / "ch2", p2, {p1, p2});
  ASSERT_OK(ch1.started());
  ASSERT_OK(ch2.started());
  ASSERT_EQ(ch1.Sql("CREATE DATABASE podprof"), "");
  ASSERT_EQ(ch2.Sql("CREATE DATABASE podprof"), "");
  auto a = Aggregator("a", "pod-a", ch1.url(), "podprof_fleet");
  auto b = Aggregator("b", "pod-b", ch2.url(), "podprof_fleet");
  const std::string tpu = testing::FixturePath(testing::kTpuFixture);
  ASSERT_EQ(RunPodprof("import " + tpu + " --label job=a " + Addr(*a)).exit_code, 0);
  ASSERT_EQ(RunPodprof("import " + tpu + " --label job=b " + Addr(*b)).exit_code, 0);
  json sa = WaitDrained(*a);
  EXPECT_EQ(sa["pod"], "pod-a");
  WaitDrained(*b);
  // Each shard holds its own pod only; the Distributed tables answer for both.
  EXPECT_EQ(ch1.Sql("SELECT DISTINCT pod FROM podprof.captures"), "pod-a\n");
  EXPECT_EQ(ch2.Sql("SELECT DISTINCT pod FROM podprof.captures"), "pod-b\n");

  auto top = RunPodprof("fleet top --by pod --since 3650d --format json " + Reader(ch1));
  ASSERT_EQ(top.exit_code, 0) << top.err;
  json t = json::parse(top.out);
  ASSERT_EQ(t["rows"].size(), 2u) << top.out;
  EXPECT_EQ(t["rows"][0]["total_ps"], t["rows"][1]["total_ps"]);  // the same capture twice

  auto hist = RunPodprof("fleet history 'copy-start' --since 3650d --format json " + Reader(ch2));
  ASSERT_EQ(hist.exit_code, 0) << hist.err;
  json h = json::parse(hist.out);
  std::set<std::string> pods;
  for (const json& p : h["points"]) pods.insert(p["pod"].get<std::string>());
  EXPECT_EQ(pods, (std::set<std::string>{"pod-a", "pod-b"})) << hist.out;
  // Its percentiles are what the pod's own aggregator says.
  auto local = RunPodprof("history 'copy-start' --since 3650d --format json " + Addr(*a));
  ASSERT_EQ(local.exit_code, 0) << local.err;
  json l = json::parse(local.out);
  ASSERT_FALSE(l.empty());
  const json& lp = l[0]["points"][0];
  bool matched = false;
  for (const json& p : h["points"]) {
    if (p["pod"] == "pod-a" && p["kernel"] == l[0]["kernel"]) {
      EXPECT_EQ(p["p50_ps"], lp["p50_ps"]);
      EXPECT_EQ(p["p99_ps"], lp["p99_ps"]);
      EXPECT_EQ(p["count"], lp["count"]);
      matched = true;
    }
  }
  EXPECT_TRUE(matched) << hist.out << "\n" << local.out;

  auto csv = RunPodprof("fleet top --by kernel --since 3650d --format csv " + Reader(ch1));
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_TRUE(absl::StartsWith(csv.out, "pod,host,module,kernel,count,total_ps")) << csv.out;
  auto hosts = RunPodprof("fleet top --by host --since 3650d " + Reader(ch1));
  ASSERT_EQ(hosts.exit_code, 0) << hosts.err;
  EXPECT_TRUE(absl::StrContains(hosts.out, "pod-a/")) << hosts.out;

  // The reader may not write.
  auto write = ch1.Client("reader").Query("CREATE TABLE podprof.x (a UInt8) ENGINE = Memory");
  EXPECT_FALSE(write.ok());
}

TEST_F(FleetCliTest, AnAggregatorWithoutItsClickHouseServesAndCatchesUp) {
  const auto ports = testing::FreePorts();
  const std::string url = absl::StrCat("http://127.0.0.1:", ports.http);
  auto a = Aggregator("a", "pod-a", url);
  const std::string tpu = testing::FixturePath(testing::kTpuFixture);
  const std::string gpu = testing::FixturePath(testing::kGpuFixture);
  ASSERT_EQ(RunPodprof("import " + tpu + " " + Addr(*a)).exit_code, 0);
  ASSERT_EQ(RunPodprof("import " + gpu + " " + Addr(*a)).exit_code, 0);
  // The pod is served as ever.
  auto caps = RunPodprof("captures --format json " + Addr(*a));
  ASSERT_EQ(caps.exit_code, 0) << caps.err;
  // Until the replicator has tried and counted both captures as waiting.
  podprof::testing::WaitFor(
      [&] {
        return absl::StrContains(RunPodprof("fleet status " + Addr(*a)).out,
                                 "backlog: 2 captures waiting");
      },
      absl::Seconds(10), absl::Milliseconds(200));
  auto status = RunPodprof("fleet status " + Addr(*a));
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(absl::StrContains(status.out, "backlog: 2 captures waiting")) << status.out;
  EXPECT_TRUE(absl::StrContains(status.out, "[fleet] clickhouse_url = " + url)) << status.out;
  auto agents = RunPodprof("agents " + Addr(*a));
  EXPECT_TRUE(absl::StrContains(agents.out, "fleet: 2 captures waiting for " + url)) << agents.out;

  // ClickHouse comes up: the backlog drains by itself.
  ClickHouseServer ch(dir_ / "ch", ports);
  ASSERT_OK(ch.started());
  ASSERT_EQ(ch.Sql("CREATE DATABASE podprof"), "");
  WaitDrained(*a);
  EXPECT_EQ(ch.Sql("SELECT count() FROM podprof.captures"), "2\n");

  // A query without a server says what to give.
  auto none = RunPodprof("fleet top", "PODPROF_CLICKHOUSE=");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(none.err, "--clickhouse")) << none.err;
}

TEST_F(FleetCliTest, AKilledAggregatorResumesItsBacklog) {
  const auto ports = testing::FreePorts();
  ClickHouseServer ch(dir_ / "ch", ports);
  ASSERT_OK(ch.started());
  ASSERT_EQ(ch.Sql("CREATE DATABASE podprof"), "");
  auto a = Aggregator("a", "pod-a", ch.url());
  const std::string tpu = testing::FixturePath(testing::kTpuFixture);
  ASSERT_EQ(RunPodprof("import " + tpu + " " + Addr(*a)).exit_code, 0);
  WaitDrained(*a);
  // ClickHouse goes away, two more captures are stored, and the aggregator is killed.
  ch.Kill();
  ASSERT_EQ(RunPodprof("import " + tpu + " " + Addr(*a)).exit_code, 0);
  ASSERT_EQ(RunPodprof("import " + tpu + " " + Addr(*a)).exit_code, 0);
  a->Signal(SIGKILL);
  a->Wait();
  ASSERT_OK(ch.Start());
  fs::remove(dir_ / "a" / "agg.json");
  a = Aggregator("a", "pod-a", ch.url());
  WaitDrained(*a);
  EXPECT_EQ(ch.Sql("SELECT count(), uniqExact(capture_id) FROM podprof.captures"), "3\t3\n");
  EXPECT_EQ(ch.Sql("SELECT count() FROM podprof.kernel_rollups"),
            ch.Sql("SELECT count() FROM (SELECT DISTINCT capture_id, module, op_name, program_id, "
                   "hlo_hash FROM podprof.kernel_rollups)"));
}

TEST_F(FleetCliTest, RegressionsCompareThisWeekWithTheLast) {
  ClickHouseServer ch(dir_ / "ch", testing::FreePorts());
  ASSERT_OK(ch.started());
  ASSERT_EQ(ch.Sql("CREATE DATABASE podprof"), "");
  auto store = storage::Store::Open((dir_ / "pod.db").string());
  ASSERT_OK(store);
  (*store)->outbox().QueueForFleet(100);
  RealClock clock;
  const int64_t day = 86'400'000'000'000, now = clock.NowNs();
  for (int i = 0; i < 3; ++i) {
    // Last week at 1.00 ms, this week at 1.25 ms; copy.1 steady.
    ASSERT_OK(ingest::StoreCapture(
        (*store)->writer(), testing::SyntheticPod(absl::StrCat("old", i), now - (10 - i) * day,
                                                  "fusion.9", 1'000'000'000, 2, 100, 5'000'000)));
    ASSERT_OK(ingest::StoreCapture(
        (*store)->writer(), testing::SyntheticPod(absl::StrCat("new", i), now - (3 - i) * day,
                                                  "fusion.9", 1'250'000'000, 2, 100, 5'000'000)));
  }
  fleet::ReplicatorOptions o;
  o.pod = "pod-r";
  fleet::Replicator r(**store, ch.Client("writer"), o, clock);
  ASSERT_OK(r.Prepare());
  while (*r.ReplicateBatch() > 0) {
  }
  auto reg =
      RunPodprof("fleet regressions --since 7d --threshold 0.05 --format json " + Reader(ch));
  ASSERT_EQ(reg.exit_code, 0) << reg.err;
  json j = json::parse(reg.out);
  ASSERT_EQ(j["kernels"].size(), 2u) << reg.out;
  EXPECT_EQ(j["kernels"][0]["kernel"], "fusion.9");
  EXPECT_TRUE(j["kernels"][0]["p50_regressed"].get<bool>());
  EXPECT_NEAR(j["kernels"][0]["p50_change"].get<double>(), 0.25, 0.02);
  EXPECT_EQ(j["kernels"][0]["baseline_captures"], 3);
  EXPECT_EQ(j["kernels"][1]["kernel"], "copy.1");
  EXPECT_FALSE(j["kernels"][1]["p50_regressed"].get<bool>());
  auto table = RunPodprof("fleet regressions --since 7d " + Reader(ch));
  EXPECT_TRUE(absl::StrContains(table.out, "1 of 2 kernels regressed")) << table.out;
  EXPECT_TRUE(absl::StrContains(table.out, "REGRESSED (p50)")) << table.out;
}

}  // namespace
}  // namespace podprof
