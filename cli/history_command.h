// `podprof history`: how matching kernels behaved over many stored captures.
#ifndef PODPROF_CLI_HISTORY_COMMAND_H_
#define PODPROF_CLI_HISTORY_COMMAND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/command.h"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::cli {

struct HistoryOptions {
  // Regular expression (ECMAScript, partial match) on the op name.
  std::string kernel_regex;
  // Substring of the module name; empty matches all.
  std::string module;
  // Only captures whose window starts at or after now minus this; unset: no such bound.
  std::optional<int64_t> since_ago_ns;
  // Only captures whose window starts at or after this instant; 0: no bound. Ignored when
  // since_ago_ns is set.
  int64_t since_ns = 0;
  // Only captures whose window starts before this instant; 0: no bound.
  int64_t until_ns = 0;
  // Most kernels (those with the largest total time); 0 uses the aggregator's default (20).
  uint32_t max_kernels = 0;
  OutputFormat format = OutputFormat::kTable;
};

std::unique_ptr<Command> AddHistoryCommand(CLI::App& app, CliContext& context);

// Writes how matching kernels behaved over many captures to `out`. Errors: those of
// AggregatorClient::Check, Unavailable when `out` fails.
absl::Status RunHistory(AggregatorClient& client, const HistoryOptions& options, std::ostream& out);

// The CSV header `history --format csv` writes.
extern const char* const kHistoryCsvHeader;

// Writes `response` in `format`: the table has one block per kernel, csv one row per point.
void WriteKernelHistory(const v1::KernelHistoryResponse& response, OutputFormat format,
                        std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_HISTORY_COMMAND_H_
