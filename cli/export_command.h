// `podprof export`: a stored capture's merged timeline written for Perfetto, Chrome or XProf.
#ifndef PODPROF_CLI_EXPORT_COMMAND_H_
#define PODPROF_CLI_EXPORT_COMMAND_H_

#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "cli/command.h"

namespace podprof::cli {

enum class ExportKind { kPerfetto, kChrome, kXprof };

struct ExportOptions {
  std::string capture_id;
  ExportKind kind = ExportKind::kPerfetto;
  std::string path;  // file (perfetto, chrome) or directory (xprof); empty: <capture>.<ext>
};

std::unique_ptr<Command> AddExportCommand(CLI::App& app, CliContext& context);

// Streams the export from the aggregator into `options.path` (each file written to a
// temporary name and renamed when complete, so a failed export leaves no half file). Returns
// the path written. Errors: those of AggregatorClient::Check, DataLoss for a file that could
// not be written whole or a file name that would leave the export's directory, NotFound when
// the capture has nothing to export.
absl::StatusOr<std::string> RunExport(AggregatorClient& client, const ExportOptions& options,
                                      std::ostream& err);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_EXPORT_COMMAND_H_
