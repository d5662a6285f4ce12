#include "cli/export_command.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "common/status_macros.h"

namespace podprof::cli {
namespace {

namespace fs = std::filesystem;
using Stub = v1::Aggregator::StubInterface;

// An export is one large transfer: its deadline covers the whole of it.
constexpr int64_t kDefaultExportTimeoutNs = int64_t{600} * 1'000'000'000;

class ExportCommand : public AggregatorCommand {
 public:
  ExportCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    cmd->add_option("capture", options_.capture_id, "Capture id")->required();
    // --format here names the file format, not the table|json|csv of the other commands.
    CLI::Option* timeout = AddAggregatorFlags(cmd, context, /*with_format=*/false);
    cmd->parse_complete_callback([timeout, &context] {
      if (timeout->count() == 0) context.target.timeout_ns = kDefaultExportTimeoutNs;
    });
    cmd->add_option("--format", format_,
                    "perfetto (.pftrace, for ui.perfetto.dev), chrome (JSON, for small "
                    "captures) or xprof (an XProf session directory)")
        ->check(CLI::IsMember({"perfetto", "chrome", "xprof"}))
        ->option_text("perfetto|chrome|xprof");
    cmd->add_option("-o,--output", options_.path,
                    "File (or directory for xprof) to write; default CAPTURE.pftrace or "
                    "CAPTURE.json in the current directory");
    cmd->footer(
        "Examples:\n  podprof export cap-1796003829474-cf16 -o pod.pftrace\n"
        "  podprof export cap-1796003829474-cf16 --format chrome -o pod.json\n"
        "The deadline (--timeout) covers the whole export; default 10m.");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& /*context*/, std::ostream& out,
              std::ostream& err) override {
    options_.kind = format_ == "chrome"  ? ExportKind::kChrome
                    : format_ == "xprof" ? ExportKind::kXprof
                                         : ExportKind::kPerfetto;
    absl::StatusOr<std::string> path = RunExport(client, options_, err);
    if (!path.ok()) return Failed(err, path.status(), kExitBadInput);
    out << *path << "\n";
    return 0;
  }

 private:
  ExportOptions options_;
  std::string format_ = "perfetto";
};

// Viewers of JSON traces struggle past about a million events: say so before writing one.
absl::Status WarnOfLargeJson(AggregatorClient& client, const std::string& capture_id,
                             std::ostream& err) {
  v1::GetKernelStatsRequest request;
  request.set_capture_id(capture_id);
  request.set_group_by(v1::KERNEL_GROUPING_KERNEL);
  v1::GetKernelStatsResponse stats;
  RETURN_IF_ERROR(client.Call(&Stub::GetKernelStats, request, &stats));
  uint64_t events = 0;
  for (const auto& s : stats.stats()) events += s.count();
  if (events > 1'000'000) {
    err << "podprof export: warning: " << events
        << " kernel events; Chrome JSON viewers struggle past about 1 M events, the "
           "perfetto format opens in ui.perfetto.dev at any size\n";
  }
  return absl::OkStatus();
}

// The files of one export: each goes to a temporary name first and is renamed when complete,
// so a failed export leaves no half file behind. For xprof `root` is a directory and the
// aggregator names the files in it; otherwise `root` is the one file.
class ExportFiles {
 public:
  ExportFiles(std::string root, bool directory)
      : root_(std::move(root)),
        directory_(directory),
        suffix_(absl::StrCat(".partial-", getpid())) {}
  ~ExportFiles() { Abandon(); }

  // Appends a chunk of the file `name` (relative to the root), finishing the previous file
  // when the name changes.
  absl::Status Write(const std::string& name, const std::string& data) {
    if (name != current_) {
      RETURN_IF_ERROR(Finish());
      RETURN_IF_ERROR(Open(name));
    }
    file_.write(data.data(), static_cast<std::streamsize>(data.size()));
    return absl::OkStatus();
  }

  // Closes and renames the file being written, if any.
  absl::Status Finish() {
    if (current_.empty()) return absl::OkStatus();
    file_.close();
    const std::string final_path = Target(current_);
    if (!file_) return absl::DataLossError(absl::StrCat("writing ", final_path, " failed"));
    std::error_code ec;
    fs::rename(final_path + suffix_, final_path, ec);
    if (ec)
      return absl::DataLossError(absl::StrCat("cannot write ", final_path, ": ", ec.message()));
    ++written_;
    current_.clear();
    return absl::OkStatus();
  }

  // Removes the file being written, if any.
  void Abandon() {
    if (file_.is_open()) file_.close();
    std::error_code ec;
    if (!current_.empty()) fs::remove(Target(current_) + suffix_, ec);
    current_.clear();
  }

  int written() const { return written_; }

 private:
  std::string Target(const std::string& name) const {
    return directory_ ? (fs::path(root_) / name).string() : root_;
  }

  absl::Status Open(const std::string& name) {
    // The aggregator names the files; never let a name leave the export's directory.
    const fs::path rel(name);
    bool safe = !name.empty() && rel.is_relative();
    for (const auto& part : rel) safe = safe && part != "..";
    if (!safe) {
      return absl::DataLossError(
          absl::StrCat("the aggregator sent a bad file name \"", name, "\""));
    }
    current_ = name;
    const std::string target = Target(name);
    std::error_code ec;
    if (directory_) fs::create_directories(fs::path(target).parent_path(), ec);
    file_.clear();
    file_.open(target + suffix_, std::ios::binary | std::ios::trunc);
    if (!file_) return absl::InvalidArgumentError(absl::StrCat("cannot write ", target));
    return absl::OkStatus();
  }

  const std::string root_;
  const bool directory_;
  const std::string suffix_;
  std::ofstream file_;
  std::string current_;  // the file being written, relative to the root
  int written_ = 0;
};

}  // namespace

std::unique_ptr<Command> AddExportCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<ExportCommand>(
      app.add_subcommand("export",
                         "Write a stored capture's merged timeline for Perfetto, Chrome or XProf"),
      context);
}

absl::StatusOr<std::string> RunExport(AggregatorClient& client, const ExportOptions& options,
                                      std::ostream& err) {
  v1::ExportCaptureRequest request;
  request.set_capture_id(options.capture_id);
  const char* ext = ".pftrace";
  switch (options.kind) {
    case ExportKind::kPerfetto:
      request.set_format(v1::EXPORT_FORMAT_PERFETTO);
      break;
    case ExportKind::kChrome:
      request.set_format(v1::EXPORT_FORMAT_CHROME_JSON);
      ext = ".json";
      RETURN_IF_ERROR(WarnOfLargeJson(client, options.capture_id, err));
      break;
    case ExportKind::kXprof:
      request.set_format(v1::EXPORT_FORMAT_XSPACE_DIR);
      ext = "";
      break;
  }
  const std::string path = options.path.empty() ? options.capture_id + ext : options.path;
  ExportFiles files(path, options.kind == ExportKind::kXprof);
  grpc::ClientContext ctx;
  client.SetDeadline(ctx);
  auto reader = client.stub().ExportCapture(&ctx, request);
  v1::ExportChunk chunk;
  absl::Status failure;
  while (failure.ok() && reader->Read(&chunk)) failure = files.Write(chunk.path(), chunk.data());
  if (!failure.ok()) ctx.TryCancel();
  grpc::Status s = reader->Finish();
  if (failure.ok()) failure = client.Check(s);
  if (failure.ok()) failure = files.Finish();
  if (!failure.ok()) return failure;
  if (files.written() == 0) return absl::NotFoundError("the capture has nothing to export");
  return path;
}

}  // namespace podprof::cli
