// Queries::Sql: a statement over one capture's tables (sql/), its answer in the API's form.
#include <algorithm>
#include <string>
#include <variant>

#include "absl/strings/str_cat.h"
#include "aggregator/api/queries.h"
#include "common/status_macros.h"
#include "podprof_version.h"
#include "sql/capture_tables.h"

namespace podprof::aggregator {
namespace {

void SetValue(const sql::Value& v, v1::SqlValue* out) {
  if (const auto* i = std::get_if<int64_t>(&v)) {
    out->set_integer(*i);
  } else if (const auto* d = std::get_if<double>(&v)) {
    out->set_real(*d);
  } else if (const auto* s = std::get_if<std::string>(&v)) {
    out->set_text(*s);
  }
}

}  // namespace

v1::Provenance ProvenanceOf(const storage::CaptureRow& capture) {
  v1::Provenance p;
  p.set_capture_id(capture.id);
  p.set_hosts(static_cast<int64_t>(capture.host_rows.size()));
  p.set_start_ns(capture.start_ns);
  p.set_end_ns(capture.end_ns);
  int64_t error = 0;
  for (const storage::HostRow& h : capture.host_rows) {
    error = std::max(error, h.clock_uncertainty_ns);
  }
  p.set_clock_error_ns(error);
  p.set_podprof_version(kVersion);
  return p;
}

absl::StatusOr<v1::SqlResponse> Queries::Sql(const v1::SqlRequest& request) {
  if (request.capture_id().empty()) {
    return absl::InvalidArgumentError("sql: capture_id is required");
  }
  {
    absl::MutexLock lock(&sql_mu_);
    if (sql_running_ >= kMaxSqlStatements) {
      return absl::ResourceExhaustedError(
          absl::StrCat("sql: ", kMaxSqlStatements,
                       " statements are running already, the most at once; try again when one "
                       "has finished"));
    }
    ++sql_running_;
  }
  struct Done {
    Queries* q;
    ~Done() {
      absl::MutexLock lock(&q->sql_mu_);
      --q->sql_running_;
    }
  } done{this};

  sql::Limits limits;
  limits.time_limit_ns = kSqlTimeLimitNs;
  limits.memory_bytes = kSqlMemoryBytes;
  limits.max_rows =
      request.max_rows() == 0 ? kDefaultSqlRows : std::min(request.max_rows(), kMaxSqlRows);
  const sql::StoreSources sources{&reads_.captures(), &reads_.kernels(), &reads_.telemetry()};
  ASSIGN_OR_RETURN(std::unique_ptr<sql::CaptureTables> tables,
                   sql::CaptureTables::Open(sources, request.capture_id()));
  ASSIGN_OR_RETURN(sql::Result result, sql::RunStatement(request.statement(), tables->tables(),
                                                         limits, registry_.clock()));
  v1::SqlResponse response;
  for (const std::string& c : result.columns) response.add_columns(c);
  for (const auto& row : result.rows) {
    v1::SqlRow* r = response.add_rows();
    for (const sql::Value& v : row) SetValue(v, r->add_values());
  }
  response.set_truncated(result.truncated);
  response.set_elapsed_ns(result.elapsed_ns);
  response.set_peak_bytes(result.peak_bytes);
  *response.mutable_provenance() = ProvenanceOf(tables->capture());
  return response;
}

}  // namespace podprof::aggregator
