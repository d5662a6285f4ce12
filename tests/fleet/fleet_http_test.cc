// The aggregator's /api/v1/fleet routes against a real ClickHouse: the answers are
// `podprof fleet`'s (the CSV byte for byte, the JSON the same object with `truncated`), bounded,
// refused with a reason without [fleet], and read by a viewer over HTTPS as the pod is.
// Captures start at fixed instants years apart, so that `since=3650d` holds them all and splits
// them into two periods whatever day the test runs on (until 2030): the test reads no clock.
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "fleet/replicator.h"
#include "gtest/gtest.h"
#include "harness/clickhouse_server.h"
#include "ingest/capture_ingest.h"
#include "nlohmann/json.hpp"
#include "tests/fleet/fleet_test_util.h"
#include "tests/util/child_process.h"
#include "tests/util/curl.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ChildProcess;
using testing::ClickHouseServer;
using testing::Curl;
using testing::RunPodprof;

constexpr int64_t kDay = 86'400'000'000'000;
constexpr int64_t k2010 = 1'262'304'000'000'000'000;  // 2010-01-01, the baseline period
constexpr int64_t k2024 = 1'704'067'200'000'000'000;  // 2024-01-01, the current period

fs::path TestDir(const char* prefix) {
  fs::path d = fs::path(::testing::TempDir()) /
               absl::StrCat(prefix, ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                            "_", getpid());
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string HttpBase(const ChildProcess& agg, const char* scheme = "http") {
  return absl::StrCat(scheme, "://127.0.0.1:", agg.info()["http_port"].get<int>());
}

// One ClickHouse holding pod-r's captures (fusion.9 at 1.00 ms in 2010, 1.25 ms in 2024, copy.1
// steady), replicated with the real replicator, and an aggregator whose [fleet] names it.
class FleetHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::HaveClickHouse()) {
      GTEST_SKIP() << "clickhouse-server is not installed (scripts/install-deps.sh installs it)";
    }
    dir_ = TestDir("fleethttp_");
    std::ofstream(dir_ / "writer.pw") << "w-secret\n";
    std::ofstream(dir_ / "reader.pw") << "r-secret\n";
    ch_ = std::make_unique<ClickHouseServer>(dir_ / "ch", testing::FreePorts());
    ASSERT_OK(ch_->started());
    ASSERT_EQ(ch_->Sql("CREATE DATABASE podprof"), "");
    Replicate();
  }
  void TearDown() override {
    ch_.reset();
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);
  }

  void Replicate() {
    auto store = storage::Store::Open((dir_ / "pod.db").string());
    ASSERT_OK(store);
    (*store)->outbox().QueueForFleet(100);
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK(ingest::StoreCapture(
          (*store)->writer(),
          testing::SyntheticPod(absl::StrCat("old", i), k2010 + i * kDay, "fusion.9", 1'000'000'000,
                                2, 100, 5'000'000, {{"job", "train"}})));
      ASSERT_OK(ingest::StoreCapture(
          (*store)->writer(),
          testing::SyntheticPod(absl::StrCat("new", i), k2024 + i * kDay, "fusion.9", 1'250'000'000,
                                2, 100, 5'000'000, {{"job", i == 0 ? "serve" : "train"}})));
    }
    FakeClock clock(k2024 + 10 * kDay);
    fleet::ReplicatorOptions o;
    o.pod = "pod-r";
    fleet::Replicator r(**store, ch_->Client("writer"), o, clock);
    ASSERT_OK(r.Prepare());
    while (*r.ReplicateBatch() > 0) {
    }
  }

  // `toml` with [fleet] naming the ClickHouse as its writer.
  std::string FleetToml() const {
    return absl::StrCat("[fleet]\nclickhouse_url = \"", ch_->url(),
                        "\"\nuser = \"writer\"\npassword_file = \"", (dir_ / "writer.pw").string(),
                        "\"\npod = \"pod-a\"\n");
  }
  std::unique_ptr<ChildProcess> Aggregator() {
    fs::create_directories(dir_ / "agg");
    std::ofstream(dir_ / "agg" / "agg.toml") << FleetToml();
    auto agg = testing::StartAggregator(std::string(PODPROF_BIN_DIR) + "/podprof-aggregator",
                                        dir_ / "agg");
    EXPECT_TRUE(agg->ready());
    return agg;
  }
  std::string Cli(const std::string& args) {
    auto r = RunPodprof(absl::StrCat("fleet ", args, " --clickhouse ", ch_->url(),
                                     " --clickhouse-user reader --clickhouse-password-file ",
                                     (dir_ / "reader.pw").string()));
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    return r.out;
  }

  fs::path dir_;
  std::unique_ptr<ClickHouseServer> ch_;
};

