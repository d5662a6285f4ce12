// The fleet store's answers (`podprof fleet history|top|regressions`, docs/FLEET.md) as the CLI
// and the aggregator's /api/v1/fleet routes write them: JSON, CSV and the table, from rows whose
// percentiles fleet/queries.h has already read from the merged sketches. One writer per form,
// so the CLI's CSV and the HTTP API's are the same bytes (tested).
#ifndef PODPROF_REPORT_FLEET_ROWS_H_
#define PODPROF_REPORT_FLEET_ROWS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace podprof::report {

// One capture's figures for one kernel (module, op name) in one pod. Durations in ps.
struct FleetHistoryRow {
  std::string pod, kernel, module, capture;
  int64_t start_ns = 0;  // the capture's start, ns since the Unix epoch
  int64_t count = 0, chips = 0, total_ps = 0;
  int64_t p50_ps = 0, p90_ps = 0, p99_ps = 0;
};

// A kernel, pod or host of `podprof fleet top` (the fields it is not grouped by are empty).
struct FleetTopRow {
  std::string pod, host, module, kernel;
  int64_t count = 0, total_ps = 0;
  int64_t captures = 0, pods = 0;
  int64_t p50_ps = 0, p99_ps = 0;
};

// A kernel of one pod, this period against the one before (`podprof fleet regressions`).
struct FleetRegressionRow {
  std::string pod, kernel, module;
  int64_t baseline_captures = 0, candidate_captures = 0;
  int64_t baseline_p50_ps = 0, candidate_p50_ps = 0, baseline_p99_ps = 0, candidate_p99_ps = 0;
  double p50_change = 0, p99_change = 0;  // candidate / baseline - 1
  bool p50_regressed = false, p99_regressed = false;
};

// The CSV's header lines, without their newlines.
extern const char* const kFleetHistoryCsvHeader;
extern const char* const kFleetTopCsvHeader;
extern const char* const kFleetRegressionsCsvHeader;

// Each answer as CSV (a header line, then a row each; means rounded to whole ps, changes to
// six significant digits, verdicts 0/1), as JSON rows (the same fields, changes as full
// doubles, verdicts as booleans; keys sorted) and as the table for people.
void WriteFleetHistoryCsv(const std::vector<FleetHistoryRow>& rows, std::ostream& out);
nlohmann::json FleetHistoryJson(const std::vector<FleetHistoryRow>& rows);
void WriteFleetHistoryTable(const std::vector<FleetHistoryRow>& rows, std::ostream& out);

// `by` is what the rows are grouped by: "kernel", "pod" or "host" (the table's first column).
void WriteFleetTopCsv(const std::vector<FleetTopRow>& rows, std::ostream& out);
nlohmann::json FleetTopJson(const std::vector<FleetTopRow>& rows);
void WriteFleetTopTable(const std::vector<FleetTopRow>& rows, const std::string& by,
                        std::ostream& out);

void WriteFleetRegressionsCsv(const std::vector<FleetRegressionRow>& rows, std::ostream& out);
nlohmann::json FleetRegressionsJson(const std::vector<FleetRegressionRow>& rows);
void WriteFleetRegressionsTable(const std::vector<FleetRegressionRow>& rows, std::ostream& out);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_FLEET_ROWS_H_
