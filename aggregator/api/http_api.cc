#include "aggregator/api/http_api.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "aggregator/api/api_rows.h"
#include "aggregator/api/http_params.h"
#include "aggregator/api/utf8_fields.h"
#include "aggregator/capture/stored_options.h"
#include "common/json_text.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "http/json_body.h"
#include "insight/evidence.h"
#include "nlohmann/json.hpp"
#include "proto/recorder_states.h"
#include "report/capture_json.h"
#include "report/format.h"
#include "report/history.h"
#include "report/kernel_rows.h"
#include "report/pod_rows.h"
#include "report/states.h"
#include "report/telemetry_rows.h"
#include "web/pages.h"

namespace podprof::aggregator {
namespace {

using Json = nlohmann::ordered_json;  // keys in the order written: CSV columns follow it
using http::Request;
using http::Response;

// One JSON value as one CSV field (RFC 4180).
std::string CsvCell(const Json& v) {
  return report::CsvField(v.is_string() ? v.get<std::string>() : v.is_null() ? "" : JsonText(v));
}

// `rows` (an array of flat objects) under `key`, with `extra`'s fields beside them, as JSON;
// or, with ?format=csv, the rows alone as CSV with a header of the first row's keys.
Response Rows(const Request& req, const char* key, const Json& rows,
              const Json& extra = Json::object()) {
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!csv.ok()) return Response::Error(csv.status());
  if (!*csv) {
    Json body = extra;
    body[key] = rows;
    return Response::Text(200, JsonText(body, 1) + "\n", "application/json");
  }
  std::string out;
  if (!rows.empty()) {
    std::vector<std::string> header;
    for (auto it = rows[0].begin(); it != rows[0].end(); ++it) header.push_back(it.key());
    out = absl::StrJoin(header, ",") + "\n";
    for (const Json& r : rows) {
      std::vector<std::string> cells;
      for (const std::string& k : header) cells.push_back(CsvCell(r.contains(k) ? r[k] : Json()));
      absl::StrAppend(&out, absl::StrJoin(cells, ","), "\n");
    }
  }
  return Response::Text(200, std::move(out), "text/csv; charset=utf-8");
}

// The answer of a query as a response: the rendering of its typed result, or the error.
template <typename T, typename Render>
Response Answer(absl::StatusOr<T> answer, Render render) {
  if (!answer.ok()) return Response::Error(answer.status());
  EscapeInvalidUtf8Fields(&*answer);  // names as `\xNN`, as gRPC answers them, in JSON and CSV
  return render(*answer);
}

Response CsvText(std::string text) {
  return Response::Text(200, std::move(text), "text/csv; charset=utf-8");
}

// ?status=, ?label=k=v, ?limit=, ?page_token=: as `podprof captures` asks.
absl::StatusOr<podprof::v1::ListCapturesRequest> CapturesRequest(const Request& req) {
  podprof::v1::ListCapturesRequest r;
  if (const std::string status = Param(req, "status"); !status.empty()) {
    const std::optional<storage::CaptureState> state = storage::CaptureStateNamed(status);
    if (!state) {
      std::vector<std::string> names;
      for (storage::CaptureState k : storage::kCaptureStates) {
        names.push_back(storage::CaptureStateName(k));
      }
      return absl::InvalidArgumentError(absl::StrCat("status: unknown state \"", status, "\" (use ",
                                                     absl::StrJoin(names, ", "), ")"));
    }
    r.set_status(StatusEnum(*state));
  }
  ASSIGN_OR_RETURN(const int64_t limit, IntParam(req, "limit", 0));
  r.set_limit(static_cast<uint32_t>(std::min<int64_t>(limit, kMaxCaptureLimit)));
  r.set_page_token(Param(req, "page_token"));
  if (const std::string label = Param(req, "label"); !label.empty()) {
    std::pair<std::string, std::string> kv = absl::StrSplit(label, absl::MaxSplits('=', 1));
    (*r.mutable_label_selector())[kv.first] = kv.second;
  }
  return r;
}

Response Captures(const HttpApiSources& src, const Request& req) {
  absl::StatusOr<podprof::v1::ListCapturesRequest> r = CapturesRequest(req);
  if (!r.ok()) return Response::Error(r.status());
  return Answer(src.queries->ListCaptures(*r), [&](const podprof::v1::ListCapturesResponse& a) {
    Json out = Json::array();
    for (const auto& c : a.captures()) out.push_back(Json(report::CaptureJson(c)));
    Json extra = Json::object();
    if (!a.next_page_token().empty()) extra["next_page_token"] = a.next_page_token();
    return Rows(req, "captures", out, extra);
  });
}

// The hosts of a capture with their clock corrections.
Json HostsDetail(const podprof::v1::CaptureSummary& c) {
  Json hosts = Json::array();
  for (const podprof::v1::HostCaptureResult& h : c.hosts()) {
    hosts.push_back({{"host", h.host_name()},
                     {"status", report::CaptureStatusName(h.status())},
                     {"error", h.error_message()},
                     {"clock_offset_ns", h.clock_offset_ns()},
                     {"clock_uncertainty_ns", h.clock_uncertainty_ns()},
                     {"clock_drift_ppb", h.clock_drift_ppb()},
                     {"events", h.event_count()},
                     {"analysed_by", h.analysed_by()},
                     {"warnings", h.warnings()}});
  }
  return hosts;
}

Response Capture(const HttpApiSources& src, const Request& req) {
  return Answer(src.queries->Capture(req.params.at("id")),
                [&](const podprof::v1::CaptureSummary& c) {
                  if (Param(req, "format") == "csv") return Rows(req, "hosts", HostsDetail(c));
                  Json j = Json(report::CaptureJson(c));
                  j["hosts_detail"] = HostsDetail(c);
                  return Response::Text(200, JsonText(j, 1) + "\n", "application/json");
                });
}

absl::StatusOr<podprof::v1::KernelGrouping> GroupingParam(const Request& req) {
  const std::string by = Param(req, "by", "kernel");
  if (by == "kernel") return podprof::v1::KERNEL_GROUPING_KERNEL;
  if (by == "chip") return podprof::v1::KERNEL_GROUPING_CHIP;
  if (by == "host") return podprof::v1::KERNEL_GROUPING_HOST;
  if (by == "category") return podprof::v1::KERNEL_GROUPING_CATEGORY;
  return absl::InvalidArgumentError(
      absl::StrCat("by='", by, "': use kernel, chip, host or category"));
}

// `sort=` as `podprof stats --sort` names the orders.
absl::StatusOr<podprof::v1::KernelOrder> OrderParam(const Request& req) {
  static const std::pair<const char*, podprof::v1::KernelOrder> kOrders[] = {
      {"total", podprof::v1::KERNEL_ORDER_TOTAL_TIME}, {"count", podprof::v1::KERNEL_ORDER_COUNT},
      {"mean", podprof::v1::KERNEL_ORDER_MEAN},        {"p50", podprof::v1::KERNEL_ORDER_P50},
      {"p99", podprof::v1::KERNEL_ORDER_P99},          {"max", podprof::v1::KERNEL_ORDER_MAX},
      {"name", podprof::v1::KERNEL_ORDER_NAME}};
  const std::string sort = Param(req, "sort", "total");
  for (const auto& [name, order] : kOrders) {
    if (sort == name) return order;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("sort='", sort, "': use total, count, mean, p50, p99, max or name"));
}

// The CLI's kernel rows (report/kernel_rows.h), JSON or CSV, as `podprof stats` writes them.
Response Kernels(const HttpApiSources& src, const Request& req) {
  podprof::v1::GetKernelStatsRequest r;
  r.set_capture_id(req.params.at("id"));
  absl::StatusOr<podprof::v1::KernelGrouping> by = GroupingParam(req);
  if (!by.ok()) return Response::Error(by.status());
  r.set_group_by(*by);
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!csv.ok()) return Response::Error(csv.status());
  r.mutable_filter()->set_op_regex(Param(req, "kernel"));
  // Named as this API names it; the query layer would name its gRPC field.
  if (absl::Status s = CheckUserPattern("kernel", r.filter().op_regex()); !s.ok()) {
    return Response::Error(s);
  }
  absl::StatusOr<int64_t> top = IntParam(req, "top", 0);
  if (!top.ok()) return Response::Error(top.status());
  r.set_top_n(static_cast<uint32_t>(std::min<int64_t>(*top, 1 << 20)));
  // The rest of `podprof stats`'s choices, so that a client can ask every question it can.
  r.mutable_filter()->set_category(Param(req, "category"));
  r.set_host_name(Param(req, "host"));
  if (!Param(req, "chip").empty()) {
    absl::StatusOr<int64_t> chip = IntParam(req, "chip", 0);
    if (!chip.ok() || *chip < 0 || *chip > std::numeric_limits<int32_t>::max()) {
      return Response::Error(absl::InvalidArgumentError(
          absl::StrCat("chip=", Param(req, "chip"), ": want a chip ordinal, 0 or more")));
    }
    r.mutable_filter()->set_chip_ordinal(static_cast<int32_t>(*chip));
  }
  absl::StatusOr<podprof::v1::KernelOrder> order = OrderParam(req);
  if (!order.ok()) return Response::Error(order.status());
  r.set_order(*order);
  return Answer(src.queries->KernelStats(r), [&](const podprof::v1::GetKernelStatsResponse& a) {
    if (*csv) {
      std::ostringstream text;
      report::WriteKernelRowsCsv(a.capture_id(), a.stats(), text);
      return CsvText(text.str());
    }
    const nlohmann::json j = {{"capture", a.capture_id()},
                              {"rows", report::KernelRowsJson(a.stats())}};
    return Response::Text(200, JsonText(j, 1) + "\n", "application/json");
  });
}

