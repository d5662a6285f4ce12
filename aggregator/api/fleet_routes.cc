// GET /api/v1/fleet/history, /top and /regressions: the fleet store's questions (docs/FLEET.md)
// asked of the ClickHouse this aggregator replicates to, by fleet/queries.h, the one
// implementation `podprof fleet` asks through too, and written by report/fleet_rows.h, so that
// the CSV here is `podprof fleet ... --format csv`'s bytes. Reads: any caller that may read the
// pod may ask (over HTTPS, a certificate of the CA; no role).
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "aggregator/api/http_api.h"
#include "aggregator/api/http_params.h"
#include "common/json_text.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "fleet/queries.h"
#include "nlohmann/json.hpp"
#include "report/fleet_rows.h"

namespace podprof::aggregator {
namespace {

using http::Request;
using http::Response;
using nlohmann::json;

// Rows an answer holds at most: history's and regressions' `limit` (a default and a cap, as
// /api/v1/telemetry's), top's `top` (at most the cap). A fleet of many pods and kernels is
// otherwise one answer as large as ClickHouse's.
constexpr int64_t kDefaultFleetRows = 10'000;
constexpr int64_t kMaxFleetRows = 100'000;

// The question's filter from ?since= (how far back; `since` by default), ?pod= and
// ?label=k=v,k2=v2, on the ClickHouse [fleet] names.
absl::StatusOr<fleet::FleetFilter> FilterOf(const HttpApiSources& src, const Request& req,
                                            const char* since, int64_t* since_ns) {
  if (src.fleet == nullptr) {
    return absl::NotFoundError(
        "this aggregator has no [fleet] ClickHouse configured (docs/FLEET.md): ask one that "
        "replicates to the fleet store, or ClickHouse itself with `podprof fleet`");
  }
  fleet::FleetFilter f;
  f.database = src.fleet_database;
  f.pod = Param(req, "pod");
  const std::string text = Param(req, "since", since);
  absl::StatusOr<int64_t> ago = ParseDurationNs(text);
  if (!ago.ok() || *ago <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("since: \"", text, "\" is not a positive duration such as 30d or 24h"));
  }
  *since_ns = *ago;
  f.since_ns = src.clock->NowNs() - *ago;
  for (absl::string_view pair : absl::StrSplit(Param(req, "label"), ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.first.empty() || pair.find('=') == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("label: \"", pair, "\" is not key=value with a non-empty key"));
    }
    if (!f.labels.insert(std::move(kv)).second) {
      return absl::InvalidArgumentError(absl::StrCat("label: \"", pair, "\" given twice"));
    }
  }
  return f;
}

// A row count from ?`name`= (`fallback` when absent), at least 1 and at most kMaxFleetRows.
absl::StatusOr<int64_t> RowsParam(const Request& req, const char* name, int64_t fallback) {
  ASSIGN_OR_RETURN(const int64_t n, IntParam(req, name, fallback));
  return std::clamp<int64_t>(n, 1, kMaxFleetRows);
}

// ClickHouse refusing this aggregator's own [fleet] user is the aggregator's setting, not the
// caller's role: 409 naming it, where a 403 would send the caller after their certificate.
Response FleetError(const absl::Status& s) {
  if (absl::IsPermissionDenied(s)) {
    return Response::Error(absl::FailedPreconditionError(
        absl::StrCat("the fleet store refused this aggregator's [fleet] user: ", s.message())));
  }
  return Response::Error(s);
}

// `rows` as CSV (`csv`'s bytes) or as `podprof fleet --format json`'s object, with `truncated`
// beside them.
template <typename Row>
Response Render(bool want_csv, const std::vector<Row>& rows, bool truncated,
                void (*csv)(const std::vector<Row>&, std::ostream&), json body, const char* key,
                json (*to_json)(const std::vector<Row>&)) {
  if (want_csv) {
    std::ostringstream text;
    csv(rows, text);
    return Response::Text(200, text.str(), "text/csv; charset=utf-8");
  }
  body[key] = to_json(rows);
  body["truncated"] = truncated;
  return Response::Text(200, JsonText(body, 1) + "\n", "application/json");
}

