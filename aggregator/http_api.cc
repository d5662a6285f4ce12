#include "aggregator/http_api.h"

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "aggregator/service_internal.h"
#include "fleet/capture_rows.h"
#include "insight/verdict.h"
#include "nlohmann/json.hpp"

namespace podprof::aggregator {
namespace {

using Json = nlohmann::ordered_json;  // keys in the order written: CSV columns follow it
using http::Request;
using http::Response;

// `s` as one CSV field (RFC 4180).
std::string CsvCell(const Json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump();
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  return out + "\"";
}

// `rows` (an array of flat objects) under `key`, as JSON or, with ?format=csv, as CSV with a
// header of the first row's keys.
Response Rows(const Request& req, const char* key, const Json& rows) {
  auto f = req.query.find("format");
  if (f == req.query.end() || f->second == "json") {
    return Response::Text(200, Json{{key, rows}}.dump(1) + "\n", "application/json");
  }
  if (f->second != "csv") {
    return Response::Error(
        absl::InvalidArgumentError(absl::StrCat("format '", f->second, "': use json or csv")));
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

std::string Param(const Request& req, const char* name, const std::string& fallback = "") {
  auto it = req.query.find(name);
  return it == req.query.end() ? fallback : it->second;
}

absl::StatusOr<int> IntParam(const Request& req, const char* name, int fallback) {
  const std::string v = Param(req, name);
  int n = fallback;
  if (!v.empty() && (!absl::SimpleAtoi(v, &n) || n < 0)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", v, "' is not a count"));
  }
  return n;
}

Json CaptureJson(const storage::CaptureRow& c) {
  Json labels = Json::object();
  for (const auto& [k, v] : c.labels) labels[k] = v;
  return {{"id", c.id},         {"status", c.status},
          {"source", c.source}, {"start_ns", c.start_ns},
          {"end_ns", c.end_ns}, {"hosts", c.hosts},
          {"chips", c.chips},   {"kernels", c.kernels},
          {"events", c.events}, {"labels", labels.dump()}};
}

Json StatJson(const storage::StatRow& r, const storage::KernelInsightRow* in) {
  const insight::Verdict v = insight::Decide(fleet::FactsOf(r, in));
  const double mean = r.count > 0 ? static_cast<double>(r.total_ps) / r.count : 0;
  return {{"host", r.host},
          {"chip", r.chip},
          {"module", r.kernel.module},
          {"kernel", r.kernel.op_name},
          {"category", r.kernel.category},
          {"count", r.count},
          {"chips", r.chips},
          {"total_ps", r.total_ps},
          {"mean_ps", std::llround(mean)},
          {"min_ps", r.min_ps},
          {"max_ps", r.max_ps},
          {"p50_ps", std::llround(r.sketch.Quantile(0.5))},
          {"p90_ps", std::llround(r.sketch.Quantile(0.9))},
          {"p99_ps", std::llround(r.sketch.Quantile(0.99))},
          {"achieved_tflops", v.achieved_tflops},
          {"achieved_gbps", v.achieved_gbps},
          {"bound", insight::BoundName(v.bound)},
          {"cause", v.cause},
          {"verdict", v.text}};
}

Response Captures(const HttpApiSources& src, const Request& req) {
  storage::CaptureQuery q;
  q.status = Param(req, "status");
  absl::StatusOr<int> limit = IntParam(req, "limit", 100);
  if (!limit.ok()) return Response::Error(limit.status());
  q.limit = *limit;
  const std::string label = Param(req, "label");
  if (!label.empty()) {
    std::pair<std::string, std::string> kv = absl::StrSplit(label, absl::MaxSplits('=', 1));
    q.labels[kv.first] = kv.second;
  }
  std::string next;
  absl::StatusOr<std::vector<storage::CaptureRow>> rows = src.store->ListCaptures(q, &next);
  if (!rows.ok()) return Response::Error(rows.status());
  Json out = Json::array();
  for (const auto& c : *rows) out.push_back(CaptureJson(c));
  return Rows(req, "captures", out);
}

Response Capture(const HttpApiSources& src, const Request& req) {
  absl::StatusOr<storage::CaptureRow> c = src.store->GetCapture(req.params.at("id"));
  if (!c.ok()) return Response::Error(c.status());
  Json hosts = Json::array();
  for (const auto& h : c->host_rows) {
    hosts.push_back({{"host", h.host},
                     {"status", h.status},
                     {"error", h.error},
                     {"clock_offset_ns", h.clock_offset_ns},
                     {"clock_uncertainty_ns", h.clock_uncertainty_ns},
                     {"clock_drift_ppb", h.correction.drift_ppb},
                     {"events", h.events}});
  }
  if (Param(req, "format") == "csv") return Rows(req, "hosts", hosts);
  Json j = CaptureJson(*c);
  j["hosts_detail"] = hosts;
  return Response::Text(200, j.dump(1) + "\n", "application/json");
}

Response Kernels(const HttpApiSources& src, const Request& req) {
  storage::StatsQuery q;
  q.capture_id = req.params.at("id");
  const std::string by = Param(req, "by", "kernel");
  const bool per_chip = by == "chip";
  if (by == "chip") {
    q.group_by = storage::Grouping::kChip;
  } else if (by == "host") {
    q.group_by = storage::Grouping::kHost;
  } else if (by == "category") {
    q.group_by = storage::Grouping::kCategory;
  } else if (by != "kernel") {
    return Response::Error(absl::InvalidArgumentError(
        absl::StrCat("by='", by, "': use kernel, chip, host or category")));
  }
  q.op_regex = Param(req, "kernel");
  absl::StatusOr<int> top = IntParam(req, "top", 0);
  if (!top.ok()) return Response::Error(top.status());
  q.top = *top;
  absl::StatusOr<std::vector<storage::StatRow>> rows = src.store->KernelStats(q);
  if (!rows.ok()) return Response::Error(rows.status());
  absl::StatusOr<std::vector<storage::KernelInsightRow>> insights =
      src.store->KernelInsights(q.capture_id, per_chip);
  std::map<std::tuple<std::string, int, int64_t>, const storage::KernelInsightRow*> by_key;
  if (insights.ok()) {
    for (const auto& in : *insights) by_key[{in.host, in.chip, in.kernel_id}] = &in;
  }
  Json out = Json::array();
  for (const auto& r : *rows) {
    auto it = by_key.find({per_chip ? r.host : "", per_chip ? r.chip : -1, r.kernel.id});
    const bool pod_wide = q.group_by == storage::Grouping::kKernel || per_chip;
    out.push_back(StatJson(r, pod_wide && it != by_key.end() ? it->second : nullptr));
  }
  return Rows(req, "kernels", out);
}

Response Stragglers(const HttpApiSources& src, const Request& req) {
  absl::StatusOr<storage::StragglerReport> r = src.store->Stragglers(req.params.at("id"));
  if (!r.ok()) return Response::Error(r.status());
  Json out = Json::array();
  for (const auto& s : r->chips) {
    out.push_back({{"host", s.host},
                   {"chip", s.chip_ordinal},
                   {"times_last", s.times_last},
                   {"instances", s.instances},
                   {"caused_ps", s.caused_ps},
                   {"lateness_ps", s.lateness_ps}});
  }
  return Rows(req, "stragglers", out);
}

Response History(const HttpApiSources& src, const Request& req) {
  storage::HistoryQuery q;
  q.op_regex = "^" + RegexEscape(req.params.at("name")) + "$";
  q.module = Param(req, "module");
  const std::string since = Param(req, "since");
  if (!since.empty()) {
    absl::StatusOr<int64_t> ago = ParseDurationNs(since);
    if (!ago.ok())
      return Response::Error(
          absl::InvalidArgumentError(absl::StrCat("since: ", ago.status().message())));
    q.since_ns = src.clock->NowNs() - *ago;
  }
  absl::StatusOr<std::vector<storage::HistorySeries>> series = src.store->KernelHistory(q);
  if (!series.ok()) return Response::Error(series.status());
  Json out = Json::array();
  for (const auto& s : *series) {
    for (const auto& p : s.points) {
      out.push_back(
          {{"module", s.module},
           {"kernel", s.op_name},
           {"capture", p.capture_id},
           {"start_ns", p.start_ns},
           {"count", p.count},
           {"chips", p.chips},
           {"total_ps", p.total_ps},
           {"mean_ps", p.count > 0 ? std::llround(static_cast<double>(p.total_ps) / p.count) : 0},
           {"p50_ps", std::llround(p.sketch.Quantile(0.5))},
           {"p90_ps", std::llround(p.sketch.Quantile(0.9))},
           {"p99_ps", std::llround(p.sketch.Quantile(0.99))},
           {"achieved_tflops", p.achieved_tflops}});
    }
  }
  return Rows(req, "points", out);
}

Response Agents(const HttpApiSources& src, const Request& req) {
  Json out = Json::array();
  for (const auto& a : src.agents->List({})) {
    out.push_back({{"host", a.host().host_name()},
                   {"address", a.host().agent_address()},
                   {"state", podprof::v1::AgentState_Name(a.state())},
                   {"chips", a.host().chips_size()},
                   {"last_heartbeat_ns", a.last_heartbeat_ns()},
                   {"clock_offset_ns", a.clock().offset_ns()},
                   {"clock_uncertainty_ns", a.clock().uncertainty_ns()},
                   {"clock_drift_ppb", a.clock().drift_ppb()},
                   {"active_capture_id", a.active_capture_id()}});
  }
  return Rows(req, "agents", out);
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
  return r;
}

}  // namespace podprof::aggregator