Response Stragglers(const HttpApiSources& src, const Request& req) {
  podprof::v1::GetStragglersRequest r;
  r.set_capture_id(req.params.at("id"));
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!csv.ok()) return Response::Error(csv.status());
  return Answer(src.queries->Stragglers(r), [&](const podprof::v1::GetStragglersResponse& a) {
    if (*csv) {  // `podprof stragglers --format csv`'s bytes
      std::ostringstream text;
      report::WriteStragglersCsv(a, text);
      return CsvText(text.str());
    }
    Json out = Json::array();
    for (const podprof::v1::StragglerChip& c : a.chips()) {
      out.push_back({{"host", c.host_name()},
                     {"chip", c.chip_ordinal()},
                     {"times_last", c.times_last()},
                     {"instances", c.instances()},
                     {"expected_last", c.expected_last()},
                     {"p_value", c.p_value()},
                     {"significant", c.significant()},
                     {"caused_ps", c.caused_wait_ps()},
                     {"lateness_ps", c.lateness_ps()}});
    }
    return Rows(req, "stragglers", out,
                {{"verdict", a.verdict()},
                 {"straggler_named", a.straggler_named()},
                 {"left_out", a.left_out()},
                 {"left_out_example", a.left_out_example()}});
  });
}

// GET /api/v1/kernels/{name}/history?module=&since=: `podprof history` of that exact name.
Response History(const HttpApiSources& src, const Request& req) {
  podprof::v1::KernelHistoryRequest r;
  r.mutable_filter()->set_op_regex("^" + RegexEscape(req.params.at("name")) + "$");
  r.mutable_filter()->set_module(Param(req, "module"));
  if (const std::string since = Param(req, "since"); !since.empty()) {
    absl::StatusOr<int64_t> ago = ParseDurationNs(since);
    if (!ago.ok()) {
      return Response::Error(
          absl::InvalidArgumentError(absl::StrCat("since: ", ago.status().message())));
    }
    r.set_since_ns(src.clock->NowNs() - *ago);
  }
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!csv.ok()) return Response::Error(csv.status());
  return Answer(src.queries->KernelHistory(r), [&](const podprof::v1::KernelHistoryResponse& a) {
    if (*csv) {
      std::ostringstream text;
      report::WriteHistoryCsv(a, text);
      return CsvText(text.str());
    }
    return Rows(req, "points", report::HistoryRowsJson(a));
  });
}

