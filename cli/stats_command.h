// `podprof stats`: kernel statistics of one stored capture, per kernel, chip, host or category.
#ifndef PODPROF_CLI_STATS_COMMAND_H_
#define PODPROF_CLI_STATS_COMMAND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/command.h"
#include "cli/report.h"

namespace podprof::cli {

struct StatsOptions {
  std::string capture_id;
  // Unset: kKernel for the table (people want the summary), kChip for csv and json (scripts
  // want the detail), as in `podprof inspect`.
  std::optional<StatsGrouping> by;
  // Regular expression (ECMAScript, partial match) on the op name; empty matches all.
  std::string kernel_regex;
  // Exact HLO category; empty matches all.
  std::string category;
  // Only chips of this host; empty for all hosts.
  std::string host;
  // Only this chip ordinal.
  std::optional<int32_t> chip;
  v1::KernelOrder order = v1::KERNEL_ORDER_TOTAL_TIME;
  // Keep the first N rows; 0 = all; negative: 25 for the table, all for csv and json.
  int top = -1;
  OutputFormat format = OutputFormat::kTable;
  // How the table meets the terminal (report/table.h); csv and json are always whole.
  TableFit fit;
};

std::unique_ptr<Command> AddStatsCommand(CLI::App& app, CliContext& context);

// Writes the kernel statistics of one capture to `out`. Errors: those of
// AggregatorClient::Check (NOT_FOUND for an unknown capture, INVALID_ARGUMENT for a bad
// regular expression), Unavailable when `out` fails.
absl::Status RunStats(AggregatorClient& client, const StatsOptions& options, std::ostream& out);

// Writes the rows of `response` in `format` (report/kernel_rows.h); `by` picks the table's
// columns, `fit` its width. The table ends with a hint when matched_count exceeds the rows
// shown.
void WriteKernelStats(const v1::GetKernelStatsResponse& response, StatsGrouping by,
                      OutputFormat format, std::ostream& out, const TableFit& fit = {});

}  // namespace podprof::cli

#endif  // PODPROF_CLI_STATS_COMMAND_H_
