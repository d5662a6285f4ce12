// POST /mcp: the Model Context Protocol over its streamable HTTP transport, on the aggregator's
// HTTP port (docs/AGENTS.md). Its tools are the registry's (tools/registry.h), each answered by
// calling the tool's own API route in-process with the caller's identity, so that an agent gets
// what the API gives, refused what the API refuses: the operator's tools need the operator role
// on the caller's certificate exactly as POST /api/v1/captures does. Over plaintext HTTP only
// loopback callers are served.
//
// Stateless: no session id is issued, so a client opens no GET stream and sends no DELETE (both
// answer 405); every request is answered in the POST's own response, as JSON. Answers are kept
// small: each list in a tool's answer is cut to `page_size` items (50 unless asked) from
// `page_offset`,
// and the page says how many there were; every answer carries its provenance. The paging
// arguments, page_offset and page_size, are MCP's own: a tool's `limit` (list_captures') is the
// route's.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "aggregator/api/http_api.h"
#include "http/json_body.h"
#include "nlohmann/json.hpp"
#include "podprof_version.h"
#include "report/sql_rows.h"
#include "tools/registry.h"

namespace podprof::aggregator {
namespace {

using http::Request;
using http::Response;
using nlohmann::json;

// The protocol revisions whose initialize handshake this server speaks; the newest is offered
// to a client that asks for one it does not know.
const std::set<std::string>& Revisions() {
  static const std::set<std::string> revisions = {"2025-03-26", "2025-06-18", "2025-11-25"};
  return revisions;
}
constexpr char kNewestRevision[] = "2025-11-25";

// JSON-RPC's error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;

constexpr int64_t kDefaultLimit = 50;
constexpr int64_t kMaxLimit = 1000;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Response Reply(const json& id, json result) {
  return Response::Text(200, Dump({{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}),
                        "application/json");
}

Response Failure(const json& id, int code, const std::string& message, int status = 200) {
  return Response::Text(
      status,
      Dump({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}}),
      "application/json");
}

bool LoopbackPeer(const std::string& peer) {
  return absl::StartsWith(peer, "127.") || absl::StartsWith(peer, "[::1]") ||
         absl::StartsWith(peer, "::1");
}

// The registry's input schema, with the paging every tool takes here.
json ToolListing(const tools::Tool& t) {
  json schema = tools::InputSchema(t);
  schema["properties"]["page_offset"] = {
      {"type", "integer"},
      {"minimum", 0},
      {"default", 0},
      {"description", "The first item of each list in the answer (paging)"}};
  schema["properties"]["page_size"] = {
      {"type", "integer"},
      {"minimum", 1},
      {"maximum", kMaxLimit},
      {"default", kDefaultLimit},
      {"description", "Items of each list in the answer at most (paging)"}};
  return {{"name", t.name},
          {"title", t.name},
          {"description", absl::StrCat(t.summary, " Role: ", tools::RoleName(t.role),
                                       ". Example arguments: ", t.example)},
          {"inputSchema", std::move(schema)}};
}

// A value as the route's query string reads it.
std::string QueryText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_array()) {
    std::vector<std::string> parts;
    for (const json& e : v) parts.push_back(QueryText(e));
    return absl::StrJoin(parts, ",");
  }
  return v.dump();
}

// Cuts every list of rows or records at the top of `answer` to [offset, offset + limit); the page
// says what was there.
json Page(json* answer, int64_t offset, int64_t limit) {
  json totals = json::object();
  bool more = false;
  if (answer->is_object()) {
    for (auto& [key, value] : answer->items()) {
      // Lists of rows or records; a list of names (a SQL answer's columns) stays whole.
      if (!value.is_array() || value.empty() || !(value[0].is_object() || value[0].is_array())) {
        continue;
      }
      const int64_t n = static_cast<int64_t>(value.size());
      totals[key] = n;
      json cut = json::array();
      for (int64_t i = offset; i < std::min(n, offset + limit); ++i) cut.push_back(value[i]);
      more = more || offset + limit < n;
      value = std::move(cut);
    }
  }
  json page = {{"offset", offset}, {"limit", limit}, {"totals", std::move(totals)}};
  if (more) page["next_offset"] = offset + limit;
  return page;
}