Response Agents(const HttpApiSources& src, const Request& req) {
  Json out = Json::array();
  podprof::v1::ListAgentsResponse agents = src.queries->Agents({});
  EscapeInvalidUtf8Fields(&agents);
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!csv.ok()) return Response::Error(csv.status());
  if (*csv) {  // `podprof agents --format csv`'s bytes
    std::ostringstream text;
    report::WriteAgentsCsv(agents, text);
    return CsvText(text.str());
  }
  for (const auto& a : agents.agents()) {
    out.push_back({{"host", a.host().host_name()},
                   {"address", a.host().agent_address()},
                   {"state", report::AgentStateName(a.state())},
                   {"chips", a.host().chips_size()},
                   {"slice", report::SliceOf(a.host())},
                   {"slice_worker", report::SliceWorkerOf(a.host())},
                   {"last_heartbeat_ns", a.last_heartbeat_ns()},
                   {"clock_offset_ns", a.clock().offset_ns()},
                   {"clock_uncertainty_ns", a.clock().uncertainty_ns()},
                   {"clock_drift_ppb", a.clock().drift_ppb()},
                   {"active_capture_id", a.active_capture_id()},
                   {"dial_error", a.dial_error()},
                   {"workload", report::WorkloadStateName(a)},
                   {"workload_error", report::WorkloadError(a)},
                   {"agent_warnings", a.agent_warnings()},
                   {"recorder", v1::RecorderStateText(a.recorder())},
                   {"recorder_reason", a.recorder().reason()}});
  }
  return Rows(req, "agents", out);
}

