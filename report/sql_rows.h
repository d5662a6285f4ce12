// A SQL answer (Aggregator.Sql) as `podprof sql` prints it and POST /api/v1/sql returns it: one
// JSON shape for both ({"columns", "rows", "truncated", "elapsed_ms", "provenance"}), CSV, and
// an aligned table.
#ifndef PODPROF_REPORT_SQL_ROWS_H_
#define PODPROF_REPORT_SQL_ROWS_H_

#include <ostream>
#include <string>

#include "nlohmann/json_fwd.hpp"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::report {

nlohmann::json SqlAnswerJson(const v1::SqlResponse& answer);
// {"capture", "hosts", "start_ns", "end_ns", "clock_error_ns", "podprof_version"}: the
// provenance block of the SQL answer and of MCP's.
nlohmann::json ProvenanceJson(const v1::Provenance& p);
// The JSON as text; invalid UTF-8 in stored names replaced, never refused.
std::string SqlAnswerJsonText(const v1::SqlResponse& answer);
// A header of the column names, then a line per row (NULL as an empty field).
void WriteSqlCsv(const v1::SqlResponse& answer, std::ostream& out);
// One value as text: integers whole, reals with up to 6 significant digits in the table (all
// 17 in CSV and JSON), NULL as "NULL" (table) or "" (CSV).
std::string SqlValueText(const v1::SqlValue& v, bool exact);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_SQL_ROWS_H_
