#include "cli/telemetry_command.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_codes.h"
#include "cli/report.h"
#include "common/status_macros.h"
#include "report/format.h"
#include "report/proto_json.h"
#include "report/telemetry_summary.h"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

class TelemetryCommand : public AggregatorCommand {
 public:
  TelemetryCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    cmd->add_option("--since", options_.since_ago_ns, "How far back, e.g. 10m, 24h (default 1h)")
        ->transform(PositiveDuration());
    cmd->add_option("--host", options_.hosts, "Only this host (repeatable)");
    cmd->add_option("--limit", options_.limit, "At most this many rows, the newest (default 10000)")
        ->check(CLI::Range(1, 100'000));
    cmd->add_flag("--rows", options_.rows,
                  "Print every stored row (a chip over one interval) instead of a summary per "
                  "chip");
    AddWideFlag(cmd, context.table_fit);
    cmd->footer(
        "Examples:\n  podprof telemetry --since 10m\n  podprof telemetry --since 1m --rows\n"
        "  podprof telemetry --host host-3 --since 24h --format csv > host-3.csv");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    options_.format = context.format;
    options_.fit = context.table_fit;
    absl::Status s = RunTelemetry(client, options_, out);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  TelemetryOptions options_;
};

// A value the runtime did not report (-1) shows as "-".
std::string OrDash(double v, const std::string& text) { return v < 0 ? "-" : text; }

// A step (program run) time in us as ms, "-" where there was none.
std::string StepCell(double us) { return us < 0 ? "-" : absl::StrFormat("%.2f ms", us / 1000); }

std::string HbmCell(int64_t bytes) {
  return OrDash(static_cast<double>(bytes),
                report::FormatBytes(static_cast<uint64_t>(std::max<int64_t>(0, bytes))));
}

constexpr char kStepLegend[] =
    "step times: the device step (program run) time, libtpu's hlo.execution.timing;\n"
    "the wall-clock step also holds the host's work and the gaps between runs\n";

void WriteTelemetryCsv(const v1::GetTelemetryResponse& r, std::ostream& out) {
  out << "time_ns,host,chip,interval_ns,steps,step_mean_us,step_max_us,duty_cycle_percent,"
         "hbm_used_bytes,queued,collectives,collective_mean_us\n";
  for (const v1::TelemetryRow& row : r.rows()) {
    const v1::ChipTelemetry& t = row.chip();
    out << row.time_ns() << "," << report::CsvField(row.host()) << "," << t.chip() << ","
        << row.interval_ns() << "," << t.steps() << "," << t.step_mean_us() << ","
        << t.step_max_us() << "," << t.duty_cycle_percent() << "," << t.hbm_used_bytes() << ","
        << t.queued() << "," << t.collectives() << "," << t.collective_mean_us() << "\n";
  }
}

// One row per chip: its device step time now, typically and at worst over the rows read.
void WriteTelemetrySummary(const v1::GetTelemetryResponse& r, const TableFit& fit,
                           std::ostream& out) {
  const std::vector<report::ChipTelemetrySummary> chips = report::SummarizeTelemetry(r);
  int64_t first = INT64_MAX, last = 0;
  for (const report::ChipTelemetrySummary& c : chips) {
    first = std::min(first, c.first_ns);
    last = std::max(last, c.last_ns);
  }
  out << "device step (program run) time per chip, " << CountOf(r.rows_size(), "row") << " from "
      << report::FormatTimestampNs(first) << " to " << report::FormatTimestampNs(last)
      << "\nLATEST: the newest interval's mean, MEDIAN: the median of the intervals' means,\n"
         "WORST: the longest run (--rows: every row)\n\n";
  using Align = TextTable::Align;
  constexpr int kAlways = TextTable::kAlways;
  TextTable table({{"HOST", Align::kLeft, 24, kAlways, 12},
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
  for (const report::ChipTelemetrySummary& c : chips) {
    table.AddRow(
        {c.host, absl::StrCat(c.chip), absl::StrCat(c.steps), StepCell(c.latest_step_us),
         StepCell(c.median_step_us), StepCell(c.worst_step_us),
         OrDash(c.duty_cycle_percent, absl::StrFormat("%.1f%%", c.duty_cycle_percent)),
         HbmCell(c.hbm_used_bytes), OrDash(static_cast<double>(c.queued), absl::StrCat(c.queued)),
         absl::StrCat(c.collectives),
         c.collective_mean_us >= 0 ? absl::StrFormat("%.1f us", c.collective_mean_us) : "-"});
  }
  table.Write(out, fit);
}

// Every row: a chip over one stored interval.
void WriteTelemetryRows(const v1::GetTelemetryResponse& r, const TableFit& fit, std::ostream& out) {
  using Align = TextTable::Align;
  TextTable table({{"TIME", Align::kLeft},
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
  for (const v1::TelemetryRow& row : r.rows()) {
    const v1::ChipTelemetry& t = row.chip();
    const bool stepped = t.steps() > 0;
    table.AddRow({report::FormatTimestampNs(row.time_ns()), row.host(), absl::StrCat(t.chip()),
                  absl::StrCat(t.steps()), StepCell(stepped ? t.step_mean_us() : -1),
                  StepCell(stepped ? t.step_max_us() : -1),
                  OrDash(t.duty_cycle_percent(), absl::StrFormat("%.1f%%", t.duty_cycle_percent())),
                  HbmCell(t.hbm_used_bytes()),
                  OrDash(static_cast<double>(t.queued()), absl::StrCat(t.queued())),
                  OrDash(t.collective_mean_us(), absl::StrCat(t.collectives())),
                  t.collectives() > 0 ? absl::StrFormat("%.1f us", t.collective_mean_us()) : "-"});
  }
  table.Write(out, fit);
}

}  // namespace

std::unique_ptr<Command> AddTelemetryCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<TelemetryCommand>(
      app.add_subcommand("telemetry",
                         "Print the stored telemetry of every chip: steps, step times, duty "
                         "cycle, HBM"),
      context);
}

absl::Status RunTelemetry(AggregatorClient& client, const TelemetryOptions& options,
                          std::ostream& out) {
  v1::GetTelemetryRequest request;
  request.set_since_ns(client.clock().NowNs() - options.since_ago_ns);
  for (const std::string& h : options.hosts) request.add_hosts(h);
  request.set_limit(options.limit);
  v1::GetTelemetryResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::GetTelemetry, request, &response));
  if (options.format == OutputFormat::kJson) {
    WriteJson(report::ProtoToJson(response), out);
  } else {
    WriteTelemetry(response, options, out);
  }
  return FlushOutput(out);
}

void WriteTelemetry(const v1::GetTelemetryResponse& r, const TelemetryOptions& options,
                    std::ostream& out) {
  if (options.format == OutputFormat::kCsv) {
    WriteTelemetryCsv(r, out);
    return;
  }
  if (r.rows().empty()) {
    out << "no telemetry in that time (agents send it each [telemetry] interval; the "
           "aggregator stores it per [telemetry] store_interval)\n";
    return;
  }
  if (options.rows) {
    WriteTelemetryRows(r, options.fit, out);
  } else {
    WriteTelemetrySummary(r, options.fit, out);
  }
  out << kStepLegend;
  if (r.truncated()) out << "(older rows left out: raise --limit or narrow --since)\n";
}

}  // namespace podprof::cli