// A write needs the operator role, checked on the caller's certificate names as gRPC does, and
// is refused outright over plaintext beyond loopback unless the configuration opted in.
absl::Status Operator(const HttpApiSources& src, const Request& req) {
  if (!src.writes_refused.empty()) return absl::PermissionDeniedError(src.writes_refused);
  return src.access->Get()->operators.CheckIdentities(req.identities, req.roles, "an operator");
}

// A write body's "slices" (optional): the slices of a multi-slice job to capture, as
// HostInfo.slice numbers them.
absl::Status AddSlices(const nlohmann::json& body, podprof::v1::StartCaptureRequest* r) {
  const auto it = body.find("slices");
  if (it == body.end()) return absl::OkStatus();
  if (!it->is_array() || it->size() > http::kMaxJsonItems) {
    return absl::InvalidArgumentError("slices must be a list of slice numbers");
  }
  for (const nlohmann::json& v : *it) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "slices must be a list of numbers 0..65535, and has ", v.dump().substr(0, 40)));
    }
    r->add_slices(v.get<int32_t>());
  }
  return absl::OkStatus();
}

// A write body's "hosts", "slices", "selector" and "labels" (each optional) into `r`.
absl::Status AddTargets(const nlohmann::json& body, podprof::v1::StartCaptureRequest* r) {
  ASSIGN_OR_RETURN(const std::vector<std::string> hosts, http::StringListField(body, "hosts"));
  for (const std::string& h : hosts) r->add_host_names(h);
  RETURN_IF_ERROR(AddSlices(body, r));
  ASSIGN_OR_RETURN(const auto selector, http::StringMapField(body, "selector"));
  r->mutable_label_selector()->insert(selector.begin(), selector.end());
  ASSIGN_OR_RETURN(const auto labels, http::StringMapField(body, "labels"));
  r->mutable_labels()->insert(labels.begin(), labels.end());
  return absl::OkStatus();
}

