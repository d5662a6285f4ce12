#include "report/telemetry_rows.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "report/format.h"
#include "report/telemetry_summary.h"

namespace podprof::report {

const char* const kTelemetryCsvHeader =
    "time_ns,host,chip,interval_ns,steps,step_mean_us,step_max_us,duty_cycle_percent,"
    "hbm_used_bytes,queued,collectives,collective_mean_us,dcn_transfers,dcn_latency_p50_us,"
    "dcn_latency_p99_us";

const char* const kTelemetryStepLegend =
    "step times: the device step (program run) time, libtpu's hlo.execution.timing;\n"
    "the wall-clock step also holds the host's work and the gaps between runs\n";

nlohmann::ordered_json TelemetryRowJson(const v1::TelemetryRow& row) {
  const v1::ChipTelemetry& t = row.chip();
  return {{"time_ns", row.time_ns()},
          {"host", row.host()},
          {"chip", t.chip()},
          {"interval_ns", row.interval_ns()},
          {"steps", t.steps()},
          {"step_mean_us", t.step_mean_us()},
          {"step_max_us", t.step_max_us()},
          {"duty_cycle_percent", t.duty_cycle_percent()},
          {"hbm_used_bytes", t.hbm_used_bytes()},
          {"queued", t.queued()},
          {"collectives", t.collectives()},
          {"collective_mean_us", t.collective_mean_us()},
          {"dcn_transfers", t.dcn_transfers()},
          {"dcn_latency_p50_us", t.dcn_transfers() > 0 ? t.dcn_latency_p50_us() : -1.0},
          {"dcn_latency_p99_us", t.dcn_transfers() > 0 ? t.dcn_latency_p99_us() : -1.0}};
}

nlohmann::ordered_json TelemetryRowsJson(const v1::GetTelemetryResponse& response) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const v1::TelemetryRow& row : response.rows()) rows.push_back(TelemetryRowJson(row));
  return rows;
}

void WriteTelemetryCsv(const v1::GetTelemetryResponse& response, std::ostream& out) {
  out << kTelemetryCsvHeader << "\n";
  for (const v1::TelemetryRow& row : response.rows()) {
    const nlohmann::ordered_json fields = TelemetryRowJson(row);
    std::vector<std::string> cells;
    for (const nlohmann::ordered_json& v : fields) {
      cells.push_back(v.is_string() ? CsvField(v.get_ref<const std::string&>()) : v.dump());
    }
    out << absl::StrJoin(cells, ",") << "\n";
  }
}

namespace {

// A value the runtime did not report (-1) shows as "-".
std::string OrDash(double v, const std::string& text) { return v < 0 ? "-" : text; }

// A step (program run) time in us as ms, "-" where there was none.
std::string StepCell(double us) { return us < 0 ? "-" : absl::StrFormat("%.2f ms", us / 1000); }

// A latency in us, "-" where there was none.
std::string UsCell(double us) { return us < 0 ? "-" : absl::StrFormat("%.1f us", us); }

// The DCN columns, only where a row has DCN transfers (a multi-slice job's): a single slice's
// tables stay as they were.
void AddDcnColumns(bool any, std::vector<TextTable::Column>* columns) {
  if (!any) return;
  columns->push_back({"DCN P50", TextTable::Align::kRight, 0, 35});
  columns->push_back({"DCN P99", TextTable::Align::kRight, 0, 15});
}

bool AnyDcn(const v1::GetTelemetryResponse& response) {
  return std::any_of(response.rows().begin(), response.rows().end(),
                     [](const v1::TelemetryRow& r) { return r.chip().dcn_transfers() > 0; });
}

std::string HbmCell(int64_t bytes) {
  return OrDash(static_cast<double>(bytes),
                FormatBytes(static_cast<uint64_t>(std::max<int64_t>(0, bytes))));
}

}  // namespace

