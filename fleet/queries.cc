#include "fleet/queries.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "insight/change.h"
#include "nlohmann/json.hpp"

namespace podprof::fleet {
namespace {

using nlohmann::json;

// WHERE conditions of `filter` on a table with start_ns, pod and (with labels) label_keys
// and label_values.
std::string Where(const FleetFilter& filter) {
  std::vector<std::string> conds = {
      absl::StrCat("start_ns >= ", std::max<int64_t>(0, filter.since_ns))};
  if (!filter.pod.empty()) conds.push_back("pod = " + Quote(filter.pod));
  for (const auto& [k, v] : filter.labels) {
    conds.push_back(absl::StrCat("label_values[indexOf(label_keys, ", Quote(k), ")] = ", Quote(v)));
  }
  return absl::StrJoin(conds, " AND ");
}

// Runs a SELECT with FORMAT JSONCompact and returns its rows.
absl::StatusOr<json> Rows(const ClickHouse& ch, const std::string& select) {
  ASSIGN_OR_RETURN(std::string body, ch.Query(select + " FORMAT JSONCompact"));
  json doc = json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.contains("data") || !doc["data"].is_array()) {
    return absl::DataLossError(
        absl::StrCat("ClickHouse at ", ch.url(), " answered something other than JSONCompact"));
  }
  return std::move(doc["data"]);
}

// Runs `select` and calls `read` on each row in turn, stopping at its first error. A row of
// another shape than `read` expects (a json exception) is DataLoss naming `what` and the server.
absl::Status ForEachRow(const ClickHouse& ch, const std::string& select, const char* what,
                        const std::function<absl::Status(const json&)>& read) {
  ASSIGN_OR_RETURN(json rows, Rows(ch, select));
  try {
    for (const json& r : rows) RETURN_IF_ERROR(read(r));
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat(what, " from ", ch.url(), ": ", e.what()));
  }
  return absl::OkStatus();
}

// A merged sketch from (zero_count, sumMap(bin_index, bin_count)) columns.
absl::StatusOr<trace::DDSketch> SketchOf(const json& zero, const json& bins) {
  if (!bins.is_array() || bins.size() != 2) {
    return absl::DataLossError("a sketch's bins did not come back as two arrays");
  }
  return trace::DDSketch::FromBins(zero.get<uint64_t>(), bins[0].get<std::vector<int32_t>>(),
                                   bins[1].get<std::vector<uint64_t>>());
}

int64_t Q(const trace::DDSketch& s, double q) { return std::llround(s.Quantile(q)); }

// The table a query reads: every shard's rows.
std::string All(const FleetFilter& f, const char* table) {
  return absl::StrCat(f.database, ".", table, "_all");
}

}  // namespace

absl::StatusOr<std::vector<FleetPoint>> FleetHistory(const ClickHouse& ch,
                                                     const std::string& op_regex,
                                                     const FleetFilter& filter) {
  RETURN_IF_ERROR(CheckUserPattern("op_regex", op_regex));
  const std::string sql = absl::StrCat(
      "SELECT pod, module, op_name, capture_id, start_ns, sum(count), sum(total_ps), "
      "max(chips), sum(zero_count), sumMap(bin_index, bin_count) FROM ",
      All(filter, "kernel_rollups"), " WHERE ", Where(filter), " AND match(op_name, ",
      Quote(op_regex), ") GROUP BY pod, module, op_name, capture_id, start_ns ",
      "ORDER BY module, op_name, pod, start_ns, capture_id",
      filter.max_rows > 0 ? absl::StrCat(" LIMIT ", filter.max_rows) : "");
  std::vector<FleetPoint> out;
  RETURN_IF_ERROR(ForEachRow(ch, sql, "history", [&](const json& r) -> absl::Status {
    FleetPoint p;
    p.pod = r[0];
    p.module = r[1];
    p.op_name = r[2];
    p.capture_id = r[3];
    p.start_ns = r[4].get<int64_t>();
    p.count = r[5].get<int64_t>();
    p.total_ps = r[6].get<int64_t>();
    p.chips = r[7].get<int64_t>();
    ASSIGN_OR_RETURN(p.sketch, SketchOf(r[8], r[9]));
    out.push_back(std::move(p));
    return absl::OkStatus();
  }));
  return out;
}

const char* TopByName(TopBy by) {
  return by == TopBy::kKernel ? "kernel" : by == TopBy::kPod ? "pod" : "host";
}

absl::StatusOr<TopBy> TopByNamed(const std::string& name) {
  for (TopBy by : {TopBy::kKernel, TopBy::kPod, TopBy::kHost}) {
    if (name == TopByName(by)) return by;
  }
  return absl::InvalidArgumentError(absl::StrCat("by '", name, "': use kernel, pod or host"));
}