TEST_F(FleetHttpTest, TheRoutesAnswerAsTheCliDoes) {
  auto agg = Aggregator();
  const std::string api = HttpBase(*agg) + "/api/v1/fleet";
  struct Case {
    std::string route, cli;
  };
  const Case cases[] = {
      {"history?regex=fusion&since=3650d", "history fusion --since 3650d"},
      {"history?regex=.&since=3650d&pod=pod-r&label=job=train",
       "history . --since 3650d --pod pod-r --label job=train"},
      {"top?since=3650d", "top --since 3650d"},
      {"top?since=3650d&by=pod", "top --since 3650d --by pod"},
      {"top?since=3650d&by=host&top=3", "top --since 3650d --by host --top 3"},
      {"regressions?since=3650d", "regressions --since 3650d"},
      {"regressions?since=3650d&threshold=0.5", "regressions --since 3650d --threshold 0.5"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.route);
    const std::string sep = absl::StrContains(c.route, '?') ? "&" : "?";
    testing::CurlResult csv = Curl("'" + api + "/" + c.route + sep + "format=csv'");
    EXPECT_EQ(csv.status, 200) << csv.body;
    EXPECT_EQ(csv.body, Cli(c.cli + " --format csv"));
    testing::CurlResult js = Curl("'" + api + "/" + c.route + "'");
    ASSERT_EQ(js.status, 200) << js.body;
    json want = json::parse(Cli(c.cli + " --format json"));
    want["truncated"] = false;
    EXPECT_EQ(json::parse(js.body), want);
  }
  // The answers hold what was stored: fusion.9 regressed in pod-r, copy.1 did not.
  json reg = json::parse(Curl("'" + api + "/regressions?since=3650d'").body);
  ASSERT_EQ(reg["kernels"].size(), 2u) << reg.dump();
  EXPECT_EQ(reg["kernels"][0]["kernel"], "fusion.9");
  EXPECT_TRUE(reg["kernels"][0]["p50_regressed"].get<bool>());
  EXPECT_EQ(reg["kernels"][0]["baseline_captures"], 3);
  EXPECT_EQ(reg["kernels"][0]["candidate_captures"], 3);
  // Since 2016 (3650 days back from 2026) and trained: new1 and new2.
  json hist =
      json::parse(Curl("'" + api + "/history?regex=%5Efusion&since=3650d&label=job=train'").body);
  ASSERT_EQ(hist["points"].size(), 2u) << hist.dump();
  EXPECT_EQ(hist["points"][0]["capture"], "new1");
}

TEST_F(FleetHttpTest, AnswersAreBounded) {
  auto agg = Aggregator();
  const std::string api = HttpBase(*agg) + "/api/v1/fleet";
  json all = json::parse(Curl("'" + api + "/history?regex=.&since=7300d'").body);
  ASSERT_EQ(all["points"].size(), 12u) << all.dump();  // 6 captures x 2 kernels
  EXPECT_FALSE(all["truncated"].get<bool>());
  json one = json::parse(Curl("'" + api + "/history?regex=.&since=7300d&limit=1'").body);
  ASSERT_EQ(one["points"].size(), 1u);
  EXPECT_TRUE(one["truncated"].get<bool>());
  EXPECT_EQ(one["points"][0], all["points"][0]);
  json reg = json::parse(Curl("'" + api + "/regressions?since=3650d&limit=1'").body);
  ASSERT_EQ(reg["kernels"].size(), 1u);
  EXPECT_TRUE(reg["truncated"].get<bool>());
  EXPECT_EQ(reg["kernels"][0]["kernel"], "fusion.9");  // the regression stays, the rest goes
  json top = json::parse(Curl("'" + api + "/top?since=3650d&top=1'").body);
  EXPECT_EQ(top["rows"].size(), 1u);
}

