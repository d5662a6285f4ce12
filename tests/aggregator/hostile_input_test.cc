// Issue #54: a hostile or broken caller never takes podprof-aggregator down, and bad input gets
// a clear error naming the problem. A real aggregator process on loopback, over gRPC and HTTP
// (curl), with a real SQLite file.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "harness/wait.h"
#include "nlohmann/json.hpp"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "tests/util/child_process.h"
#include "tests/util/curl.h"
#include "tests/util/status_matchers.h"
#include "tests/util/trace_fixtures.h"

namespace podprof::aggregator {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;
using testing::Curl;

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           absl::StrCat("hostile_", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                        "_", getpid());
    fs::remove_all(dir_);
    agg_ = testing::StartBuiltAggregator(dir_);
    ASSERT_TRUE(agg_->ready());
    base_ = absl::StrCat("http://127.0.0.1:", agg_->info()["http_port"].get<int>());
    stub_ = v1::Aggregator::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", agg_->info()["port"].get<int>()),
                            grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    stub_.reset();
    agg_.reset();
    fs::remove_all(dir_);
  }
  // POSTs `body` (written to a file: no shell quoting of hostile bytes) as JSON.
  testing::CurlResult Post(const std::string& path, const std::string& body) {
    const fs::path f = dir_ / "body.json";
    std::ofstream(f, std::ios::binary) << body;
    return Curl(absl::StrCat("-H 'Content-Type: application/json' --data-binary @", f.string(), " ",
                             base_, path));
  }
  // Whether the aggregator still answers both APIs.
  void ExpectServing() {
    EXPECT_EQ(Curl(base_ + "/api/v1/captures").status, 200);
    grpc::ClientContext ctx;
    v1::ListCapturesResponse list;
    EXPECT_OK(stub_->ListCaptures(&ctx, v1::ListCapturesRequest(), &list));
  }
  grpc::Status Import(const std::string& host, const std::string& bytes,
                      const std::map<std::string, std::string>& labels,
                      v1::ImportXSpaceResponse* resp) {
    grpc::ClientContext ctx;  // the aggregator bounds an import's waits itself (60 s idle)
    auto writer = stub_->ImportXSpace(&ctx, resp);
    bool first = true;
    for (size_t off = 0; off < bytes.size(); off += 256 << 10) {
      v1::ImportXSpaceChunk chunk;
      chunk.set_host_name(host);
      chunk.set_data(bytes.substr(off, 256 << 10));
      if (first) chunk.mutable_labels()->insert(labels.begin(), labels.end());
      first = false;
      writer->Write(chunk);
    }
    writer->WritesDone();
    return writer->Finish();
  }
  fs::path dir_;
  std::string base_;
  std::unique_ptr<testing::ChildProcess> agg_;
  std::unique_ptr<v1::Aggregator::Stub> stub_;
};

// Item 1: valid JSON whose status, alertname or receiver is not a string killed the aggregator
// (nlohmann's value() threw type_error.302, uncaught).
TEST_F(HostileInputTest, AWebhookWithFieldsOfTheWrongTypeIsA400NamingTheField) {
  struct Case {
    const char* body;
    const char* field;
  } cases[] = {
      {R"({"alerts": [{"status": 1}]})", "alerts[0].status"},
      {R"({"alerts": [{"status": "resolved"}, {"labels": {"alertname": {"x": 1}}}]})",
       "alerts[1].labels.alertname"},
      {R"({"alerts": [{"status": "firing"}], "receiver": []})", "receiver"},
      {R"({"reason": 5})", "reason"},
  };
  for (const Case& c : cases) {
    const bool snapshot = absl::StartsWith(c.body, R"({"reason")");
    testing::CurlResult r =
        Post(snapshot ? "/api/v1/snapshots" : "/api/v1/snapshots/webhook", c.body);
    EXPECT_EQ(r.status, 400) << c.body << " -> " << r.body;
    EXPECT_TRUE(absl::StrContains(r.body, c.field)) << r.body;
    EXPECT_TRUE(absl::StrContains(r.body, "must be a string")) << r.body;
  }
  ExpectServing();
}

