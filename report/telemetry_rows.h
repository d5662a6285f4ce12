// Stored telemetry rows (a chip over one stored interval, v1::TelemetryRow), written one way for
// `podprof telemetry` and the aggregator's /api/v1/telemetry: the same fields, names and units in
// JSON and CSV (numbers as JSON writes them, so the two agree to the last digit), and the CLI's
// two tables: a summary per chip (report/telemetry_summary.h) and every row. Step times are the
// device's program run time (libtpu's hlo.execution.timing), which the tables say under them.
#ifndef PODPROF_REPORT_TELEMETRY_ROWS_H_
#define PODPROF_REPORT_TELEMETRY_ROWS_H_

#include <ostream>

#include "nlohmann/json_fwd.hpp"
#include "proto/podprof_aggregator.pb.h"
#include "report/table.h"

namespace podprof::report {

// The CSV header, and the JSON keys in the same order: time_ns (the interval's end, aggregator
// clock), host, chip, interval_ns, steps, step_mean_us, step_max_us, duty_cycle_percent,
// hbm_used_bytes, queued, collectives, collective_mean_us, dcn_transfers, dcn_latency_p50_us,
// dcn_latency_p99_us (-1: not reported; the DCN latencies -1 without transfers).
extern const char* const kTelemetryCsvHeader;

// One row as a flat JSON object, keys as kTelemetryCsvHeader orders them.
nlohmann::ordered_json TelemetryRowJson(const v1::TelemetryRow& row);
// Every row of `response`, oldest first, as a JSON array.
nlohmann::ordered_json TelemetryRowsJson(const v1::GetTelemetryResponse& response);

// kTelemetryCsvHeader and a line per row, each field as TelemetryRowJson has it.
void WriteTelemetryCsv(const v1::GetTelemetryResponse& response, std::ostream& out);

// One line per chip: its device step time latest, typically and at worst over the rows read,
// under a line naming the rows' span; the host's DCN p50 latest and p99 at worst when a row
// has DCN transfers. Nothing but the header when there are no rows.
void WriteTelemetrySummaryTable(const v1::GetTelemetryResponse& response, const TableFit& fit,
                                std::ostream& out);
// One line per row: a chip over one stored interval.
void WriteTelemetryRowsTable(const v1::GetTelemetryResponse& response, const TableFit& fit,
                             std::ostream& out);
// What the tables' step times are, for under them.
extern const char* const kTelemetryStepLegend;

}  // namespace podprof::report

#endif  // PODPROF_REPORT_TELEMETRY_ROWS_H_