TEST_F(FleetHttpTest, BadParametersAreRefusedNamingThem) {
  auto agg = Aggregator();
  const std::string api = HttpBase(*agg) + "/api/v1/fleet";
  for (const auto& [route, named] :
       std::vector<std::pair<std::string, std::string>>{{"history", "regex"},
                                                        {"history?regex=fusion(", "regex"},
                                                        {"history?regex=x&since=-1d", "since"},
                                                        {"history?regex=x&label=job", "label"},
                                                        {"top?by=chip", "by 'chip'"},
                                                        {"top?top=x", "top"},
                                                        {"regressions?threshold=-1", "threshold"},
                                                        {"regressions?format=xml", "format"}}) {
    testing::CurlResult r = Curl("'" + api + "/" + route + "'");
    EXPECT_EQ(r.status, 400) << route << ": " << r.body;
    EXPECT_TRUE(absl::StrContains(r.body, named)) << route << ": " << r.body;
  }
}

TEST_F(FleetHttpTest, AViewerReadsTheFleetOverHttps) {
  const fs::path certs = dir_ / "certs";
  auto make = [&](const std::string& args) {
    const std::string cmd =
        absl::StrCat(PODPROF_SOURCE_DIR, "/scripts/make-certs.sh --dir ", certs.string(),
                     " --ca ca --days 2 ", args, " >/dev/null 2>&1");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  };
  make("ca");
  make("aggregator aggregator 127.0.0.1");
  make("viewer viewer-bob");
  make("agent host-0 127.0.0.1");
  auto p = [&](const std::string& f) { return (certs / f).string(); };
  fs::create_directories(dir_ / "tls");
  std::ofstream(dir_ / "tls" / "agg.toml")
      << "listen = \"127.0.0.1:0\"\n[tls]\ncert = \"" << p("aggregator.crt") << "\"\nkey = \""
      << p("aggregator.key") << "\"\nca = \"" << p("ca.crt")
      << "\"\n[http]\nlisten = \"127.0.0.1:0\"\n"
      << FleetToml();
  const std::string in = (dir_ / "tls").string();
  ChildProcess agg(
      {std::string(PODPROF_BIN_DIR) + "/podprof-aggregator", "--config=" + in + "/agg.toml",
       "--db=" + in + "/pod.db", "--ready-file=" + in + "/agg.json"},
      in + "/agg.json");
  ASSERT_TRUE(agg.ready());
  const std::string url = HttpBase(agg, "https") + "/api/v1/fleet/top?since=3650d&format=csv";
  auto as = [&](const std::string& who) {
    return absl::StrCat("--cacert ", p("ca.crt"), " --cert ", p(who + ".crt"), " --key ",
                        p(who + ".key"), " '", url, "'");
  };
  // A viewer's certificate carries no role: reading needs none.
  testing::CurlResult viewer = Curl(as("viewer-bob"));
  EXPECT_EQ(viewer.status, 200) << viewer.body;
  EXPECT_EQ(viewer.body, Cli("top --since 3650d --format csv"));
  // An agent's certificate is a known client too: it reads what a viewer reads.
  EXPECT_EQ(Curl(as("host-0")).status, 200);
  // Without a certificate of the CA nothing is read.
  testing::CurlResult anonymous = Curl("--cacert " + p("ca.crt") + " '" + url + "'");
  EXPECT_NE(anonymous.status, 200) << anonymous.body;
  EXPECT_FALSE(absl::StrContains(anonymous.body, "pod-r")) << anonymous.body;
}

// Without [fleet] the routes say why there is nothing to ask (no ClickHouse needed).
TEST(FleetHttpWithoutFleetTest, TheRoutesSayThereIsNoFleetStore) {
  const fs::path dir = TestDir("fleethttp_none_");
  auto agg = testing::StartBuiltAggregator(dir);
  ASSERT_TRUE(agg->ready());
  for (const char* route : {"history?regex=fusion", "top", "regressions?format=csv"}) {
    testing::CurlResult r = Curl(absl::StrCat("'", HttpBase(*agg), "/api/v1/fleet/", route, "'"));
    EXPECT_EQ(r.status, 404) << route;
    EXPECT_TRUE(absl::StrContains(r.body, "this aggregator has no [fleet] ClickHouse configured"))
        << route << ": " << r.body;
  }
  agg.reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace podprof