// Where a capture's answer comes from: the capture its arguments name (else the one its answer
// names, as start_capture's does), its hosts and window, its clock error.
json Provenance(const HttpApiSources& src, const json& args, const json& answer) {
  for (const json* from : {&args, &answer}) {
    if (!from->is_object()) continue;
    auto it = from->find("capture");
    if (it == from->end()) it = from->find("baseline");
    if (it == from->end() || !it->is_string()) continue;
    absl::StatusOr<storage::CaptureRow> row = src.queries->StoredCapture(it->get<std::string>());
    if (row.ok()) return report::ProvenanceJson(ProvenanceOf(*row));
  }
  return {{"podprof_version", kVersion}};
}

json ToolError(const std::string& message) {
  return {{"content", json::array({{{"type", "text"}, {"text", message}}})}, {"isError", true}};
}

// Long: one tool call from its arguments to its answer (check, route request, page,
// provenance), each step's refusal where it happens.
Response CallTool(const HttpApiSources& src, const http::Router& router, const Request& req,
                  const json& id, const json& params) {
  const auto name = params.find("name");
  if (name == params.end() || !name->is_string()) {
    return Failure(id, kInvalidParams, "tools/call: params.name (a string) is required");
  }
  const tools::Tool* tool = tools::FindTool(name->get<std::string>());
  if (tool == nullptr) {
    return Failure(id, kInvalidParams,
                   absl::StrCat("tools/call: no tool named \"", name->get<std::string>(),
                                "\" (tools/list lists them)"));
  }
  json args = params.value("arguments", json::object());
  if (!args.is_object()) {
    return Failure(id, kInvalidParams, "tools/call: params.arguments must be an object");
  }
  int64_t offset = 0, limit = kDefaultLimit;
  for (auto [key, out, lo, hi] : {std::tuple{"page_offset", &offset, int64_t{0}, INT64_MAX / 2},
                                  std::tuple{"page_size", &limit, int64_t{1}, kMaxLimit}}) {
    auto it = args.find(key);
    if (it == args.end()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
      return Failure(
          id, kInvalidParams,
          absl::StrCat(tool->name, ": ", key, " must be an integer in [", lo, ", ", hi, "]"));
    }
    *out = it->get<int64_t>();
    args.erase(it);
  }
  std::set<std::string> declared;
  for (const tools::Param& p : tool->params) {
    declared.insert(p.name);
    if (p.required && !args.contains(p.name)) {
      return Failure(id, kInvalidParams,
                     absl::StrCat(tool->name, ": the argument ", p.name, " is required"));
    }
  }
  for (const auto& [key, value] : args.items()) {
    if (declared.count(key) == 0) {
      return Failure(id, kInvalidParams,
                     absl::StrCat(tool->name, ": no argument named ", key, " (it takes ",
                                  absl::StrJoin(declared, ", "), ", page_offset, page_size)"));
    }
  }
  // The tool's route, asked in-process as the caller: its checks and roles are the API's.
  Request call;
  call.method = tool->method;
  call.peer = req.peer;
  call.host = req.host;
  call.identities = req.identities;
  call.roles = req.roles;
  call.content_type = "application/json";
  std::string path = tool->route;
  json body = json::object();
  for (const auto& [key, value] : args.items()) {
    const std::string placeholder = absl::StrCat("{", key, "}");
    if (absl::StrContains(path, placeholder)) {
      const std::string text = QueryText(value);
      if (text.empty() || absl::StrContains(text, "/")) {
        return Failure(id, kInvalidParams,
                       absl::StrCat(tool->name, ": ", key, " must be a non-empty name without /"));
      }
      path = absl::StrReplaceAll(path, {{placeholder, text}});
    } else if (tool->method == "GET") {
      call.query[key] = QueryText(value);
    } else {
      body[key] = value;
    }
  }
  call.path = path;
  if (tool->method != "GET") call.body = Dump(body);
  Response answer = router.Handle(call);
  if (answer.stream) return Reply(id, ToolError(tool->name + ": answers a stream, not a tool"));
  json parsed = json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  if (answer.status >= 400) {
    std::string message = answer.body;
    if (parsed.is_object() && parsed.contains("error") && parsed["error"].is_string()) {
      message = parsed["error"].get<std::string>();
    }
    return Reply(
        id, ToolError(absl::StrCat(tool->name, " refused (HTTP ", answer.status, "): ", message)));
  }
  if (parsed.is_discarded()) {
    parsed = json{{"text", answer.body}};
  }
  json page = Page(&parsed, offset, limit);
  json provenance = Provenance(src, args, parsed);
  json structured = {{"result", std::move(parsed)},
                     {"page", std::move(page)},
                     {"provenance", std::move(provenance)}};
  return Reply(id, {{"content", json::array({{{"type", "text"}, {"text", Dump(structured)}}})},
                    {"structuredContent", std::move(structured)},
                    {"isError", false}});
}

