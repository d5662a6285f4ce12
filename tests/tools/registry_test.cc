// The tool registry against what it declares (issue #59): its entries are well-formed (names,
// params, examples, schemas), every route the aggregator serves and every `podprof` command is
// a tool or a NotATool with a reason (and no entry names one that does not exist), and each
// viewer tool's route, asked through the real router on a real store, answers with the keys the
// tool declares. The Python client is held to it by tests/python/test_tools.py.
#include "tools/registry.h"

#include <algorithm>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "aggregator/api/http_api.h"
#include "aggregator/api/queries.h"
#include "aggregator/api/store_reads.h"
#include "aggregator/capture/registry.h"
#include "aggregator/recorder/telemetry.h"
#include "aggregator/recorder/triggers.h"
#include "cli/cli_main.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/message.h"
#include "ingest/capture_ingest.h"
#include "storage/store.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"

namespace podprof::tools {
namespace {

using ::testing::IsEmpty;
using Json = nlohmann::json;

constexpr int64_t kT0 = 1'700'000'000'000'000'000;

// "GET /api/v1/captures/{}/kernels": a route with every placeholder alike, since the router
// names them {id} and {name} where the registry names them as the tools' params.
std::string RouteKey(const std::string& method, const std::string& pattern) {
  return method + " " + std::regex_replace(pattern, std::regex(R"(\{[^}/]*\})"), "{}");
}

// The NotATool entries that name a route ("GET /metrics"), as RouteKeys.
std::set<std::string> NotToolRoutes() {
  std::set<std::string> out;
  for (const NotATool& n : NotTools()) {
    const std::vector<std::string> words = absl::StrSplit(n.what, absl::MaxSplits(' ', 1));
    if (words.size() == 2 && (words[0] == "GET" || words[0] == "POST")) {
      out.insert(RouteKey(words[0], words[1]));
    }
  }
  return out;
}

// The routes of `routes` that are neither a tool's nor a NotATool: what the coverage test says
// must be empty.
std::vector<std::string> Uncovered(const std::vector<http::Router::RouteInfo>& routes) {
  std::set<std::string> known = NotToolRoutes();
  for (const Tool& t : Registry()) known.insert(RouteKey(t.method, t.route));
  std::vector<std::string> out;
  for (const http::Router::RouteInfo& r : routes) {
    if (known.count(RouteKey(r.method, r.pattern)) == 0) out.push_back(r.method + " " + r.pattern);
  }
  return out;
}

// The {placeholders} of a route, in order.
std::vector<std::string> Placeholders(const std::string& route) {
  std::vector<std::string> out;
  const std::regex re(R"(\{([^}/]*)\})");
  for (auto it = std::sregex_iterator(route.begin(), route.end(), re); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

// Whether an example's `value` has the JSON type `type` declares.
bool HasType(const Json& value, ParamType type) {
  switch (type) {
    case ParamType::kString:
      return value.is_string();
    case ParamType::kInteger:
      return value.is_number_integer();
    case ParamType::kNumber:
      return value.is_number();
    case ParamType::kBoolean:
      return value.is_boolean();
    case ParamType::kStringList:
      return value.is_array() &&
             std::all_of(value.begin(), value.end(), [](const Json& v) { return v.is_string(); });
    case ParamType::kIntegerList:
      return value.is_array() && std::all_of(value.begin(), value.end(),
                                             [](const Json& v) { return v.is_number_integer(); });
    case ParamType::kStringMap:
      return value.is_object() &&
             std::all_of(value.begin(), value.end(), [](const Json& v) { return v.is_string(); });
  }
  return false;
}

TEST(ToolRegistryTest, NamesAreUniqueSnakeCaseAndFound) {
  const std::regex snake("[a-z][a-z0-9]*(_[a-z0-9]+)*");
  std::set<std::string> names;
  for (const Tool& t : Registry()) {
    EXPECT_TRUE(std::regex_match(t.name, snake)) << t.name;
    EXPECT_TRUE(names.insert(t.name).second) << "two tools named " << t.name;
    EXPECT_EQ(FindTool(t.name), &t);
    EXPECT_FALSE(t.summary.empty()) << t.name;
    EXPECT_TRUE(t.method == "GET" || t.method == "POST") << t.name << ": " << t.method;
    EXPECT_EQ(t.route.rfind("/api/v1/", 0), 0u) << t.name << ": " << t.route;
    // A tool that changes the pod is the operator's and never a GET (a viewer's may be a
    // POST: a read whose arguments do not fit a URL).
    if (t.role == Role::kOperator) {
      EXPECT_EQ(t.method, "POST") << t.name;
    }
    EXPECT_FALSE(t.result_keys.empty()) << t.name;
  }
  EXPECT_EQ(FindTool("no_such_tool"), nullptr);
  EXPECT_EQ(RoleName(Role::kViewer), "viewer");
  EXPECT_EQ(RoleName(Role::kOperator), "operator");
  std::set<std::string> whats;
  for (const NotATool& n : NotTools()) {
    EXPECT_TRUE(whats.insert(n.what).second) << "listed twice: " << n.what;
    EXPECT_FALSE(n.why.empty()) << n.what;
  }
}

TEST(ToolRegistryTest, ParamsAreUniqueTypedAndCoverTheRoute) {
  for (const Tool& t : Registry()) {
    std::set<std::string> params;
    for (const Param& p : t.params) {
      EXPECT_TRUE(params.insert(p.name).second) << t.name << ": param " << p.name << " twice";
      EXPECT_FALSE(p.description.empty()) << t.name << "." << p.name;
      if (p.default_value.empty()) continue;
      // The default parses as its type: InputSchema gives it as that JSON value.
      const Json d = InputSchema(t)["properties"][p.name]["default"];
      EXPECT_TRUE(HasType(d, p.type)) << t.name << "." << p.name << " default " << d;
    }
    for (const std::string& name : Placeholders(t.route)) {
      const auto p = std::find_if(t.params.begin(), t.params.end(),
                                  [&](const Param& q) { return q.name == name; });
      ASSERT_NE(p, t.params.end()) << t.name << ": {" << name << "} of its route is no param";
      EXPECT_TRUE(p->required) << t.name << ": {" << name << "} is in the path, so required";
    }
  }
}

TEST(ToolRegistryTest, ExamplesNameOnlyDeclaredParamsAndEveryRequiredOne) {
  for (const Tool& t : Registry()) {
    const Json example = Json::parse(t.example, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(example.is_object()) << t.name << ": " << t.example;
    for (const auto& [name, value] : example.items()) {
      const auto p = std::find_if(t.params.begin(), t.params.end(),
                                  [&, n = name](const Param& q) { return q.name == n; });
      ASSERT_NE(p, t.params.end()) << t.name << ": the example names " << name;
      EXPECT_TRUE(HasType(value, p->type)) << t.name << "." << name << " = " << value;
    }
    for (const Param& p : t.params) {
      if (p.required) {
        EXPECT_TRUE(example.contains(p.name)) << t.name << " needs " << p.name;
      }
    }
  }
}

TEST(ToolRegistryTest, InputSchemaIsWhatMcpWants) {
  const Tool* t = FindTool("get_kernel_stats");
  ASSERT_NE(t, nullptr);
  const Json s = InputSchema(*t);
  EXPECT_EQ(s["type"], "object");
  EXPECT_EQ(s["required"], Json::array({"capture"}));
  EXPECT_EQ(s["properties"]["top"]["type"], "integer");
  EXPECT_EQ(s["properties"]["top"]["default"], 0);
  EXPECT_EQ(s["properties"]["sort"]["default"], "total");
  const Json telemetry = InputSchema(*FindTool("get_telemetry"));
  EXPECT_EQ(telemetry["properties"]["host"]["type"], "array");
  EXPECT_EQ(telemetry["properties"]["host"]["items"]["type"], "string");
  // The unit is said in the description, where a model reads it.
  EXPECT_THAT(telemetry["properties"]["since"]["description"].get<std::string>(),
              ::testing::HasSubstr("duration"));
  EXPECT_THAT(InputSchema(*FindTool("get_timeline"))["properties"]["from_ns"]["description"]
                  .get<std::string>(),
              ::testing::HasSubstr("unit: ns"));
  const Json capture = InputSchema(*FindTool("start_capture"));
  EXPECT_EQ(capture["properties"]["labels"]["type"], "object");
  EXPECT_EQ(capture["properties"]["slices"]["items"]["type"], "integer");
  const Json j = ToolJson(*t);
  EXPECT_EQ(j["name"], "get_kernel_stats");
  EXPECT_EQ(j["role"], "viewer");
  EXPECT_EQ(j["cli"], "stats");
  EXPECT_EQ(j["input_schema"], s);
  EXPECT_TRUE(j["example"].is_object());
}

// A one-host, one-chip capture of 1 ms starting `offset_ns` after kT0: two kernels.
ingest::CaptureInput Capture(const std::string& id, int64_t offset_ns) {
  trace::HostCapture c;
  c.host.name = "h0";
  c.host.chips.resize(1);
  for (const char* name : {"fusion.1", "copy.2"}) {
    trace::KernelDef k;
    k.module = "jit_step";
    k.name = name;
    k.category = name[0] == 'f' ? "fusion" : "copy";
    c.kernels.push_back(k);
  }
  trace::EventBlock b;
  b.line = "XLA Ops";
  b.base_ns = kT0 + offset_ns;
  for (int i = 0; i < 100; ++i) {
    b.start_ps.push_back(i * 10'000'000);
    b.duration_ps.push_back((i % 2 == 0 ? 6 : 2) * 1'000'000);
    b.kernel.push_back(static_cast<uint32_t>(i % 2));
    b.collective.push_back(0);
  }
  c.blocks.push_back(std::move(b));
  ingest::CaptureInput w;
  w.id = id;
  w.start_ns = kT0 + offset_ns;
  w.end_ns = w.start_ns + 1'000'000;
  ingest::HostInput h;
  h.host = "h0";
  h.capture = std::move(c);
  w.hosts.push_back(std::move(h));
  return w;
}

// The aggregator's routes as AggregatorRoutes builds them, over a real store holding two
// captures (cap-a, then cap-b) and triggers that take no snapshot. No orchestrator, access
// rules or metrics: the tests ask only reads of them, and construction reads none of those.
class ToolRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK_AND_ASSIGN(store_, storage::Store::Open(db_.path()));
    ASSERT_OK(ingest::StoreCapture(store_->writer(), Capture("cap-a", 0)));
    ASSERT_OK(ingest::StoreCapture(store_->writer(), Capture("cap-b", 10'000'000)));
    agents_ = std::make_unique<aggregator::Registry>(clock_, 1'000'000'000, 0);
    queries_ = std::make_unique<aggregator::Queries>(*store_, *agents_);
    reads_ = std::make_unique<aggregator::StoreReads>(*store_);
    hub_ = std::make_unique<aggregator::TelemetryHub>(nullptr, aggregator::TelemetryOptions{});
    triggers_ = std::make_unique<aggregator::TriggerLoop>(
        hub_.get(), clock_, aggregator::TriggerOptions{},
        [](const aggregator::Firing&) -> absl::StatusOr<std::string> {
          return absl::UnavailableError("no snapshots in this test");
        },
        /*run_thread=*/false);
    aggregator::HttpApiSources s;
    s.queries = queries_.get();
    s.reads = reads_.get();
    s.clock = &clock_;
    s.triggers = triggers_.get();
    router_ = aggregator::AggregatorRoutes(s);
  }

  // Asks `t`'s route with its example's arguments, the ids replaced by this store's: path
  // placeholders into the path, the rest into the query (lists joined with commas), or for a
  // POST into its JSON body.
  http::Response Ask(const Tool& t) {
    Json args = Json::parse(t.example);
    for (const char* id : {"capture", "candidate"}) {
      if (args.contains(id)) args[id] = "cap-b";
    }
    if (args.contains("baseline")) args["baseline"] = "cap-a";
    http::Request req;
    req.method = t.method;
    req.path = t.route;
    for (const std::string& name : Placeholders(t.route)) {
      // A path's kernel is an op name, exactly: one this store holds.
      const std::string value = name == "kernel" ? "fusion.1" : args[name].get<std::string>();
      req.path = std::regex_replace(req.path, std::regex("\\{" + name + "\\}"), value);
      args.erase(name);
    }
    if (t.method == "POST") {
      req.body = args.dump();
      req.content_type = "application/json";
      return router_->Handle(req);
    }
    for (const auto& [name, value] : args.items()) {
      if (value.is_string()) {
        req.query[name] = value.get<std::string>();
      } else if (value.is_array()) {
        std::vector<std::string> parts;
        for (const Json& v : value)
          parts.push_back(v.is_string() ? v.get<std::string>() : v.dump());
        req.query[name] = absl::StrJoin(parts, ",");
      } else {
        req.query[name] = value.dump();
      }
    }
    return router_->Handle(req);
  }

  FakeClock clock_{kT0 + 60'000'000'000};
  podprof::testing::TempDatabase db_{"tools"};
  std::unique_ptr<storage::Store> store_;
  std::unique_ptr<aggregator::Registry> agents_;
  std::unique_ptr<aggregator::Queries> queries_;
  std::unique_ptr<aggregator::StoreReads> reads_;
  std::unique_ptr<aggregator::TelemetryHub> hub_;
  std::unique_ptr<aggregator::TriggerLoop> triggers_;
  std::shared_ptr<http::Router> router_;
};

// Every route is a tool's or a NotATool. The routes are the real AggregatorRoutes', so a route
// added there (a new Add("GET", ...)) without a registry entry fails this test: the next test
// shows that it would.
TEST_F(ToolRoutesTest, EveryRouteIsAToolOrSaysWhyNot) {
  EXPECT_THAT(Uncovered(router_->Routes()), IsEmpty());
}

// (Compared with what is uncovered before, so that this test says only that an addition is
// caught, whatever else is uncovered.)
TEST_F(ToolRoutesTest, ARouteWithoutAnEntryIsCaught) {
  const std::vector<std::string> before = Uncovered(router_->Routes());
  router_->Add("GET", "/api/v1/captures/{id}/flamegraph",
               [](const http::Request&) { return http::Response::Text(200, "{}"); });
  const std::vector<std::string> after = Uncovered(router_->Routes());
  EXPECT_THAT(after, ::testing::Contains("GET /api/v1/captures/{id}/flamegraph"));
  EXPECT_EQ(after.size(), before.size() + 1);
}

// And no entry names a route that is not there (a renamed or removed route).
TEST_F(ToolRoutesTest, EveryEntryNamesARoute) {
  std::set<std::string> routes;
  for (const http::Router::RouteInfo& r : router_->Routes()) {
    routes.insert(RouteKey(r.method, r.pattern));
  }
  for (const Tool& t : Registry()) {
    EXPECT_EQ(routes.count(RouteKey(t.method, t.route)), 1u)
        << t.name << ": no route " << t.method << " " << t.route;
  }
  for (const std::string& key : NotToolRoutes()) {
    EXPECT_EQ(routes.count(key), 1u) << "NotTools() names " << key << ", which is no route";
  }
}

// The tools the store alone cannot answer: the fleet store's (ClickHouse; 404 without it).
const std::set<std::string> kNeedsClickHouse = {"get_fleet_history", "get_fleet_top",
                                                "get_fleet_regressions"};

// Each viewer tool's route, asked with its example, answers 200 with a JSON object holding
// every key the tool declares (no route answers a bare array).
TEST_F(ToolRoutesTest, ViewerToolsAnswerWithTheirResultKeys) {
  size_t asked = 0;
  for (const Tool& t : Registry()) {
    if (t.role != Role::kViewer || kNeedsClickHouse.count(t.name) > 0) continue;
    SCOPED_TRACE(t.name);
    const http::Response res = Ask(t);
    ASSERT_EQ(res.status, 200) << res.body;
    const Json body = Json::parse(res.body, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(body.is_object()) << res.body.substr(0, 200);
    for (const std::string& key : t.result_keys) {
      EXPECT_TRUE(body.contains(key)) << "no \"" << key << "\" in " << res.body.substr(0, 300);
    }
    ++asked;
  }
  // Every viewer tool but the three of the fleet store, which leaves most of them asked.
  EXPECT_GE(asked, 13u);
}

// Each CLI shape names a tool that has a command, once.
TEST(ToolCliShapeTest, ShapesNameToolsWithACommand) {
  std::set<std::string> seen;
  for (const CliShape& s : CliShapes()) {
    const Tool* t = FindTool(s.tool);
    ASSERT_NE(t, nullptr) << s.tool;
    EXPECT_FALSE(t->cli.empty()) << s.tool;
    EXPECT_FALSE(s.keys.empty()) << s.tool;
    EXPECT_TRUE(seen.insert(s.tool).second) << s.tool;
  }
}

// MCP's surface (POST /mcp, aggregator/api/mcp_routes.cc) is the registry's: tools/list lists
// every tool with its input schema and the paging arguments, and tools/call answers each viewer
// tool with what its route answers for the same arguments.
class McpTest : public ToolRoutesTest {
 protected:
  // One JSON-RPC message from `peer` (a plaintext caller: no certificate names).
  http::Response Post(const Json& message, const std::string& peer = "127.0.0.1:5000") {
    http::Request req;
    req.method = "POST";
    req.path = "/mcp";
    req.peer = peer;
    req.content_type = "application/json";
    req.body = message.dump();
    return router_->Handle(req);
  }
  Json Call(const std::string& tool, const Json& args) {
    const http::Response res = Post({{"jsonrpc", "2.0"},
                                     {"id", 7},
                                     {"method", "tools/call"},
                                     {"params", {{"name", tool}, {"arguments", args}}}});
    EXPECT_EQ(res.status, 200) << res.body;
    return Json::parse(res.body, nullptr, /*allow_exceptions=*/false);
  }
};

TEST_F(McpTest, ToolsListIsTheRegistry) {
  const http::Response init = Post({{"jsonrpc", "2.0"},
                                    {"id", 1},
                                    {"method", "initialize"},
                                    {"params", {{"protocolVersion", "2025-06-18"}}}});
  ASSERT_EQ(init.status, 200) << init.body;
  EXPECT_EQ(Json::parse(init.body)["result"]["protocolVersion"], "2025-06-18");
  const Json listed =
      Json::parse(Post({{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}}).body);
  const Json& tools = listed["result"]["tools"];
  ASSERT_EQ(tools.size(), Registry().size());
  for (size_t i = 0; i < tools.size(); ++i) {
    const Tool& t = Registry()[i];
    EXPECT_EQ(tools[i]["name"], t.name);
    Json schema = tools[i]["inputSchema"];
    EXPECT_TRUE(schema["properties"].contains("page_size")) << t.name;
    schema["properties"].erase("page_size");
    schema["properties"].erase("page_offset");
    EXPECT_EQ(schema, InputSchema(t)) << t.name;
  }
}

TEST_F(McpTest, EveryViewerToolAnswersAsItsRoute) {
  for (const Tool& t : Registry()) {
    if (t.role != Role::kViewer || kNeedsClickHouse.count(t.name) > 0) continue;
    SCOPED_TRACE(t.name);
    Json args = Json::parse(t.example);
    for (const char* id : {"capture", "candidate"}) {
      if (args.contains(id)) args[id] = "cap-b";
    }
    if (args.contains("baseline")) args["baseline"] = "cap-a";
    if (args.contains("kernel")) args["kernel"] = "fusion.1";
    args["page_size"] = 1000;
    const Json answer = Call(t.name, args);
    ASSERT_EQ(answer["result"]["isError"], false) << answer.dump().substr(0, 400);
    const Json& structured = answer["result"]["structuredContent"];
    Json route = Json::parse(Ask(t).body), via_mcp = structured["result"];
    // What the route answers, less what moves between two asks.
    route.erase("elapsed_ms");
    via_mcp.erase("elapsed_ms");
    EXPECT_EQ(via_mcp, route);
    EXPECT_EQ(structured["provenance"]["podprof_version"].is_string(), true);
    if (args.contains("capture")) {
      EXPECT_EQ(structured["provenance"]["capture"], "cap-b");
    }
  }
}

TEST_F(McpTest, ListsArePagedAndSaySo) {
  const Json answer =
      Call("get_kernel_stats", {{"capture", "cap-b"}, {"page_size", 1}, {"page_offset", 1}});
  const Json& s = answer["result"]["structuredContent"];
  ASSERT_EQ(s["result"]["rows"].size(), 1u) << s.dump();
  EXPECT_EQ(s["page"]["totals"]["rows"], 2);  // fusion.1 and copy.2
  EXPECT_FALSE(s["page"].contains("next_offset"));
  EXPECT_EQ(s["result"]["rows"][0]["kernel"],
            Json::parse(Ask(*FindTool("get_kernel_stats")).body)["rows"][1]["kernel"]);
}

TEST_F(McpTest, BadCallsAreJsonRpcErrorsNamingTheProblem) {
  const struct {
    Json params;
    const char* says;
  } bad[] = {
      {{{"name", "no_such_tool"}}, "no tool named"},
      {{{"name", "get_stragglers"}, {"arguments", Json::object()}}, "capture is required"},
      {{{"name", "get_stragglers"}, {"arguments", {{"capture", "cap-b"}, {"x", 1}}}},
       "no argument named x"},
      {{{"name", "get_stragglers"}, {"arguments", {{"capture", "a/b"}}}}, "without /"},
      {{{"name", "get_kernel_stats"}, {"arguments", {{"capture", "cap-b"}, {"page_size", 0}}}},
       "page_size"},
  };
  for (const auto& b : bad) {
    const http::Response res =
        Post({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "tools/call"}, {"params", b.params}});
    SCOPED_TRACE(b.says);
    const Json j = Json::parse(res.body);
    EXPECT_EQ(j["error"]["code"], -32602) << res.body;
    EXPECT_THAT(j["error"]["message"].get<std::string>(), ::testing::HasSubstr(b.says));
  }
  // An unknown capture is the tool's own error (its route's 404), not the protocol's.
  const Json missing = Call("get_stragglers", {{"capture", "nope"}});
  EXPECT_EQ(missing["result"]["isError"], true);
  EXPECT_THAT(missing["result"]["content"][0]["text"].get<std::string>(),
              ::testing::HasSubstr("404"));
  // A batch, a notification, an unknown method, and a plaintext caller beyond loopback.
  http::Request batch;
  batch.method = "POST";
  batch.path = "/mcp";
  batch.peer = "127.0.0.1:1";
  batch.body = "[{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}]";
  EXPECT_EQ(router_->Handle(batch).status, 400);
  EXPECT_EQ(Post({{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}).status, 202);
  EXPECT_EQ(
      Json::parse(Post({{"jsonrpc", "2.0"}, {"id", 4}, {"method", "nope"}}).body)["error"]["code"],
      -32601);
  const http::Response far =
      Post({{"jsonrpc", "2.0"}, {"id", 5}, {"method", "tools/list"}}, "192.0.2.7:4000");
  EXPECT_EQ(far.status, 403);
  EXPECT_THAT(far.body, ::testing::HasSubstr("loopback"));
}

// Every `podprof` command is a tool's `cli` or a NotATool "cli X", and each names a command
// there is. CommandNames() is the list CliMain builds, so a new command without an entry fails.
TEST(ToolCliTest, EveryCommandIsAToolOrSaysWhyNot) {
  const std::vector<std::string> commands = cli::CommandNames();
  ASSERT_THAT(commands, ::testing::Contains("stats"));
  ASSERT_THAT(commands, ::testing::Contains("fleet top"));
  std::set<std::string> known;
  for (const Tool& t : Registry()) {
    if (!t.cli.empty()) known.insert(t.cli);
  }
  for (const NotATool& n : NotTools()) {
    if (n.what.rfind("cli ", 0) == 0) known.insert(n.what.substr(4));
  }
  for (const std::string& c : commands) {
    EXPECT_EQ(known.count(c), 1u) << "`podprof " << c << "` is neither a tool's cli nor a "
                                  << "NotATool \"cli " << c << "\"";
  }
  const std::set<std::string> present(commands.begin(), commands.end());
  for (const std::string& c : known) {
    EXPECT_EQ(present.count(c), 1u) << "the registry names `podprof " << c << "`, no command";
  }
}

}  // namespace
}  // namespace podprof::tools
