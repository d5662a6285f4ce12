// `podprof sql CAPTURE "SELECT ..."`: one read-only SQL statement over a capture's tables
// (events, kernels, collectives, counters, telemetry; docs/SQL.md), answered by the aggregator
// within its limits.
#ifndef PODPROF_CLI_SQL_COMMAND_H_
#define PODPROF_CLI_SQL_COMMAND_H_

#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/command.h"

namespace podprof::cli {

struct SqlOptions {
  std::string capture_id;
  std::string statement;
  uint32_t max_rows = 0;  // 0: the aggregator's default
  OutputFormat format = OutputFormat::kTable;
};

std::unique_ptr<Command> AddSqlCommand(CLI::App& app, CliContext& context);

// Errors: AggregatorClient::Call's (InvalidArgument for a refused or wrong statement,
// DeadlineExceeded or ResourceExhausted naming the limit that stopped it), Unavailable when
// `out` fails.
absl::Status RunSql(AggregatorClient& client, const SqlOptions& options, std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_SQL_COMMAND_H_
