// `podprof diff`: the kernels of two captures compared, regressions flagged.
#ifndef PODPROF_CLI_DIFF_COMMAND_H_
#define PODPROF_CLI_DIFF_COMMAND_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "cli/command.h"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::cli {

struct DiffOptions {
  std::string baseline_capture_id;
  std::string candidate_capture_id;
  // Regular expression (ECMAScript, partial match) on the op name; empty matches all.
  std::string kernel_regex;
  // Relative p50 slowdown that counts as a regression (0.05 = 5%).
  double threshold = 0.05;
  // Keep the N kernels whose total time changed most; 0 = all; negative: 25 for the table,
  // all for csv and json.
  int top = -1;
  OutputFormat format = OutputFormat::kTable;
  // How the table meets the terminal (report/table.h); csv and json are always whole.
  TableFit fit;
};

std::unique_ptr<Command> AddDiffCommand(CLI::App& app, CliContext& context);

// Compares two captures and writes the per-kernel changes to `out`. Returns the number of
// regressions the aggregator found (over all kernels, not only those shown). Errors: those
// of AggregatorClient::Check, Unavailable when `out` fails.
absl::StatusOr<uint32_t> RunDiff(AggregatorClient& client, const DiffOptions& options,
                                 std::ostream& out);

// Writes the comparison `response` to `request` in `format`. CSV leaves the fields of an
// absent side empty; the table (fitted to `fit`) marks them "-", shows each kernel's verdict
// and the MXU figure `stats` shows (its source under the table), and ends with "N
// regressions".
void WriteCaptureDiff(const v1::CompareCapturesRequest& request,
                      const v1::CompareCapturesResponse& response, OutputFormat format,
                      std::ostream& out, const TableFit& fit = {});

}  // namespace podprof::cli

#endif  // PODPROF_CLI_DIFF_COMMAND_H_
