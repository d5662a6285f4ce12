// POST /api/v1/sql: one read-only SQL statement over a capture's tables (Queries::Sql, the
// implementation gRPC's Aggregator.Sql answers from too; docs/SQL.md). A read, so no role is
// asked for, as for the capture's other reads; it is a POST because a statement does not fit a
// URL. Body: {"capture": "...", "query": "SELECT ...", "max_rows": N}.
#include <string>

#include "aggregator/api/http_api.h"
#include "aggregator/api/utf8_fields.h"
#include "common/status_macros.h"
#include "http/json_body.h"
#include "nlohmann/json.hpp"
#include "report/sql_rows.h"

namespace podprof::aggregator {
namespace {

using http::Request;
using http::Response;

absl::StatusOr<std::string> Answer(const HttpApiSources& src, const Request& req) {
  ASSIGN_OR_RETURN(const nlohmann::json body, http::ParseJsonObject(req.body));
  RETURN_IF_ERROR(http::OnlyKnownFields(body, {"capture", "query", "max_rows"}));
  v1::SqlRequest r;
  ASSIGN_OR_RETURN(std::string capture, http::StringField(body, "capture", ""));
  ASSIGN_OR_RETURN(std::string query, http::StringField(body, "query", ""));
  ASSIGN_OR_RETURN(uint64_t max_rows, http::UintField(body, "max_rows", 0, kMaxSqlRows, 0));
  if (capture.empty()) return absl::InvalidArgumentError("capture: required");
  if (query.empty()) return absl::InvalidArgumentError("query: required");
  r.set_capture_id(capture);
  r.set_statement(query);
  r.set_max_rows(static_cast<uint32_t>(max_rows));
  ASSIGN_OR_RETURN(v1::SqlResponse answer, src.queries->Sql(r));
  EscapeInvalidUtf8Fields(&answer);  // stored names as `\xNN`, as gRPC answers them
  return report::SqlAnswerJsonText(answer);
}

}  // namespace

void AddSqlRoutes(const HttpApiSources& src, http::Router& router) {
  router.Add("POST", "/api/v1/sql", [src](const Request& q) {
    absl::StatusOr<std::string> answer = Answer(src, q);
    if (!answer.ok()) return Response::Error(answer.status());
    return Response::Text(200, *answer, "application/json");
  });
}

}  // namespace podprof::aggregator