Response Mcp(const HttpApiSources& src, const http::Router& router, const Request& req) {
  if (req.identities.empty() && !LoopbackPeer(req.peer)) {
    return Response::Error(
        403,
        "mcp: over plaintext HTTP only loopback callers are served; use TLS with a client "
        "certificate");
  }
  // Bounded as every JSON body the API reads (http/json_body.h): no deep nesting, one object.
  absl::StatusOr<json> parsed = http::ParseJsonObject(req.body);
  if (!parsed.ok()) {
    return Failure(
        nullptr, kParseError,
        absl::StrCat("mcp: one JSON-RPC message (an object) per POST: ", parsed.status().message()),
        400);
  }
  const json& message = *parsed;
  const json id = message.value("id", json());
  const auto method = message.find("method");
  if (message.value("jsonrpc", "") != "2.0" || method == message.end() || !method->is_string()) {
    // A response or something else from the client: nothing to answer.
    if (message.contains("result") || message.contains("error")) return Response::Text(202, "");
    return Failure(id, kInvalidRequest, "mcp: a JSON-RPC 2.0 request with a method is expected",
                   400);
  }
  if (!message.contains("id")) return Response::Text(202, "");  // a notification
  const std::string m = method->get<std::string>();
  const json params = message.value("params", json::object());
  if (m == "initialize") {
    std::string revision = params.value("protocolVersion", "");
    if (Revisions().count(revision) == 0) revision = kNewestRevision;
    return Reply(id, {{"protocolVersion", revision},
                      {"capabilities", {{"tools", {{"listChanged", false}}}}},
                      {"serverInfo", {{"name", "podprof-aggregator"}, {"version", kVersion}}},
                      {"instructions",
                       "podprof: a TPU pod on one clock. list_captures finds captures; "
                       "get_stragglers names who made the pod wait; query_sql answers SQL over a "
                       "capture's events, kernels, collectives, counters and telemetry. "
                       "docs/AGENTS.md has worked examples."}});
  }
  if (m == "ping") return Reply(id, json::object());
  if (m == "tools/list") {
    json listed = json::array();
    for (const tools::Tool& t : tools::Registry()) listed.push_back(ToolListing(t));
    return Reply(id, {{"tools", std::move(listed)}});
  }
  if (m == "tools/call") {
    if (!params.is_object())
      return Failure(id, kInvalidParams, "tools/call: params must be an object");
    return CallTool(src, router, req, id, params);
  }
  return Failure(id, kMethodNotFound, absl::StrCat("mcp: no method ", m));
}

}  // namespace

void AddMcpRoutes(const HttpApiSources& src, http::Router& router) {
  const http::Router* self = &router;  // filled before serving, then read-only
  router.Add("POST", "/mcp", [src, self](const Request& q) { return Mcp(src, *self, q); });
}

}  // namespace podprof::aggregator
