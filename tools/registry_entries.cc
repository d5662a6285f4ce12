// The tools, one entry each. Units, defaults and limits are the routes' own (docs/HTTP.md and
// the handlers in aggregator/api/): a default here that the route does not apply would be a lie
// an agent acts on, so each is the route's, not the CLI's or Python's where those differ.
#include "tools/registry_entries.h"

#include <string>
#include <utility>
#include <vector>

namespace podprof::tools::internal {
namespace {

Param Make(std::string name, ParamType type, std::string unit, bool required,
           std::string description, std::string default_value = "") {
  Param p;
  p.name = std::move(name);
  p.type = type;
  p.unit = std::move(unit);
  p.required = required;
  p.description = std::move(description);
  p.default_value = std::move(default_value);
  return p;
}

// The capture a tool reads, named in its path.
Param CaptureId() {
  return Make("capture", ParamType::kString, "", true,
              "The capture's id, as list_captures gives it (e.g. cap-20261201-1)");
}

// A kernel=REGEX filter, as every route reads one.
Param KernelRegex(const char* what) {
  return Make("kernel", ParamType::kString, "", false,
              std::string(what) +
                  ": an RE2 regular expression found anywhere in the op name, at most 4096 bytes");
}

Param Hosts(const char* what) { return Make("hosts", ParamType::kStringList, "", false, what); }

// The targets a capture or a snapshot may be narrowed to (POST bodies).
std::vector<Param> Targets() {
  return {Make("hosts", ParamType::kStringList, "", false,
               "Only these hosts (default: every online agent)"),
          Make("slices", ParamType::kIntegerList, "", false,
               "Only the hosts in these slices of a multi-slice job (0..65535)"),
          Make("selector", ParamType::kStringMap, "", false,
               "Only agents whose labels include every one of these key/value pairs"),
          Make("labels", ParamType::kStringMap, "", false, "Labels stored with the capture")};
}

// The questions about one capture, and the list of them.
// Long: data, five entries of about fifteen lines each; no logic to split.
std::vector<Tool> Reads() {
  std::vector<Tool> t;
  t.push_back(
      {"list_captures",
       "Stored captures, newest first, a page at a time, with their state, hosts, chips and "
       "labels.",
       Role::kViewer,
       {Make("status", ParamType::kString, "", false,
             "Only captures in this state: running, complete, partial, failed, cancelled or "
             "interrupted"),
        Make("label", ParamType::kString, "", false, "Only captures with this label, key=value"),
        Make("limit", ParamType::kInteger, "captures", false, "Captures per page (at most 1000)",
             "100"),
        Make("page_token", ParamType::kString, "", false,
             "The next_page_token of the previous page, to read the next")},
       "GET",
       "/api/v1/captures",
       "captures",
       "captures",
       R"({"status": "complete", "limit": 10})",
       {"captures"}});
  t.push_back({"get_capture",
               "One capture: its window, state, labels, and each host's outcome, clock "
               "correction (offset, uncertainty, drift) and warnings.",
               Role::kViewer,
               {CaptureId()},
               "GET",
               "/api/v1/captures/{capture}",
               "",
               "capture",
               R"({"capture": "cap-20261201-1"})",
               {"capture", "created_ns", "start_ns", "end_ns", "status", "source", "window",
                "hosts", "host_names", "chips", "kernels", "events", "labels", "options",
                "error_message", "hosts_detail"}});
  t.push_back(
      {"get_kernel_stats",
       "Kernel statistics of one capture (count, total, mean, p50/p99/max in ps, costs, "
       "counters and the verdict) per kernel, chip, host or category.",
       Role::kViewer,
       {CaptureId(),
        Make("by", ParamType::kString, "", false, "Rows per kernel, chip, host or category",
             "kernel"),
        KernelRegex("Only these kernels"),
        Make("top", ParamType::kInteger, "rows", false, "At most this many rows (0: all)", "0"),
        Make("category", ParamType::kString, "", false, "Only kernels of this HLO category"),
        Make("host", ParamType::kString, "", false, "Only chips of this host"),
        Make("chip", ParamType::kInteger, "", false, "Only this chip ordinal"),
        Make("sort", ParamType::kString, "", false,
             "Order: total, count, mean, p50, p99, max or name", "total")},
       "GET",
       "/api/v1/captures/{capture}/kernels",
       "stats",
       "kernels",
       R"({"capture": "cap-20261201-1", "by": "kernel", "top": 10, "sort": "p99"})",
       {"capture", "rows"}});
  t.push_back({"get_stragglers",
               "The chips that arrived last at the capture's collectives, how often, the waiting "
               "they caused, and whether one is named the straggler.",
               Role::kViewer,
               {CaptureId()},
               "GET",
               "/api/v1/captures/{capture}/stragglers",
               "stragglers",
               "stragglers",
               R"({"capture": "cap-20261201-1"})",
               {"verdict", "straggler_named", "left_out", "left_out_example", "stragglers"}});
  t.push_back(
      {"get_dcn_transfers",
       "A multi-slice capture's cross-slice (DCN) transfers: the verdict naming a late slice or "
       "a slow link, the links, producing slices and worst transfers.",
       Role::kViewer,
       {CaptureId(),
        Make("top", ParamType::kInteger, "transfers", false, "Worst transfers kept (at most 1000)",
             "20"),
        Make("cells", ParamType::kInteger, "", false,
             "1 adds the slices x rendezvous instances matrix (cells)", "0")},
       "GET",
       "/api/v1/captures/{capture}/dcn",
       "dcn",
       "dcn",
       R"({"capture": "cap-20261201-1", "top": 5})",
       {"capture", "verdict", "slices", "transfers", "unpaired", "instances", "expected_transit_ns",
        "named_after_instances", "links", "producers", "worst", "xprof", "columns"}});
  return t;
}

// The questions about one kernel across captures, and about two captures.
std::vector<Tool> KernelReads() {
  std::vector<Tool> t;
  t.push_back({"get_kernel_history",
               "How one kernel behaved over the stored captures: a point per capture with its "
               "p50/p90/p99, total and whether it regressed against the point before.",
               Role::kViewer,
               {Make("kernel", ParamType::kString, "", true, "The kernel's op name, exactly"),
                Make("since", ParamType::kString, "duration", false,
                     "Only captures newer than this long ago, e.g. 30d (default: every one)"),
                Make("module", ParamType::kString, "", false, "Only kernels of this module")},
               "GET",
               "/api/v1/kernels/{kernel}/history",
               "history",
               "history",
               R"({"kernel": "fusion.7", "since": "30d"})",
               {"points"}});
  t.push_back({"describe_kernel",
               "One kernel over the pod: its verdict, HLO and source, its units' busy shares and "
               "XProf's Utilization Viewer rows, throttling, per-chip rows and history.",
               Role::kViewer,
               {Make("kernel", ParamType::kString, "", true, "The kernel's op name, exactly"),
                Make("capture", ParamType::kString, "", false,
                     "The capture to describe it in (default: the newest holding it)"),
                Make("module", ParamType::kString, "", false,
                     "The module, where several hold a kernel of that name")},
               "GET",
               "/api/v1/kernels/{kernel}",
               "kernel",
               "kernel",
               R"({"kernel": "fusion.7", "capture": "cap-20261201-1"})",
               {"capture_id", "kernel", "rollup", "per_chip", "history", "others", "scopes"}});
  t.push_back(
      {"query_sql",
       "One read-only SQL statement over a capture's tables (events, kernels, collectives, "
       "counters, telemetry; docs/SQL.md), every time on the pod's clock with its error; "
       "within a time limit, a row cap and a memory budget.",
       Role::kViewer,
       {CaptureId(),
        Make("query", ParamType::kString, "", true,
             "One SELECT (or WITH ... SELECT) over events, kernels, collectives, counters and "
             "telemetry; XProf's Events DB column names where the meaning is the same"),
        Make("max_rows", ParamType::kInteger, "rows", false,
             "Rows returned at most (at most 10000); past them `truncated` is true", "1000")},
       "POST",
       "/api/v1/sql",
       "sql",
       "sql",
       R"({"capture": "cap-20261201-1", "query": "SELECT host, chip, start_ns, duration_ns FROM events WHERE kernel = 'fusion.7' ORDER BY duration_ns DESC LIMIT 10"})",
       {"columns", "rows", "truncated", "elapsed_ms", "provenance"}});
  t.push_back(
      {"diff_sessions",
       "Two captures' kernels compared, each change judged against noise and regressions "
       "flagged.",
       Role::kViewer,
       {Make("baseline", ParamType::kString, "", true, "The reference capture's id"),
        Make("candidate", ParamType::kString, "", true, "The capture to judge"),
        Make("threshold", ParamType::kNumber, "fraction", false,
             "Smallest rise that counts as a regression (0.05 = 5%)", "0.05"),
        KernelRegex("Only these kernels")},
       "GET",
       "/api/v1/diff",
       "diff",
       "diff",
       R"({"baseline": "cap-20261201-1", "candidate": "cap-20261202-1", "threshold": 0.05})",
       {"baseline", "candidate", "threshold", "deltas", "regression_count"}});
  return t;
}

std::vector<Tool> PodReads() {
  std::vector<Tool> t;
  t.push_back({"list_agents",
               "The registered agents: state, chips, slice, clock offset, uncertainty and drift, "
               "workload reachability and flight recorder state.",
               Role::kViewer,
               {},
               "GET",
               "/api/v1/agents",
               "agents",
               "agents",
               "{}",
               {"agents"}});
  t.push_back(
      {"get_telemetry",
       "The stored always-on telemetry, oldest first, a row per chip and interval: steps, step "
       "time, duty cycle, HBM, collectives and DCN latency.",
       Role::kViewer,
       {Make("since", ParamType::kString, "duration", false, "From this long ago", "1h"),
        Make("until", ParamType::kString, "duration", false, "Up to this long ago (default: now)"),
        Make("host", ParamType::kStringList, "", false, "Only these hosts"),
        Make("limit", ParamType::kInteger, "rows", false,
             "At most this many rows, the newest (at most 100000)", "10000")},
       "GET",
       "/api/v1/telemetry",
       "telemetry",
       "telemetry",
       R"({"since": "10m", "host": ["host-0"]})",
       {"telemetry", "truncated"}});
  t.push_back({"get_triggers",
               "The flight recorder's trigger settings and their last 100 events: what fired, "
               "why, the snapshot taken or why none.",
               Role::kViewer,
               {},
               "GET",
               "/api/v1/triggers",
               "",
               "triggers",
               "{}",
               {"settings", "events"}});
  t.push_back(
      {"get_timeline",
       "The pod timeline of a window at a given width: each chip's kernels as slices or "
       "per-pixel busy bins, counters, and with waits=1 the waits heatmap.",
       Role::kViewer,
       {CaptureId(),
        Make("from_ns", ParamType::kInteger, "ns", false,
             "The window's start, from the capture's start", "0"),
        Make("to_ns", ParamType::kInteger, "ns", false,
             "The window's end, from the capture's start (default: the capture's end)"),
        Make("width", ParamType::kInteger, "px", false, "Pixels across (at most 8192)", "1000"),
        Make("counters", ParamType::kString, "", false,
             "Counters to draw: names a,b, or default (up to 64 chips)"),
        Hosts("Only these hosts"),
        Make("waits", ParamType::kInteger, "", false, "1 adds the collective waits heatmap", "0")},
       "GET",
       "/api/v1/captures/{capture}/timeline",
       "",
       "",
       R"({"capture": "cap-20261201-1", "from_ns": 0, "to_ns": 2000000, "width": 500})",
       {"capture", "start_ns", "from_ns", "to_ns", "ns_per_px", "kernels", "tracks", "counters"}});
  t.push_back({"get_collective_waits",
               "The collective waits heatmap: per chip and training step, how long it waited "
               "for the last chip to arrive.",
               Role::kViewer,
               {CaptureId(), Hosts("Only these hosts")},
               "GET",
               "/api/v1/captures/{capture}/waits",
               "",
               "",
               R"({"capture": "cap-20261201-1"})",
               {"capture", "steps", "chips", "wait_ns"}});
  return t;
}

// The fleet store's questions ([fleet] ClickHouse; 404 without it).
std::vector<Tool> FleetReads() {
  Param pod = Make("pod", ParamType::kString, "", false, "Only this pod");
  std::vector<Tool> t;
  t.push_back(
      {"get_fleet_history",
       "One kernel's p50/p99 per capture across every pod of the fleet store.",
       Role::kViewer,
       {Make("regex", ParamType::kString, "", true, "Kernel op names to match (RE2, partial)"),
        Make("since", ParamType::kString, "duration", false, "From this long ago", "30d"), pod,
        Make("label", ParamType::kString, "", false,
             "Only captures with every one of these labels, k=v,k2=v2"),
        Make("limit", ParamType::kInteger, "rows", false, "At most this many (at most 100000)",
             "10000")},
       "GET",
       "/api/v1/fleet/history",
       "fleet history",
       "",
       R"({"regex": "fusion\\.7", "since": "7d"})",
       {"points", "truncated"}});
  t.push_back(
      {"get_fleet_top",
       "Where the fleet's kernel time went, most first, by kernel, pod or host.",
       Role::kViewer,
       {Make("by", ParamType::kString, "", false, "Group by kernel, pod or host", "kernel"),
        Make("since", ParamType::kString, "duration", false, "From this long ago", "24h"), pod,
        Make("top", ParamType::kInteger, "rows", false, "Rows (at most 100000)", "20")},
       "GET",
       "/api/v1/fleet/top",
       "fleet top",
       "",
       R"({"by": "pod", "since": "24h"})",
       {"by", "rows", "truncated"}});
  t.push_back(
      {"get_fleet_regressions",
       "Per pod and kernel, this period against the one before: kernels whose p50 or "
       "p99 rose beyond noise, regressions first.",
       Role::kViewer,
       {Make("since", ParamType::kString, "duration", false, "The period's length", "7d"), pod,
        Make("threshold", ParamType::kNumber, "fraction", false,
             "Smallest rise that counts (0.05 = 5%)", "0.05"),
        Make("limit", ParamType::kInteger, "rows", false, "At most this many (at most 100000)",
             "10000")},
       "GET",
       "/api/v1/fleet/regressions",
       "fleet regressions",
       "",
       R"({"since": "7d", "threshold": 0.1})",
       {"kernels", "truncated"}});
  return t;
}

// The operator's: they act on the pod. Their answers are not checked by the result-key test
// (it would need agents); docs/HTTP.md gives them.
std::vector<Tool> Writes() {
  std::vector<Param> capture = {
      Make("duration_ms", ParamType::kInteger, "ms", true, "The capture's length"),
      Make("delay_ms", ParamType::kInteger, "ms", false,
           "Start this long after the request (instead of start_ns)"),
      Make("start_ns", ParamType::kInteger, "ns", false,
           "The window's start, Unix ns on the aggregator's clock (409 when too soon for every "
           "host to hear)")};
  std::vector<Param> snapshot = {
      Make("window_ms", ParamType::kInteger, "ms", false,
           "The window before now to keep from the flight recorders", "5000"),
      Make("reason", ParamType::kString, "", false, "Why, stored as the reason label")};
  for (Param& p : Targets()) {
    capture.push_back(p);
    snapshot.push_back(std::move(p));
  }
  std::vector<Tool> t;
  t.push_back({"start_capture",
               "Starts a pod-wide capture of a window on every chosen host, aligned on one "
               "clock; answers at once with its id.",
               Role::kOperator,
               std::move(capture),
               "POST",
               "/api/v1/captures",
               "capture",
               "start_capture",
               R"({"duration_ms": 2000, "labels": {"run": "baseline"}})",
               {"capture", "start_ns", "hosts"}});
  t.push_back({"take_snapshot",
               "Stores the last seconds of every chosen host from the agents' flight recorders (or "
               "captures the window after the request where a host has none).",
               Role::kOperator,
               std::move(snapshot),
               "POST",
               "/api/v1/snapshots",
               "snapshot",
               "snapshot",
               R"({"window_ms": 5000, "reason": "loss spike at step 1200"})",
               {"capture", "start_ns", "hosts"}});
  t.push_back({"cancel_capture",
               "Cancels a running capture.",
               Role::kOperator,
               {CaptureId()},
               "POST",
               "/api/v1/captures/{capture}/cancel",
               "",
               "cancel",
               R"({"capture": "cap-20261201-1"})",
               {"capture", "status"}});
  return t;
}

}  // namespace

std::vector<Tool> ToolEntries() {
  std::vector<Tool> all;
  for (std::vector<Tool> part : {Reads(), KernelReads(), PodReads(), FleetReads(), Writes()}) {
    for (Tool& t : part) all.push_back(std::move(t));
  }
  return all;
}

std::vector<CliShape> CliShapeEntries() {
  return {
      {"list_captures", true, {"capture", "created_ns", "start_ns", "end_ns", "status", "hosts"}},
      {"get_stragglers",
       false,
       {"capture_id", "verdict", "straggler_named", "left_out", "chips", "worst"}},
      {"get_kernel_history", true, {"kernel", "module", "category", "points"}},
      {"get_telemetry", false, {"rows", "truncated"}},
      // The commands follow the capture to its end and print its outcome.
      {"start_capture", false, {"capture_id", "state", "start_ns", "end_ns", "hosts"}},
      {"take_snapshot", false, {"capture_id", "state", "start_ns", "end_ns", "hosts"}},
  };
}

std::vector<NotATool> NotToolEntries() {
  const char* const kPage = "a web page (HTML for a browser); its data come from the API's tools";
  return {
      {"GET /metrics", "Prometheus's text format for scrapers, not a question"},
      {"GET /api/v1/captures/{capture}/events",
       "server-sent events that stream a capture's progress until it ends; a tool answers "
       "once: poll get_capture"},
      {"GET /api/v1/captures/{capture}/export",
       "a download (a Perfetto, Chrome or XProf file, or the events as CSV), streamed in "
       "chunks: a file, not a JSON answer"},
      {"GET /api/v1/ui", "the web pages' own settings (Perfetto UI address, operator form)"},
      {"POST /mcp",
       "the Model Context Protocol endpoint that serves these tools to agents (docs/AGENTS.md)"},
      {"POST /api/v1/snapshots/webhook",
       "Alertmanager's webhook body for alert managers; take_snapshot is the same act for "
       "everyone else"},
      {"GET /", kPage},
      {"GET /captures", kPage},
      {"GET /captures/{capture}", kPage},
      {"GET /kernels/{kernel}", kPage},
      {"GET /diff", kPage},
      {"GET /pod", kPage},
      {"GET /assets/{name}", "the web pages' scripts, styles and images"},
      {"cli inspect",
       "reads a local .xplane.pb on the caller's machine, without an aggregator; `podprof "
       "import` stores one, then get_kernel_stats reads it"},
      {"cli import", "uploads a local file over gRPC; no HTTP route"},
      {"cli export", "writes a file (the export download)"},
      {"cli demo", "starts a simulated pod of processes on this machine"},
      {"cli fleet status", "the aggregator's replication state over gRPC; no HTTP route"},
      {"cli tools", "lists this registry"},
      {"python timeline",
       "the events of a window as a DataFrame, read from the export download's CSV; "
       "get_timeline is the pixel-bounded view"},
      {"python export", "writes a file (the export download)"},
      {"python fleet",
       "returns a podprof.fleet.Fleet, whose history, top and regressions are the "
       "get_fleet_* tools"},
      {"python page", "builds a capture page's address; asks the aggregator nothing"},
  };
}

}  // namespace podprof::tools::internal
