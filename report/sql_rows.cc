#include "report/sql_rows.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "report/format.h"

namespace podprof::report {
namespace {

nlohmann::json ValueJson(const v1::SqlValue& v) {
  switch (v.value_case()) {
    case v1::SqlValue::kInteger:
      return v.integer();
    case v1::SqlValue::kReal:
      return v.real();
    case v1::SqlValue::kText:
      return v.text();
    default:
      return nullptr;
  }
}

}  // namespace

nlohmann::json SqlAnswerJson(const v1::SqlResponse& answer) {
  nlohmann::json rows = nlohmann::json::array();
  for (const v1::SqlRow& row : answer.rows()) {
    nlohmann::json values = nlohmann::json::array();
    for (const v1::SqlValue& v : row.values()) values.push_back(ValueJson(v));
    rows.push_back(std::move(values));
  }
  return nlohmann::json{
      {"columns", std::vector<std::string>(answer.columns().begin(), answer.columns().end())},
      {"rows", std::move(rows)},
      {"truncated", answer.truncated()},
      {"elapsed_ms", static_cast<double>(answer.elapsed_ns()) / 1e6},
      {"provenance", ProvenanceJson(answer.provenance())},
  };
}

nlohmann::json ProvenanceJson(const v1::Provenance& p) {
  return {{"capture", p.capture_id()},
          {"hosts", p.hosts()},
          {"start_ns", p.start_ns()},
          {"end_ns", p.end_ns()},
          {"clock_error_ns", p.clock_error_ns()},
          {"podprof_version", p.podprof_version()}};
}

std::string SqlAnswerJsonText(const v1::SqlResponse& answer) {
  return SqlAnswerJson(answer).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string SqlValueText(const v1::SqlValue& v, bool exact) {
  switch (v.value_case()) {
    case v1::SqlValue::kInteger:
      return absl::StrCat(v.integer());
    case v1::SqlValue::kReal:
      return exact ? absl::StrFormat("%.17g", v.real()) : absl::StrFormat("%.6g", v.real());
    case v1::SqlValue::kText:
      return v.text();
    default:
      return exact ? "" : "NULL";
  }
}

void WriteSqlCsv(const v1::SqlResponse& answer, std::ostream& out) {
  for (int i = 0; i < answer.columns_size(); ++i) {
    out << (i ? "," : "") << CsvField(answer.columns(i));
  }
  out << "\n";
  for (const v1::SqlRow& row : answer.rows()) {
    for (int i = 0; i < row.values_size(); ++i) {
      out << (i ? "," : "") << CsvField(SqlValueText(row.values(i), /*exact=*/true));
    }
    out << "\n";
  }
}

}  // namespace podprof::report
