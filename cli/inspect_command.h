// `podprof inspect`: kernel statistics of one capture file (.xplane.pb), with no aggregator.
#ifndef PODPROF_CLI_INSPECT_COMMAND_H_
#define PODPROF_CLI_INSPECT_COMMAND_H_

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/command.h"
#include "cli/report.h"

namespace podprof::cli {

struct InspectOptions {
  std::string path;
  OutputFormat format = OutputFormat::kTable;
  // How the table meets the terminal (report/table.h); csv and json are always whole.
  TableFit fit;
  // Rows per chip and kernel (kChip), or per kernel across chips (kKernel). Unset: kChip for
  // csv and json (scripts want the detail), kKernel for the table (people want the summary).
  std::optional<StatsGrouping> by;
  // Keep only the N rows with the largest total time; 0 = all; negative: 25 for the table,
  // all for csv and json.
  int top = -1;
  // One row per kernel execution that performance counters counted over, with the figures
  // XProf's per-kernel tool shows (cli/kernel_executions.h), instead of kernel statistics.
  bool executions = false;
  // The host's per-rendezvous DCN figures as XProf's `megascale_stats` computes them
  // (insight::HostXprofFigures), instead of kernel statistics.
  bool megascale = false;
};

std::unique_ptr<Command> AddInspectCommand(CLI::App& app, CliContext& context);

// Reads `options.path` and writes its kernel statistics to `out` as every command writes
// kernel rows (report/kernel_rows.h). Errors (unreadable or damaged file) name the file and, for
// damage, the byte offset.
absl::Status RunInspect(const InspectOptions& options, std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_INSPECT_COMMAND_H_