// The body of POST /api/v1/captures as a request, every field checked against its type and
// range before anything is done with it.
absl::StatusOr<podprof::v1::StartCaptureRequest> StartCaptureBody(const std::string& text) {
  ASSIGN_OR_RETURN(const nlohmann::json body, http::ParseJsonObject(text));
  // A misspelt field would otherwise read as left out ("duration" for "duration_ms": a
  // capture of 0 ms).
  static constexpr const char* kFields[] = {"duration_ms", "delay_ms", "start_ns", "hosts",
                                            "slices",      "selector", "labels"};
  RETURN_IF_ERROR(http::OnlyKnownFields(body, kFields));
  if (!body.contains("duration_ms")) {
    return absl::InvalidArgumentError("the body has no duration_ms (the capture's length, ms)");
  }
  podprof::v1::StartCaptureRequest r;
  // The orchestrator holds both to the configured limits; these bounds keep the numbers whole
  // on the way there (ms to ns fits int64 below 2^63 / 10^6).
  constexpr uint64_t kMaxMs = std::numeric_limits<int64_t>::max() / 1'000'000;
  ASSIGN_OR_RETURN(const uint64_t duration_ms, http::UintField(body, "duration_ms", 1, kMaxMs, 0));
  ASSIGN_OR_RETURN(const uint64_t delay_ms,
                   http::UintField(body, "delay_ms", 0, std::numeric_limits<uint32_t>::max(), 0));
  // The orchestrator checks it against now; this keeps it a whole int64.
  ASSIGN_OR_RETURN(const uint64_t start_ns,
                   http::UintField(body, "start_ns", 0, std::numeric_limits<int64_t>::max(), 0));
  r.set_duration_ms(duration_ms);
  r.set_delay_ms(static_cast<uint32_t>(delay_ms));
  r.set_start_ns(static_cast<int64_t>(start_ns));
  RETURN_IF_ERROR(AddTargets(body, &r));
  return r;
}

// The body of POST /api/v1/snapshots: {"window_ms": 5000, "reason": "...", "hosts": [...],
// "selector": {...}, "labels": {...}}, every field optional; the labels get trigger (manual
// unless given) and reason.
absl::StatusOr<podprof::v1::StartCaptureRequest> SnapshotBody(const std::string& text) {
  ASSIGN_OR_RETURN(const nlohmann::json body, http::ParseJsonObject(text));
  static constexpr const char* kFields[] = {"window_ms", "reason",   "hosts",
                                            "slices",    "selector", "labels"};
  RETURN_IF_ERROR(http::OnlyKnownFields(body, kFields));
  constexpr uint64_t kMaxMs = std::numeric_limits<int64_t>::max() / 1'000'000;
  podprof::v1::StartCaptureRequest r;
  r.set_snapshot(true);
  ASSIGN_OR_RETURN(const uint64_t window_ms, http::UintField(body, "window_ms", 1, kMaxMs, 5000));
  r.set_duration_ms(window_ms);
  RETURN_IF_ERROR(AddTargets(body, &r));
  // A trigger label the caller gave names the trigger, as before the cause was typed.
  const auto trigger = r.labels().find(kTriggerLabel);
  r.mutable_cause()->set_trigger(trigger != r.labels().end() ? trigger->second : "manual");
  if (body.contains("reason")) {
    ASSIGN_OR_RETURN(*r.mutable_cause()->mutable_reason(),
                     http::StringField(body, "reason", "", "reason", 1024));
  }
  return r;
}

// GET /api/v1/telemetry?since=1h&until=10m&host=H&limit=N: the stored telemetry, per chip and
// stored interval, oldest first, as `podprof telemetry` prints it (since and until are ages:
// how long ago; host may repeat, comma-separated too).
Response Telemetry(const HttpApiSources& src, const Request& req) {
  podprof::v1::GetTelemetryRequest r;
  const int64_t now = src.clock->NowNs();
  for (const char* name : {"since", "until"}) {
    const std::string text = Param(req, name, std::string(name) == "since" ? "1h" : "");
    if (text.empty()) continue;
    absl::StatusOr<int64_t> ago = ParseDurationNs(text);
    if (!ago.ok() || *ago < 0) {
      return Response::Error(absl::InvalidArgumentError(
          absl::StrCat(name, ": \"", text, "\" is not a duration such as 1h or 30s")));
    }
    std::string(name) == "since" ? r.set_since_ns(now - *ago) : r.set_until_ns(now - *ago);
  }
  for (absl::string_view h : absl::StrSplit(Param(req, "host"), ',', absl::SkipEmpty())) {
    r.add_hosts(std::string(h));
  }
  absl::StatusOr<int64_t> limit = IntParam(req, "limit", kDefaultTelemetryLimit);
  if (!limit.ok()) return Response::Error(limit.status());
  // limit=0 is one row here (the query layer would read 0 as its default).
  r.set_limit(static_cast<int32_t>(std::clamp<int64_t>(*limit, 1, kMaxTelemetryLimit)));
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!csv.ok()) return Response::Error(csv.status());
  return Answer(src.queries->Telemetry(r), [&](const podprof::v1::GetTelemetryResponse& a) {
    if (*csv) {
      std::ostringstream text;
      report::WriteTelemetryCsv(a, text);
      return CsvText(text.str());
    }
    return Rows(req, "telemetry", report::TelemetryRowsJson(a), Json{{"truncated", a.truncated()}});
  });
}