absl::StatusOr<std::vector<FleetTopRow>> FleetTop(const ClickHouse& ch, TopBy by,
                                                  const FleetFilter& filter, int limit) {
  // Kernels and pods from the per-capture roll-ups; hosts need the per-chip rows.
  const char* keys = by == TopBy::kKernel ? "'', '', module, op_name"
                     : by == TopBy::kPod  ? "pod, '', '', ''"
                                          : "pod, host, '', ''";
  const char* group = by == TopBy::kKernel ? "module, op_name"
                      : by == TopBy::kPod  ? "pod"
                                           : "pod, host";
  FleetFilter f = filter;
  if (by == TopBy::kHost) f.labels.clear();  // per-chip rows carry no labels
  const std::string sql = absl::StrCat(
      "SELECT ", keys,
      ", sum(count), sum(total_ps) AS total, uniqExact(pod, capture_id), "
      "uniqExact(pod), sum(zero_count), sumMap(bin_index, bin_count) FROM ",
      All(filter, by == TopBy::kHost ? "kernel_stats" : "kernel_rollups"), " WHERE ", Where(f),
      " GROUP BY ", group, " ORDER BY total DESC, ", group, " LIMIT ", std::max(1, limit));
  std::vector<FleetTopRow> out;
  RETURN_IF_ERROR(ForEachRow(ch, sql, "top", [&](const json& r) -> absl::Status {
    FleetTopRow t;
    t.pod = r[0];
    t.host = r[1];
    t.module = r[2];
    t.op_name = r[3];
    t.count = r[4].get<int64_t>();
    t.total_ps = r[5].get<int64_t>();
    t.captures = r[6].get<int64_t>();
    t.pods = r[7].get<int64_t>();
    ASSIGN_OR_RETURN(t.sketch, SketchOf(r[8], r[9]));
    out.push_back(std::move(t));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<FleetRegression>> FleetRegressions(const ClickHouse& ch,
                                                              const FleetFilter& filter,
                                                              int64_t now_ns, int64_t period_ns,
                                                              double threshold) {
  FleetFilter f = filter;
  f.since_ns = now_ns - 2 * period_ns;
  const int64_t mid = now_ns - period_ns;
  const std::string sql = absl::StrCat(
      "SELECT pod, module, op_name, start_ns >= ", mid, " AS current, uniqExact(capture_id), ",
      "sum(zero_count), sumMap(bin_index, bin_count) FROM ", All(f, "kernel_rollups"), " WHERE ",
      Where(f), " AND start_ns < ", now_ns, " GROUP BY pod, module, op_name, current");
  std::map<std::tuple<std::string, std::string, std::string>, FleetRegression> by_key;
  RETURN_IF_ERROR(ForEachRow(ch, sql, "regressions", [&](const json& r) -> absl::Status {
    FleetRegression& g = by_key[{r[0], r[1], r[2]}];
    g.pod = r[0];
    g.module = r[1];
    g.op_name = r[2];
    const bool current = r[3].get<int>() != 0;
    (current ? g.candidate_captures : g.baseline_captures) = r[4].get<int64_t>();
    ASSIGN_OR_RETURN((current ? g.candidate : g.baseline), SketchOf(r[5], r[6]));
    return absl::OkStatus();
  }));
  std::vector<FleetRegression> out;
  for (auto& [key, g] : by_key) {
    if (g.baseline.empty() || g.candidate.empty()) continue;  // nothing to compare with
    const insight::QuantileShift median = insight::MedianShift(g.baseline, g.candidate, threshold);
    const insight::QuantileShift tail = insight::TailShift(g.baseline, g.candidate, threshold);
    g.p50_change = median.change;
    g.p50_regressed = median.regressed;
    g.p99_change = tail.change;
    g.p99_regressed = tail.regressed;
    out.push_back(std::move(g));
  }
  // Stable: rows of equal change (often many at 0) keep the groups' key order, so that the
  // order is the same on every run and every machine, not what std::sort's pivots leave.
  std::stable_sort(out.begin(), out.end(), [](const FleetRegression& a, const FleetRegression& b) {
    const bool ra = a.p50_regressed || a.p99_regressed, rb = b.p50_regressed || b.p99_regressed;
    if (ra != rb) return ra;
    return std::max(a.p50_change, a.p99_change) > std::max(b.p50_change, b.p99_change);
  });
  return out;
}

std::vector<report::FleetHistoryRow> HistoryRows(const std::vector<FleetPoint>& points) {
  std::vector<report::FleetHistoryRow> out;
  out.reserve(points.size());
  for (const FleetPoint& p : points) {
    out.push_back({p.pod, p.op_name, p.module, p.capture_id, p.start_ns, p.count, p.chips,
                   p.total_ps, Q(p.sketch, 0.5), Q(p.sketch, 0.9), Q(p.sketch, 0.99)});
  }
  return out;
}

std::vector<report::FleetTopRow> TopRows(const std::vector<FleetTopRow>& rows) {
  std::vector<report::FleetTopRow> out;
  out.reserve(rows.size());
  for (const FleetTopRow& r : rows) {
    out.push_back({r.pod, r.host, r.module, r.op_name, r.count, r.total_ps, r.captures, r.pods,
                   Q(r.sketch, 0.5), Q(r.sketch, 0.99)});
  }
  return out;
}

std::vector<report::FleetRegressionRow> RegressionRows(const std::vector<FleetRegression>& rows) {
  std::vector<report::FleetRegressionRow> out;
  out.reserve(rows.size());
  for (const FleetRegression& r : rows) {
    out.push_back({r.pod, r.op_name, r.module, r.baseline_captures, r.candidate_captures,
                   Q(r.baseline, 0.5), Q(r.candidate, 0.5), Q(r.baseline, 0.99),
                   Q(r.candidate, 0.99), r.p50_change, r.p99_change, r.p50_regressed,
                   r.p99_regressed});
  }
  return out;
}

}  // namespace podprof::fleet