// Item 3: a kernel name that is not UTF-8 (from an imported XSpace) killed the aggregator on the
// HTTP read of its kernels (type_error.316) and made gRPC answers unparseable by the client.
TEST_F(HostileInputTest, KernelNamesThatAreNotUtf8AreAnsweredEscaped) {
  std::string bytes = testing::ReadTestFile(testing::FixturePath(testing::kTpuFixture));
  ASSERT_TRUE(absl::StrContains(bytes, "fusion"));
  bytes = absl::StrReplaceAll(bytes, {{"fusion", "\xFE\xFFsion"}});  // same length
  v1::ImportXSpaceResponse imported;
  ASSERT_OK(Import("tpu-host", bytes, {}, &imported));
  const std::string id = imported.capture_id();
  ASSERT_FALSE(id.empty());

  grpc::ClientContext ctx;
  v1::GetKernelStatsRequest req;
  req.set_capture_id(id);
  v1::GetKernelStatsResponse stats;
  ASSERT_OK(stub_->GetKernelStats(&ctx, req, &stats));
  bool escaped = false;
  for (const auto& row : stats.stats()) {
    escaped = escaped || absl::StrContains(row.kernel().op_name(), "\\xFE\\xFFsion");
  }
  EXPECT_TRUE(escaped);

  testing::CurlResult json = Curl(base_ + "/api/v1/captures/" + id + "/kernels");
  EXPECT_EQ(json.status, 200) << json.body;
  EXPECT_FALSE(nlohmann::json::parse(json.body, nullptr, false).is_discarded());
  EXPECT_TRUE(absl::StrContains(json.body, R"(\\xFE\\xFFsion)")) << json.body.substr(0, 500);
  testing::CurlResult csv = Curl(base_ + "/api/v1/captures/" + id + "/kernels?format=csv");
  EXPECT_EQ(csv.status, 200);
  EXPECT_TRUE(absl::StrContains(csv.body, R"(\xFE\xFFsion)"));
  EXPECT_EQ(Curl(base_ + "/api/v1/captures/" + id + "/timeline").status, 200);
  ExpectServing();
}

// Item 6: a label key holding '"' could never be selected (it was spliced into a JSON path).
TEST_F(HostileInputTest, ALabelKeyWithAQuoteIsSelectedByItsExactBytes) {
  v1::ImportXSpaceResponse imported;
  ASSERT_OK(Import("tpu-host", testing::ReadTestFile(testing::FixturePath(testing::kTpuFixture)),
                   {{"te\"am", "a\\b"}}, &imported));
  grpc::ClientContext ctx;
  v1::ListCapturesRequest req;
  (*req.mutable_label_selector())["te\"am"] = "a\\b";
  v1::ListCapturesResponse list;
  ASSERT_OK(stub_->ListCaptures(&ctx, req, &list));
  ASSERT_EQ(list.captures_size(), 1);
  EXPECT_EQ(list.captures(0).capture_id(), imported.capture_id());
  grpc::ClientContext ctx2;
  (*req.mutable_label_selector())["te\"am"] = "a";
  ASSERT_OK(stub_->ListCaptures(&ctx2, req, &list));
  EXPECT_EQ(list.captures_size(), 0);
}

// Item 7: in insecure mode host names such as "../../x", a newline or 100 kB were registered.
TEST_F(HostileInputTest, RegisterRefusesHostNamesThatAreNotNames) {
  for (const std::string& name :
       {std::string("../../x"), std::string("a\nb"), std::string(100'000, 'h'),
        std::string(".hidden"), std::string("a/b"), std::string("a..b")}) {
    grpc::ClientContext ctx;
    v1::RegisterRequest req;
    req.mutable_host()->set_host_name(name);
    req.mutable_host()->set_agent_address("127.0.0.1:1");
    v1::RegisterResponse resp;
    grpc::Status s = stub_->Register(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << name.substr(0, 20);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "host name")) << s.error_message();
  }
  grpc::ClientContext ctx;
  v1::RegisterRequest ok;
  ok.mutable_host()->set_host_name("tpu-v5p_0.pod-a");
  ok.mutable_host()->set_agent_address("127.0.0.1:1");
  v1::RegisterResponse resp;
  EXPECT_OK(stub_->Register(&ctx, ok, &resp));
}

// Item 7: the XProf tar download names its members from host names; an imported host named
// "../../x" gave a member that unpacks outside the folder.
TEST_F(HostileInputTest, TheXprofTarHasNoMemberOutsideItsFolder) {
  v1::ImportXSpaceResponse imported;
  ASSERT_OK(Import("../../evil", testing::ReadTestFile(testing::FixturePath(testing::kTpuFixture)),
                   {}, &imported));
  const std::string tar = (dir_ / "x.tar").string();
  testing::CurlResult r =
      Curl(base_ + "/api/v1/captures/" + imported.capture_id() + "/export?format=xprof", tar);
  EXPECT_EQ(r.status, 200);
  const std::string list = (dir_ / "members.txt").string();
  ASSERT_EQ(std::system(("tar -tf " + tar + " > " + list).c_str()), 0);
  const std::string members = testing::ReadTestFile(list);
  for (absl::string_view line : absl::StrSplit(members, '\n', absl::SkipEmpty())) {
    EXPECT_FALSE(absl::StartsWith(line, "/")) << line;
    for (absl::string_view part : absl::StrSplit(line, '/')) EXPECT_NE(part, "..") << line;
  }
  EXPECT_TRUE(absl::StrContains(members, "/_._.._evil.xplane.pb")) << members;
  ExpectServing();
}

}  // namespace
}  // namespace podprof::aggregator