// POST /api/v1/snapshots/webhook: Alertmanager's webhook body ({"status": "firing", "alerts":
// [{"status", "labels": {"alertname", ...}, "annotations": {"summary", ...}}], ...}), as a
// goodput monitor or an alert rule sends it. A firing group takes one snapshot of the pod
// (trigger "webhook", reason the alert names and summaries), through the webhook trigger's
// cooldown and budget; a resolved one takes none. 202 with the capture, 200 when nothing was
// taken (resolved, or held back: the body says why).
Response Webhook(const HttpApiSources& src, const Request& req) {
  if (absl::Status a = Operator(src, req); !a.ok()) return Response::Error(a);
  if (src.triggers == nullptr) return Response::Error(absl::NotFoundError("no triggers here"));
  absl::StatusOr<nlohmann::json> body = http::ParseJsonObject(req.body);
  if (!body.ok()) return Response::Error(body.status());
  absl::StatusOr<std::optional<Firing>> firing = FiringOfAlertmanager(*body);
  if (!firing.ok()) return Response::Error(firing.status());
  if (!*firing) {
    return Response::Text(200,
                          JsonText(Json{{"snapshot", nullptr}, {"why", "no firing alert"}}) + "\n",
                          "application/json");
  }
  const Firing& f = **firing;
  absl::StatusOr<std::string> id = src.triggers->Fire(f, /*automatic=*/false);
  if (absl::IsResourceExhausted(id.status())) {
    return Response::Text(
        200, JsonText(Json{{"snapshot", nullptr}, {"why", id.status().message()}}) + "\n",
        "application/json");
  }
  if (!id.ok()) return Response::Error(id.status());
  Response res = Response::Text(202, JsonText(Json{{"snapshot", *id}, {"reason", f.reason}}) + "\n",
                                "application/json");
  res.headers.emplace_back("Location", "/api/v1/captures/" + *id);
  return res;
}

// POST /api/v1/captures {"duration_ms": 2000, "hosts": [...], "selector": {...},
// "labels": {...}, "delay_ms": N}: a pod-wide capture, as `podprof capture` starts it; and
// POST /api/v1/snapshots, as `podprof snapshot` takes one.
Response StartCapture(const HttpApiSources& src, const Request& req, bool snapshot) {
  if (absl::Status a = Operator(src, req); !a.ok()) return Response::Error(a);
  absl::StatusOr<podprof::v1::StartCaptureRequest> r =
      snapshot ? SnapshotBody(req.body) : StartCaptureBody(req.body);
  if (!r.ok()) return Response::Error(r.status());
  absl::StatusOr<podprof::v1::StartCaptureResponse> started = src.orchestrator->Start(*r);
  if (!started.ok()) return Response::Error(started.status());
  Json hosts = Json::array();
  for (const auto& h : started->host_names()) hosts.push_back(h);
  Response res = Response::Text(201,
                                JsonText(Json{{"capture", started->capture_id()},
                                              {"start_ns", started->start_ns()},
                                              {"hosts", hosts}}) +
                                    "\n",
                                "application/json");
  res.headers.emplace_back("Location", "/api/v1/captures/" + started->capture_id());
  return res;
}

Response CancelCapture(const HttpApiSources& src, const Request& req) {
  if (absl::Status a = Operator(src, req); !a.ok()) return Response::Error(a);
  absl::StatusOr<podprof::v1::CaptureStatus> s = src.orchestrator->Cancel(req.params.at("id"));
  if (!s.ok()) return Response::Error(s.status());
  return Response::Text(
      200,
      JsonText(Json{{"capture", req.params.at("id")}, {"status", report::CaptureStatusName(*s)}}) +
          "\n",
      "application/json");
}

