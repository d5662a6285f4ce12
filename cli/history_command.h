// `podprof history`: how matching kernels behaved over many stored captures.
#ifndef PODPROF_CLI_HISTORY_COMMAND_H_
#define PODPROF_CLI_HISTORY_COMMAND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/capture_rows.h"
#include "cli/command.h"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::cli {

struct HistoryOptions {
  // Regular expression (ECMAScript, partial match) on the op name.
  std::string kernel_regex;
  // Substring of the module name; empty matches all.
  std::string module;
  // Which captures, by when their window started.
  StartRange range;
  // Most kernels (those with the largest total time); 0 uses the aggregator's default (20).
  uint32_t max_kernels = 0;
  OutputFormat format = OutputFormat::kTable;
  // How the table meets the terminal (report/table.h); csv and json are always whole.
  TableFit fit;
};

std::unique_ptr<Command> AddHistoryCommand(CLI::App& app, CliContext& context);

// Writes how matching kernels behaved over many captures to `out`. Errors: those of
// AggregatorClient::Check, NotFound when no stored kernel matches (nothing is written),
// Unavailable when `out` fails.
absl::Status RunHistory(AggregatorClient& client, const HistoryOptions& options, std::ostream& out);

// Writes `response` in `format`: the table has one block per kernel (fitted to `fit`, with
// the MXU figure `stats` shows and its source), csv one row per point.
void WriteKernelHistory(const v1::KernelHistoryResponse& response, OutputFormat format,
                        std::ostream& out, const TableFit& fit = {});

}  // namespace podprof::cli

#endif  // PODPROF_CLI_HISTORY_COMMAND_H_