// GET /api/v1/fleet/history?regex=&since=30d&pod=&label=k=v,...&limit=: `podprof fleet history`.
Response History(const HttpApiSources& src, const Request& req) {
  int64_t since_ns = 0;
  absl::StatusOr<fleet::FleetFilter> f = FilterOf(src, req, "30d", &since_ns);
  if (!f.ok()) return Response::Error(f.status());
  const std::string regex = Param(req, "regex");
  if (regex.empty()) {
    return Response::Error(absl::InvalidArgumentError(
        "regex: give the kernel op names to match (RE2, a partial match), e.g. regex=fusion"));
  }
  if (absl::Status s = CheckUserPattern("regex", regex); !s.ok()) return Response::Error(s);
  absl::StatusOr<int64_t> limit = RowsParam(req, "limit", kDefaultFleetRows);
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!limit.ok() || !csv.ok()) return Response::Error(!csv.ok() ? csv.status() : limit.status());
  f->max_rows = *limit + 1;  // one more than shown says whether there were more
  absl::StatusOr<std::vector<fleet::FleetPoint>> points =
      fleet::FleetHistory(*src.fleet, regex, *f);
  if (!points.ok()) return FleetError(points.status());
  std::vector<report::FleetHistoryRow> rows = fleet::HistoryRows(*points);
  const bool truncated = static_cast<int64_t>(rows.size()) > *limit;
  if (truncated) rows.resize(*limit);
  return Render(*csv, rows, truncated, report::WriteFleetHistoryCsv, json::object(), "points",
                report::FleetHistoryJson);
}

// GET /api/v1/fleet/top?by=kernel&since=24h&pod=&top=20: `podprof fleet top`.
Response Top(const HttpApiSources& src, const Request& req) {
  int64_t since_ns = 0;
  absl::StatusOr<fleet::FleetFilter> f = FilterOf(src, req, "24h", &since_ns);
  if (!f.ok()) return Response::Error(f.status());
  absl::StatusOr<fleet::TopBy> by = fleet::TopByNamed(Param(req, "by", "kernel"));
  if (!by.ok()) return Response::Error(by.status());
  absl::StatusOr<int64_t> top = RowsParam(req, "top", 20);
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!top.ok() || !csv.ok()) return Response::Error(!csv.ok() ? csv.status() : top.status());
  absl::StatusOr<std::vector<fleet::FleetTopRow>> rows =
      fleet::FleetTop(*src.fleet, *by, *f, static_cast<int>(*top));
  if (!rows.ok()) return FleetError(rows.status());
  return Render(*csv, fleet::TopRows(*rows), false, report::WriteFleetTopCsv,
                json{{"by", fleet::TopByName(*by)}}, "rows", report::FleetTopJson);
}

// GET /api/v1/fleet/regressions?since=7d&pod=&threshold=0.05&limit=: `podprof fleet
// regressions`, [now - since, now) against the period before it.
Response Regressions(const HttpApiSources& src, const Request& req) {
  int64_t period_ns = 0;
  absl::StatusOr<fleet::FleetFilter> f = FilterOf(src, req, "7d", &period_ns);
  if (!f.ok()) return Response::Error(f.status());
  const std::string text = Param(req, "threshold", "0.05");
  double threshold = 0;
  if (!absl::SimpleAtod(text, &threshold) || !std::isfinite(threshold) || threshold < 0) {
    return Response::Error(absl::InvalidArgumentError(
        absl::StrCat("threshold='", text, "' is not a fraction >= 0 (0.05 = 5%)")));
  }
  absl::StatusOr<int64_t> limit = RowsParam(req, "limit", kDefaultFleetRows);
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!limit.ok() || !csv.ok()) return Response::Error(!csv.ok() ? csv.status() : limit.status());
  absl::StatusOr<std::vector<fleet::FleetRegression>> judged =
      fleet::FleetRegressions(*src.fleet, *f, f->since_ns + period_ns, period_ns, threshold);
  if (!judged.ok()) return FleetError(judged.status());
  std::vector<report::FleetRegressionRow> rows = fleet::RegressionRows(*judged);
  const bool truncated = static_cast<int64_t>(rows.size()) > *limit;
  if (truncated) rows.resize(*limit);  // regressions come first: the rest is what goes
  return Render(*csv, rows, truncated, report::WriteFleetRegressionsCsv, json::object(), "kernels",
                report::FleetRegressionsJson);
}

}  // namespace

void AddFleetRoutes(const HttpApiSources& src, http::Router& router) {
  router.Add("GET", "/api/v1/fleet/history", [src](const Request& q) { return History(src, q); });
  router.Add("GET", "/api/v1/fleet/top", [src](const Request& q) { return Top(src, q); });
  router.Add("GET", "/api/v1/fleet/regressions",
             [src](const Request& q) { return Regressions(src, q); });
}

}  // namespace podprof::aggregator