// One progress event as a server-sent event: `event: progress` (or `done` on the last) and
// its JSON.
std::string ProgressEvent(const podprof::v1::CaptureProgress& p) {
  Json j = {{"capture", p.capture_id()},
            {"time_ns", p.time_ns()},
            {"status", report::CaptureStatusName(p.status())},
            {"percent", p.percent_complete()},
            {"detail", p.detail()},
            {"done", p.done()}};
  if (p.has_host()) {
    const podprof::v1::HostCaptureResult& h = p.host();
    j["host"] = {{"host", h.host_name()},
                 {"status", report::CaptureStatusName(h.status())},
                 {"error", h.error_message()},
                 {"events", h.event_count()},
                 {"bytes", h.bytes_received()},
                 {"clock_offset_ns", h.clock_offset_ns()},
                 {"clock_uncertainty_ns", h.clock_uncertainty_ns()}};
  }
  return absl::StrCat("event: ", p.done() ? "done" : "progress", "\ndata: ", JsonText(j), "\n\n");
}

// GET /api/v1/captures/{id}/events: the capture's progress as server-sent events, from its
// start, as `podprof capture` shows it; a capture already over gives its one `done` event.
Response Events(const HttpApiSources& src, const Request& req) {
  const std::string id = req.params.at("id");
  absl::StatusOr<storage::CaptureRow> stored = src.queries->StoredCapture(id);
  if (!stored.ok()) return Response::Error(stored.status());
  Response res;
  res.content_type = "text/event-stream";
  res.stream = [src, id](http::StreamWriter& w) {
    absl::Status s = src.orchestrator->Watch(
        id, [&w](const podprof::v1::CaptureProgress& p) { return w.Write(ProgressEvent(p)); },
        [&w] { return w.stopping(); });
    if (absl::IsNotFound(s)) {  // over before this process started, or long ago
      absl::StatusOr<storage::CaptureRow> c = src.queries->StoredCapture(id);
      if (!c.ok()) return;
      podprof::v1::CaptureProgress last;
      last.set_capture_id(id);
      last.set_status(StatusEnum(c->status));
      last.set_percent_complete(100);
      last.set_done(true);
      w.Write(ProgressEvent(last));
    }
  };
  return res;
}

}  // namespace

std::shared_ptr<http::Router> AggregatorRoutes(const HttpApiSources& src) {
  auto r = std::make_shared<http::Router>();
  r->Add("GET", "/metrics", [src](const Request&) {
    return Response::Text(200, src.metrics->Render(), "text/plain; version=0.0.4");
  });
  r->Add("GET", "/api/v1/captures", [src](const Request& q) { return Captures(src, q); });
  r->Add("GET", "/api/v1/captures/{id}", [src](const Request& q) { return Capture(src, q); });
  r->Add("GET", "/api/v1/captures/{id}/kernels",
         [src](const Request& q) { return Kernels(src, q); });
  r->Add("GET", "/api/v1/captures/{id}/stragglers",
         [src](const Request& q) { return Stragglers(src, q); });
  r->Add("GET", "/api/v1/kernels/{name}/history",
         [src](const Request& q) { return History(src, q); });
  r->Add("GET", "/api/v1/agents", [src](const Request& q) { return Agents(src, q); });
  r->Add("POST", "/api/v1/captures",
         [src](const Request& q) { return StartCapture(src, q, /*snapshot=*/false); });
  r->Add("POST", "/api/v1/snapshots",
         [src](const Request& q) { return StartCapture(src, q, /*snapshot=*/true); });
  r->Add("POST", "/api/v1/snapshots/webhook", [src](const Request& q) { return Webhook(src, q); });
  r->Add("GET", "/api/v1/telemetry", [src](const Request& q) { return Telemetry(src, q); });
  r->Add("GET", "/api/v1/captures/{id}/events", [src](const Request& q) { return Events(src, q); });
  r->Add("POST", "/api/v1/captures/{id}/cancel",
         [src](const Request& q) { return CancelCapture(src, q); });
  AddViewRoutes(src, *r);
  AddFleetRoutes(src, *r);
  AddDcnRoutes(src, *r);
  AddSqlRoutes(src, *r);
  AddMcpRoutes(src, *r);
  AddTriggerRoutes(src, *r);
  web::AddPageRoutes(*r);
  return r;
}

}  // namespace podprof::aggregator
