#include "cli/telemetry_command.h"

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_codes.h"
#include "cli/report.h"
#include "common/status_macros.h"
#include "report/format.h"
#include "report/proto_json.h"

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
    cmd->footer(
        "Examples:\n  podprof telemetry --since 10m\n"
        "  podprof telemetry --host host-3 --since 24h --format csv > host-3.csv");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    options_.format = context.format;
    absl::Status s = RunTelemetry(client, options_, out);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  TelemetryOptions options_;
};

// A value the runtime did not report (-1) shows as "-".
std::string OrDash(double v, const std::string& text) { return v < 0 ? "-" : text; }

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
    WriteTelemetry(response, options.format, out);
  }
  return FlushOutput(out);
}

void WriteTelemetry(const v1::GetTelemetryResponse& r, OutputFormat format, std::ostream& out) {
  if (format == OutputFormat::kCsv) {
    out << "time_ns,host,chip,interval_ns,steps,step_mean_us,step_max_us,duty_cycle_percent,"
           "hbm_used_bytes,queued,collectives,collective_mean_us\n";
    for (const v1::TelemetryRow& row : r.rows()) {
      const v1::ChipTelemetry& t = row.chip();
      out << row.time_ns() << "," << report::CsvField(row.host()) << "," << t.chip() << ","
          << row.interval_ns() << "," << t.steps() << "," << t.step_mean_us() << ","
          << t.step_max_us() << "," << t.duty_cycle_percent() << "," << t.hbm_used_bytes() << ","
          << t.queued() << "," << t.collectives() << "," << t.collective_mean_us() << "\n";
    }
    return;
  }
  if (r.rows().empty()) {
    out << "no telemetry in that time (agents send it each [telemetry] interval; the "
           "aggregator stores it per [telemetry] store_interval)\n";
    return;
  }
  TextTable table({{"TIME", TextTable::Align::kLeft},
                   {"HOST", TextTable::Align::kLeft, 24},
                   {"CHIP", TextTable::Align::kRight},
                   {"STEPS", TextTable::Align::kRight},
                   {"STEP MEAN", TextTable::Align::kRight},
                   {"STEP MAX", TextTable::Align::kRight},
                   {"DUTY", TextTable::Align::kRight},
                   {"HBM", TextTable::Align::kRight},
                   {"QUEUED", TextTable::Align::kRight},
                   {"COLLECTIVES", TextTable::Align::kRight},
                   {"COLL MEAN", TextTable::Align::kRight}});
  for (const v1::TelemetryRow& row : r.rows()) {
    const v1::ChipTelemetry& t = row.chip();
    const bool stepped = t.steps() > 0;
    table.AddRow({report::FormatTimestampNs(row.time_ns()), row.host(), absl::StrCat(t.chip()),
                  absl::StrCat(t.steps()),
                  stepped ? absl::StrFormat("%.2f ms", t.step_mean_us() / 1000) : "-",
                  stepped ? absl::StrFormat("%.2f ms", t.step_max_us() / 1000) : "-",
                  OrDash(t.duty_cycle_percent(), absl::StrFormat("%.1f%%", t.duty_cycle_percent())),
                  OrDash(static_cast<double>(t.hbm_used_bytes()),
                         report::FormatBytes(
                             static_cast<uint64_t>(std::max<int64_t>(0, t.hbm_used_bytes())))),
                  OrDash(static_cast<double>(t.queued()), absl::StrCat(t.queued())),
                  OrDash(t.collective_mean_us(), absl::StrCat(t.collectives())),
                  t.collectives() > 0 ? absl::StrFormat("%.1f us", t.collective_mean_us()) : "-"});
  }
  table.Write(out);
  if (r.truncated()) out << "(older rows left out: raise --limit or narrow --since)\n";
}

}  // namespace podprof::cli