namespace podprof::aggregator {
namespace {

// Issue #59: SQL from a hostile caller (POST /api/v1/sql, and the same through MCP's query_sql)
// is refused before it runs when it would write, attach, load or reach a file, and stopped by
// its limits when it would run away; two runaways at once are the most, and meanwhile the
// aggregator answers everyone else.
TEST_F(HostileInputTest, HostileSqlIsRefusedOrStoppedWhileTheAggregatorServes) {
  v1::ImportXSpaceResponse imported;
  ASSERT_OK(Import("tpu-host", testing::ReadTestFile(testing::FixturePath(testing::kTpuFixture)),
                   {}, &imported));
  const std::string id = imported.capture_id();
  // The body written by hand, so that bytes that are not UTF-8 reach the aggregator as they
  // are (the statements here hold no '"', '\\' or control character).
  auto sql = [&](const std::string& query) {
    return Post("/api/v1/sql",
                absl::StrCat(R"({"capture": ")", id, R"(", "query": ")", query, R"("})"));
  };
  const struct {
    std::string query;
    const char* why;
  } refused[] = {
      {"ATTACH DATABASE '/etc/passwd' AS p", "ATTACH"},
      {"SELECT load_extension('/lib/x86_64-linux-gnu/libc.so.6')", "load_extension"},
      {"DELETE FROM events", "may not be modified"},
      {"CREATE TABLE t AS SELECT * FROM events", "schema change"},
      {"PRAGMA writable_schema = ON", "PRAGMA"},
      {"SELECT 1; DROP TABLE events", "one statement"},
      {"SELECT \xFF\xFE FROM events", "not valid JSON"},
  };
  for (const auto& r : refused) {
    testing::CurlResult answer = sql(r.query);
    EXPECT_EQ(answer.status, 400) << r.query << " -> " << answer.body;
    EXPECT_TRUE(absl::StrContains(answer.body, r.why)) << answer.body;
  }
  // A value repeated past the memory budget is stopped as its rows come back.
  testing::CurlResult big = sql("SELECT zeroblob(16000000) FROM events");
  EXPECT_EQ(big.status, 429) << big.body.substr(0, 300);
  EXPECT_TRUE(absl::StrContains(big.body, "memory budget")) << big.body.substr(0, 300);
  // The same refusal through MCP's query_sql is the tool's error.
  testing::CurlResult mcp = Post(
      "/mcp", nlohmann::json{{"jsonrpc", "2.0"},
                             {"id", 1},
                             {"method", "tools/call"},
                             {"params",
                              {{"name", "query_sql"},
                               {"arguments", {{"capture", id}, {"query", "ATTACH 'x' AS y"}}}}}}
                  .dump());
  EXPECT_EQ(mcp.status, 200) << mcp.body;
  EXPECT_TRUE(absl::StrContains(mcp.body, R"("isError":true)")) << mcp.body;
  EXPECT_TRUE(absl::StrContains(mcp.body, "ATTACH")) << mcp.body;

  // Two runaways: a recursive CTE without end, and the events joined with themselves thrice,
  // each started once the one before it runs (/metrics counts the statements running).
  auto running = [&](int n) {
    return testing::WaitFor(
        [&] {
          return absl::StrContains(Curl(base_ + "/metrics").body,
                                   absl::StrCat("podprof_sql_statements_running ", n, "\n"));
        },
        absl::Seconds(8), absl::Milliseconds(100));
  };
  auto endless = std::async(std::launch::async, [&] {
    return sql(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) "
        "SELECT max(x) FROM n");
  });
  ASSERT_TRUE(running(1));
  auto join = std::async(std::launch::async,
                         [&] { return sql("SELECT count(*) FROM events a, events b, events c"); });
  ASSERT_TRUE(running(2));
  // A third statement is refused while both run ...
  testing::CurlResult third = sql("SELECT count(*) FROM events");
  EXPECT_EQ(third.status, 429) << third.body;
  EXPECT_TRUE(absl::StrContains(third.body, "statements are running")) << third.body;
  // ... and everyone else is answered meanwhile, before either runaway has stopped.
  ExpectServing();
  EXPECT_EQ(Curl(base_ + "/api/v1/captures/" + id + "/kernels").status, 200);
  EXPECT_EQ(endless.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_EQ(join.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  for (auto* runaway : {&endless, &join}) {
    testing::CurlResult stopped = runaway->get();
    EXPECT_EQ(stopped.status, 504) << stopped.body;
    EXPECT_TRUE(absl::StrContains(stopped.body, "time limit of 10 s")) << stopped.body;
  }
  EXPECT_EQ(sql("SELECT count(*) AS n FROM events").status, 200);
  ExpectServing();
}

}  // namespace
}  // namespace podprof::aggregator
