// The tool registry: each question podprof answers, declared once as data (issue #59). A tool
// is what an agent calls (MCP's tools/list gets InputSchema), what `podprof tools` lists, and
// what the tests hold the other surfaces to: every HTTP route under /api/v1 is a tool's route or
// a NotATool with a reason, every `podprof` subcommand is a tool's `cli` or a NotATool, every
// public method of the Python client (podprof.Client) a tool's `python` or a NotATool, and each
// viewer tool's declared result keys are in its route's JSON answer
// (tests/tools/registry_test.cc, tests/python/test_tools.py).
//
// The registry is static data built on first use and never changed: safe from any thread. It
// knows nothing of the aggregator (it is data about routes, not the routes), so the CLI, the
// aggregator and an MCP server may all include it.
#ifndef PODPROF_TOOLS_REGISTRY_H_
#define PODPROF_TOOLS_REGISTRY_H_

#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"

namespace podprof::tools {

// A parameter's JSON type as an MCP client sends it. Over HTTP every parameter travels as text:
// a kStringList as "a,b" in the query (or a JSON array in a POST body), a kIntegerList and a
// kStringMap only in POST bodies.
enum class ParamType {
  kString,
  kInteger,
  kNumber,
  kBoolean,
  kStringList,
  kIntegerList,  // POST bodies only: "slices": [0, 2]
  kStringMap,    // POST bodies only: "labels": {"k": "v"}
};

struct Param {
  // The MCP argument name; the same as the HTTP query parameter, the path {placeholder}, or
  // (for a POST) the JSON body's field.
  std::string name;
  ParamType type = ParamType::kString;
  // "ns", "ms", "ps", "px", "fraction", "" ...; durations are strings such as "30s" with unit
  // "duration" (a time before now, as the route reads it).
  std::string unit;
  bool required = false;
  std::string description;
  std::string default_value;  // as text; empty = none
};

// The role a caller needs: a viewer reads, an operator also starts and cancels captures (the
// roles of docs/OPERATING.md, checked on the certificate as for gRPC).
enum class Role { kViewer, kOperator };

struct Tool {
  std::string name;     // snake_case; XProf's tool name where the meaning is the same
  std::string summary;  // one sentence
  Role role = Role::kViewer;
  std::vector<Param> params;
  std::string method;  // HTTP method of the API route that answers it: "GET" / "POST"
  // Its pattern, placeholders named as params: "/api/v1/captures/{capture}/kernels" (the
  // router's own placeholder names may differ; only the position counts).
  std::string route;
  std::string cli;      // the podprof subcommand answering it ("stats", "fleet top"), "" when none
  std::string python;   // the podprof.Client method answering it ("kernels"), "" when none
  std::string example;  // example arguments as a JSON object text
  // Top-level keys of the route's JSON answer, which is an object for every tool (no route
  // answers a bare array). Keys present only sometimes (next_page_token) are left out. Checked
  // against the real route for every viewer tool the test can ask without ClickHouse.
  std::vector<std::string> result_keys;
};

// Where `podprof <cli> --format json` is shaped otherwise than the route's answer (it came first,
// and scripts read it): the top-level keys of its object, or of each item where it prints an
// array. A tool with no entry here prints the route's keys. Checked against the real CLI
// (tests/python/test_tools.py).
struct CliShape {
  std::string tool;
  bool array = false;
  std::vector<std::string> keys;
};
const std::vector<CliShape>& CliShapes();

// All tools, in a stable order (reads first, then the operator's writes).
const std::vector<Tool>& Registry();

// The tool named `name`, or nullptr when none.
const Tool* FindTool(std::string_view name);

// "viewer", "operator".
std::string RoleName(Role r);

// "string", "integer", "number", "boolean", "string_list", "integer_list", "string_map".
std::string ParamTypeName(ParamType t);

// The JSON Schema object that MCP's tools/list wants as inputSchema:
// {"type": "object", "properties": {...}, "required": [...]}, each property with its type, its
// description (its unit said there too) and its default when it has one.
nlohmann::json InputSchema(const Tool& t);

// Everything about a tool, for `podprof tools --format json`: name, summary, role, method,
// route, cli, python, params, example (parsed), result_keys and input_schema.
nlohmann::json ToolJson(const Tool& t);

// Routes and CLI commands that are deliberately not tools, each with why (pages, /metrics,
// downloads, server-sent events, ...): the coverage tests accept these and nothing else.
struct NotATool {
  std::string what;  // "GET /metrics", "cli demo", "python page"
  std::string why;
};
const std::vector<NotATool>& NotTools();

}  // namespace podprof::tools

#endif  // PODPROF_TOOLS_REGISTRY_H_
