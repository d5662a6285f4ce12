#include "cli/import_command.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "cli/report.h"
#include "common/errno_status.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "trace/byte_source.h"
#include "trace/xspace_reader.h"

namespace podprof::cli {
namespace {

constexpr absl::string_view kXPlaneSuffix = ".xplane.pb";

bool IsXPlaneName(absl::string_view name) {
  return name.size() > kXPlaneSuffix.size() && absl::EndsWith(name, kXPlaneSuffix);
}

class ImportCommand : public AggregatorCommand {
 public:
  ImportCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    AddWideFlag(cmd, context.table_fit);
    cmd->add_option("path", paths_,
                    ".xplane.pb files, or XProf session directories whose *.xplane.pb files "
                    "are all imported")
        ->required();
    cmd->add_option("--label", labels_, "Label stored with the capture, key=value; repeatable")
        ->allow_extra_args(false);
    cmd->footer(
        "Examples:\n  podprof import /tmp/xprof/plugins/profile/2026_11_30_02_03_04\n"
        "  podprof import host0.xplane.pb host1.xplane.pb --label run=nightly");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    absl::StatusOr<LabelMap> labels = ParseLabels(labels_);
    if (!labels.ok()) return Failed(err, labels.status(), kExitUsage);
    // Everything is checked before the first byte is sent, so a bad path uploads nothing.
    absl::StatusOr<std::vector<ImportFile>> files = ExpandImportPaths(paths_);
    if (!files.ok()) return Failed(err, files.status(), kExitBadInput);
    if (absl::Status s = CheckDistinctHosts(*files); !s.ok()) return Failed(err, s, kExitUsage);
    ImportOptions options;
    options.files = *std::move(files);
    options.labels = *labels;
    options.format = context.format;
    options.fit = context.table_fit;
    absl::Status s = RunImport(client, options, out, err);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  std::vector<std::string> paths_;
  std::vector<std::string> labels_;
};

}  // namespace

std::unique_ptr<Command> AddImportCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<ImportCommand>(
      app.add_subcommand("import",
                         "Upload .xplane.pb files (one per host) to the aggregator as a new "
                         "capture"),
      context);
}

absl::StatusOr<std::vector<ImportFile>> ExpandImportPaths(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<ImportFile> files;
  for (const std::string& path : paths) {
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (!fs::exists(status)) {
      if (ec && ec != std::errc::no_such_file_or_directory) {
        return ErrnoToStatus(ec.value(), absl::StrCat("stat ", path));
      }
      return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
    }
    if (fs::is_regular_file(status) && IsXPlaneName(fs::path(path).filename().string())) {
      files.push_back({trace::HostNameFromPath(path), path});
      continue;
    }
    if (!fs::is_directory(status)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not a .xplane.pb file or a directory"));
    }
    std::vector<std::string> names;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::error_code entry_ec;
      if (IsXPlaneName(name) && it->is_regular_file(entry_ec)) names.push_back(name);
    }
    if (ec) return ErrnoToStatus(ec.value(), absl::StrCat("list ", path));
    if (names.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no .xplane.pb files in the directory"));
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      files.push_back({trace::HostNameFromPath(name), (fs::path(path) / name).string()});
    }
  }
  return files;
}

absl::Status CheckDistinctHosts(const std::vector<ImportFile>& files) {
  std::map<std::string, const std::string*> path_of_host;
  for (const ImportFile& f : files) {
    auto [it, inserted] = path_of_host.emplace(f.host_name, &f.path);
    if (!inserted) {
      return absl::InvalidArgumentError(absl::StrCat("host ", f.host_name, " appears twice (",
                                                     *it->second, " and ", f.path,
                                                     "); import one file per host"));
    }
  }
  return absl::OkStatus();
}

absl::Status ForEachImportChunk(const std::vector<ImportFile>& files, const LabelMap& labels,
                                size_t chunk_bytes,
                                const std::function<bool(const v1::ImportXSpaceChunk&)>& send) {
  bool first_chunk = true;
  for (const ImportFile& file : files) {
    ASSIGN_OR_RETURN(std::unique_ptr<trace::FileSource> source, trace::FileSource::Open(file.path));
    int64_t offset = 0;
    // do/while: an empty file still sends one chunk, so the aggregator hears of the host.
    do {
      const size_t n = static_cast<size_t>(std::min<int64_t>(chunk_bytes, source->size() - offset));
      v1::ImportXSpaceChunk chunk;
      chunk.set_host_name(file.host_name);
      std::string* data = chunk.mutable_data();
      data->resize(n);
      RETURN_IF_ERROR(source->ReadAt(offset, n, data->data()));
      if (first_chunk) AddLabels(labels, chunk.mutable_labels());
      first_chunk = false;
      if (!send(chunk)) return absl::CancelledError("the upload stream closed");
      offset += static_cast<int64_t>(n);
    } while (offset < source->size());
  }
  return absl::OkStatus();
}

absl::Status RunImport(AggregatorClient& client, const ImportOptions& options, std::ostream& out,
                       std::ostream& err) {
  grpc::ClientContext context;
  client.SetDeadline(context);
  v1::ImportXSpaceResponse response;
  std::unique_ptr<grpc::ClientWriterInterface<v1::ImportXSpaceChunk>> writer =
      client.stub().ImportXSpace(&context, &response);
  bool stream_broke = false;
  absl::Status sent = ForEachImportChunk(options.files, options.labels, kImportChunkBytes,
                                         [&](const v1::ImportXSpaceChunk& chunk) {
                                           stream_broke = !writer->Write(chunk);
                                           return !stream_broke;
                                         });
  if (!sent.ok() && !stream_broke) {
    // A file could not be read: cancel so that the aggregator stores nothing.
    context.TryCancel();
    writer->Finish();
    return sent;
  }
  // After a broken stream Finish says why; writing more would only fail again.
  if (!stream_broke) writer->WritesDone();
  RETURN_IF_ERROR(client.Check(writer->Finish()));
  if (stream_broke) return absl::InternalError("the aggregator closed the upload early");
  WriteImportResult(response, options.format, out, err, options.fit);
  return FlushOutput(out);
}

void WriteImportResult(const v1::ImportXSpaceResponse& response, OutputFormat format,
                       std::ostream& out, std::ostream& err, const TableFit& fit) {
  for (const std::string& e : response.file_errors()) err << "warning: " << OneLine(e) << "\n";
  switch (format) {
    case OutputFormat::kCsv:
      WriteKernelRowsCsv(response.capture_id(), response.top_kernels(), out);
      break;
    case OutputFormat::kJson:
      WriteJson({{"capture", response.capture_id()},
                 {"summary", report::CaptureJson(response.summary())},
                 {"top_kernels", KernelRowsJson(response.top_kernels())},
                 {"file_errors", std::vector<std::string>(response.file_errors().begin(),
                                                          response.file_errors().end())}},
                out);
      break;
    case OutputFormat::kTable: {
      const v1::CaptureSummary& s = response.summary();
      out << "imported capture " << response.capture_id() << ": " << CaptureStatusName(s.status())
          << ", " << CountOf(s.hosts_size(), "host") << ", " << CountOf(s.chip_count(), "chip")
          << ", " << CountOf(s.kernel_count(), "kernel") << ", "
          << CountOf(s.event_count(), "event") << ", window " << CaptureDuration(s) << "\n";
      if (!response.top_kernels().empty()) {
        out << "\n";
        WriteKernelRowsTable(response.top_kernels(), StatsGrouping::kKernel, out, fit);
      }
      break;
    }
  }
}

}  // namespace podprof::cli