void WriteTelemetrySummaryTable(const v1::GetTelemetryResponse& response, const TableFit& fit,
                                std::ostream& out) {
  const std::vector<ChipTelemetrySummary> chips = SummarizeTelemetry(response);
  int64_t first = INT64_MAX, last = 0;
  for (const ChipTelemetrySummary& c : chips) {
    first = std::min(first, c.first_ns);
    last = std::max(last, c.last_ns);
  }
  out << "device step (program run) time per chip, " << CountOf(response.rows_size(), "row")
      << " from " << FormatTimestampNs(first) << " to " << FormatTimestampNs(last)
      << "\nLATEST: the newest interval's mean, MEDIAN: the median of the intervals' means,\n"
         "WORST: the longest run (--rows: every row)\n\n";
  using Align = TextTable::Align;
  constexpr int kAlways = TextTable::kAlways;
  std::vector<TextTable::Column> columns({{"HOST", Align::kLeft, 24, kAlways, 12},
                                          {"CHIP", Align::kRight},
                                          {"STEPS", Align::kRight, 0, 40},
                                          {"LATEST", Align::kRight},
                                          {"MEDIAN", Align::kRight},
                                          {"WORST", Align::kRight},
                                          {"DUTY", Align::kRight, 0, 60},
                                          {"HBM", Align::kRight, 0, 50},
                                          {"QUEUED", Align::kRight, 0, 20},
                                          {"COLLECTIVES", Align::kRight, 0, 10},
                                          {"COLL MEAN", Align::kRight, 0, 30}});
  const bool dcn = AnyDcn(response);
  AddDcnColumns(dcn, &columns);
  TextTable table(std::move(columns));
  for (const ChipTelemetrySummary& c : chips) {
    std::vector<std::string> cells(
        {c.host, absl::StrCat(c.chip), absl::StrCat(c.steps), StepCell(c.latest_step_us),
         StepCell(c.median_step_us), StepCell(c.worst_step_us),
         OrDash(c.duty_cycle_percent, absl::StrFormat("%.1f%%", c.duty_cycle_percent)),
         HbmCell(c.hbm_used_bytes), OrDash(static_cast<double>(c.queued), absl::StrCat(c.queued)),
         absl::StrCat(c.collectives),
         c.collective_mean_us >= 0 ? absl::StrFormat("%.1f us", c.collective_mean_us) : "-"});
    if (dcn) {
      cells.push_back(UsCell(c.dcn_latest_p50_us));
      cells.push_back(UsCell(c.dcn_worst_p99_us));
    }
    table.AddRow(std::move(cells));
  }
  table.Write(out, fit);
}

void WriteTelemetryRowsTable(const v1::GetTelemetryResponse& response, const TableFit& fit,
                             std::ostream& out) {
  using Align = TextTable::Align;
  std::vector<TextTable::Column> columns({{"TIME", Align::kLeft},
                                          {"HOST", Align::kLeft, 24, TextTable::kAlways, 12},
                                          {"CHIP", Align::kRight},
                                          {"STEPS", Align::kRight, 0, 40},
                                          {"STEP MEAN", Align::kRight},
                                          {"STEP MAX", Align::kRight},
                                          {"DUTY", Align::kRight, 0, 60},
                                          {"HBM", Align::kRight, 0, 50},
                                          {"QUEUED", Align::kRight, 0, 20},
                                          {"COLLECTIVES", Align::kRight, 0, 10},
                                          {"COLL MEAN", Align::kRight, 0, 30}});
  const bool dcn = AnyDcn(response);
  AddDcnColumns(dcn, &columns);
  TextTable table(std::move(columns));
  for (const v1::TelemetryRow& row : response.rows()) {
    const v1::ChipTelemetry& t = row.chip();
    const bool stepped = t.steps() > 0;
    std::vector<std::string> cells(
        {FormatTimestampNs(row.time_ns()), row.host(), absl::StrCat(t.chip()),
         absl::StrCat(t.steps()), StepCell(stepped ? t.step_mean_us() : -1),
         StepCell(stepped ? t.step_max_us() : -1),
         OrDash(t.duty_cycle_percent(), absl::StrFormat("%.1f%%", t.duty_cycle_percent())),
         HbmCell(t.hbm_used_bytes()),
         OrDash(static_cast<double>(t.queued()), absl::StrCat(t.queued())),
         OrDash(t.collective_mean_us(), absl::StrCat(t.collectives())),
         t.collectives() > 0 ? absl::StrFormat("%.1f us", t.collective_mean_us()) : "-"});
    if (dcn) {
      cells.push_back(UsCell(t.dcn_transfers() > 0 ? t.dcn_latency_p50_us() : -1));
      cells.push_back(UsCell(t.dcn_transfers() > 0 ? t.dcn_latency_p99_us() : -1));
    }
    table.AddRow(std::move(cells));
  }
  table.Write(out, fit);
}

}  // namespace podprof::report
