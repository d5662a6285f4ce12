// `podprof telemetry`: the stored always-on telemetry, per chip and stored interval (steps,
// step times, duty cycle, HBM, queued programs), as the agents reported it.
#ifndef PODPROF_CLI_TELEMETRY_COMMAND_H_
#define PODPROF_CLI_TELEMETRY_COMMAND_H_

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cli/command.h"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::cli {

struct TelemetryOptions {
  int64_t since_ago_ns = int64_t{3600} * 1'000'000'000;
  std::vector<std::string> hosts;
  int limit = 10'000;
  // The table: every stored row instead of a summary per chip (csv is always the rows).
  bool rows = false;
  OutputFormat format = OutputFormat::kTable;
  TableFit fit;
};

std::unique_ptr<Command> AddTelemetryCommand(CLI::App& app, CliContext& context);

// Errors: those of AggregatorClient::Check; Unavailable when `out` fails.
absl::Status RunTelemetry(AggregatorClient& client, const TelemetryOptions& options,
                          std::ostream& out);

// The table or csv of `response` (json is the response itself), in options.format: csv has a
// line per row; the table sums each chip up (latest, median and worst device step time, over
// the rows read; report/telemetry_summary.h) or, with options.rows, has a line per row; both
// say the step time is the device's program run time.
void WriteTelemetry(const v1::GetTelemetryResponse& response, const TelemetryOptions& options,
                    std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_TELEMETRY_COMMAND_H_
