// `podprof export`: a stored capture's merged timeline written for Perfetto, Chrome or XProf, or
// its events as a CSV table, whole or narrowed to a window, hosts, chips and kernels.
#ifndef PODPROF_CLI_EXPORT_COMMAND_H_
#define PODPROF_CLI_EXPORT_COMMAND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/command.h"

namespace podprof::cli {

enum class ExportKind { kPerfetto, kChrome, kXprof, kCsv };

struct ExportOptions {
  std::string capture_id;
  ExportKind kind = ExportKind::kPerfetto;
  std::string path;  // file (perfetto, chrome, csv) or directory (xprof); empty: <capture>.<ext>
  // The window, ns relative to the capture's start; unset: from its start, to its end.
  std::optional<int64_t> from_ns, to_ns;
  std::vector<std::string> hosts;  // empty: every host
  std::vector<int> chips;          // ordinals; empty: every chip
  std::string kernels;             // regex on op name and module; empty: every kernel
  // The largest Chrome JSON accepted; 0: the aggregator's default (256 MB).
  uint64_t max_json_bytes = 0;
};

// What an export wrote.
struct ExportResult {
  std::string path;
  uint64_t bytes = 0;  // over all its files
  int files = 0;
  // The aggregator's estimate of the selection as Chrome JSON; 0 when it gave none.
  uint64_t json_bytes_estimate = 0;
};

std::unique_ptr<Command> AddExportCommand(CLI::App& app, CliContext& context);

// What can be checked of the narrowing flags without the capture: InvalidArgument naming the
// flag and its value for an empty window (--from not before --to) or a --kernels that is not
// a regular expression.
absl::Status CheckExportOptions(const ExportOptions& options);

// Streams the export from the aggregator into `options.path`, each chunk written as it
// arrives (each file to a temporary name, renamed when complete, so a failed or refused export
// leaves no file). Errors: those of CheckExportOptions and AggregatorClient::Check (the
// aggregator's InvalidArgument for a host or chip the capture does not have, its
// FailedPrecondition for Chrome JSON over the size limit), DataLoss for a file that could not
// be written whole or a file name that would leave the export's directory, NotFound when the
// capture (or the selection) has nothing to export.
absl::StatusOr<ExportResult> RunExport(AggregatorClient& client, const ExportOptions& options);

// The line `podprof export` ends with on stderr: what was written, and the Chrome JSON
// estimate when the format is another.
std::string ExportSummary(const ExportOptions& options, const ExportResult& result);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_EXPORT_COMMAND_H_
