// `podprof import`: .xplane.pb files (one per host, or XProf session directories) uploaded to
// the aggregator as one new capture.
#ifndef PODPROF_CLI_IMPORT_COMMAND_H_
#define PODPROF_CLI_IMPORT_COMMAND_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/capture_rows.h"
#include "cli/command.h"

namespace podprof::cli {

// One file to upload and the host it belongs to.
struct ImportFile {
  std::string host_name;
  std::string path;
};

// Bytes of file data per ImportXSpaceChunk: well under gRPC's 4 MiB message limit.
constexpr size_t kImportChunkBytes = size_t{1} << 20;

// Expands the paths given to `import`, in order: a `.xplane.pb` file stands for itself; a
// directory (an XProf session directory) for every `*.xplane.pb` directly inside it, sorted
// by name. Hosts are named by trace::HostNameFromPath. Errors name the path: NotFound when it
// does not exist, InvalidArgument when it is neither a `.xplane.pb` file nor a directory
// holding one, the OS error when a directory cannot be listed.
absl::StatusOr<std::vector<ImportFile>> ExpandImportPaths(const std::vector<std::string>& paths);

// Fails (InvalidArgument, naming the host and both paths) when two files share a host name:
// the upload protocol starts a new file only when the host name changes.
absl::Status CheckDistinctHosts(const std::vector<ImportFile>& files);

// Reads `files` in order and passes them to `send` as chunks of at most `chunk_bytes` (> 0)
// bytes: each file's chunks carry its host name, an empty file is one chunk without data, and
// only the first chunk carries `labels`. Stops when `send` returns false (the stream broke)
// and returns Cancelled; returns the error (naming the file) when a file cannot be read.
absl::Status ForEachImportChunk(const std::vector<ImportFile>& files, const LabelMap& labels,
                                size_t chunk_bytes,
                                const std::function<bool(const v1::ImportXSpaceChunk&)>& send);

std::unique_ptr<Command> AddImportCommand(CLI::App& app, CliContext& context);

struct ImportOptions {
  // From ExpandImportPaths, checked by CheckDistinctHosts.
  std::vector<ImportFile> files;
  // Stored with the new capture.
  LabelMap labels;
  OutputFormat format = OutputFormat::kTable;
  // How the table meets the terminal (report/table.h); csv and json are always whole.
  TableFit fit;
};

// Uploads `options.files` as one new capture and writes the result to `out`, and the files
// the aggregator could not import as `warning: ...` lines to `err`. Errors: a file that cannot
// be read (the upload is cancelled), those of AggregatorClient::Check (INVALID_ARGUMENT when
// no file could be parsed), Unavailable when `out` fails.
absl::Status RunImport(AggregatorClient& client, const ImportOptions& options, std::ostream& out,
                       std::ostream& err);

// Writes the new capture of `response` in `format` (its summary and top kernels; csv writes
// the top kernels as `stats` does; the table is fitted to `fit`) and its file_errors as
// `warning: ...` lines to `err`.
void WriteImportResult(const v1::ImportXSpaceResponse& response, OutputFormat format,
                       std::ostream& out, std::ostream& err, const TableFit& fit = {});

}  // namespace podprof::cli

#endif  // PODPROF_CLI_IMPORT_COMMAND_H_
