// GET /api/v1/captures/{id}/dcn: a capture's cross-slice (DCN) transfers as `podprof dcn`
// asks them (Queries::Dcn, the one implementation both APIs answer from) and written by
// report/dcn_rows.h, so that the JSON here is `podprof dcn --format json`'s bytes and the CSV
// of ?table= is `podprof dcn --format csv --table ...`'s. A read: any caller that may read the
// pod may ask, as for the capture's other reads (no role).
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "aggregator/api/http_api.h"
#include "aggregator/api/http_params.h"
#include "aggregator/api/utf8_fields.h"
#include "report/dcn_rows.h"

namespace podprof::aggregator {
namespace {

using http::Request;
using http::Response;

// ?top= (the worst transfers kept), ?cells=1 (the slices x instances matrix, in the JSON),
// ?format=json|csv and, for CSV, ?table= (links by default).
Response Dcn(const HttpApiSources& src, const Request& req) {
  v1::GetDcnRequest r;
  r.set_capture_id(req.params.at("id"));
  absl::StatusOr<int64_t> top = IntParam(req, "top", 0);
  if (!top.ok()) return Response::Error(top.status());
  r.set_top(static_cast<uint32_t>(std::min<int64_t>(*top, kMaxDcnTop)));
  absl::StatusOr<int64_t> cells = IntParam(req, "cells", 0);
  if (!cells.ok()) return Response::Error(cells.status());
  r.set_cells(*cells != 0);
  absl::StatusOr<bool> csv = WantsCsv(req);
  if (!csv.ok()) return Response::Error(csv.status());
  const std::string table = Param(req, "table", "links");
  const auto& tables = report::DcnTablesByName();
  const auto named = tables.find(table);
  if (named == tables.end()) {
    std::vector<std::string> names;
    for (const auto& entry : tables) names.push_back(entry.first);
    return Response::Error(absl::InvalidArgumentError(absl::StrCat(
        "table: unknown table \"", table, "\" (use ", absl::StrJoin(names, ", "), ")")));
  }
  absl::StatusOr<v1::GetDcnResponse> answer = src.queries->Dcn(r);
  if (!answer.ok()) return Response::Error(answer.status());
  EscapeInvalidUtf8Fields(&*answer);  // host names as `\xNN`, as gRPC answers them
  if (*csv) {
    std::ostringstream text;
    report::WriteDcnCsv(*answer, named->second, text);
    return Response::Text(200, text.str(), "text/csv; charset=utf-8");
  }
  return Response::Text(200, report::DcnJsonText(*answer), "application/json");
}

}  // namespace

void AddDcnRoutes(const HttpApiSources& src, http::Router& router) {
  router.Add("GET", "/api/v1/captures/{id}/dcn", [src](const Request& q) { return Dcn(src, q); });
}

}  // namespace podprof::aggregator
