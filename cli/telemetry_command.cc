#include "cli/telemetry_command.h"

#include <cstdint>

#include "CLI/CLI.hpp"
#include "cli/exit_codes.h"
#include "cli/report.h"
#include "common/status_macros.h"
#include "report/format.h"
#include "report/proto_json.h"
#include "report/telemetry_rows.h"

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
    report::WriteTelemetryCsv(r, out);
    return;
  }
  if (r.rows().empty()) {
    out << "no telemetry in that time (agents send it each [telemetry] interval; the "
           "aggregator stores it per [telemetry] store_interval)\n";
    return;
  }
  if (options.rows) {
    report::WriteTelemetryRowsTable(r, options.fit, out);
  } else {
    report::WriteTelemetrySummaryTable(r, options.fit, out);
  }
  out << report::kTelemetryStepLegend;
  if (r.truncated()) out << "(older rows left out: raise --limit or narrow --since)\n";
}

}  // namespace podprof::cli
