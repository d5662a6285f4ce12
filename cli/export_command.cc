#include "cli/export_command.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "cli/one_of.h"
#include "cli/report.h"
#include "common/clock.h"
#include "common/pattern.h"
#include "common/status_macros.h"

namespace podprof::cli {
namespace {

namespace fs = std::filesystem;

// An export is one large transfer: its deadline covers the whole of it.
constexpr int64_t kDefaultExportTimeoutNs = int64_t{600} * 1'000'000'000;

// --max-size's text ("1GB") as bytes, so that the option binds a uint64_t.
CLI::Validator ByteSize() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<uint64_t> bytes = ParseByteSize(text);
        if (!bytes.ok()) return std::string(bytes.status().message());
        text = absl::StrCat(*bytes);
        return "";
      },
      "SIZE");
}

class ExportCommand : public AggregatorCommand {
 public:
  ExportCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    cmd->add_option("capture", options_.capture_id, "Capture id")->required();
    // --format here names the file format, not the table|json|csv of the other commands.
    CLI::Option* timeout = AddAggregatorFlags(cmd, context, /*with_format=*/false);
    cmd->parse_complete_callback([timeout, &context] {
      if (timeout->count() == 0 && !context.timeout_from_profile) {
        context.target.timeout_ns = kDefaultExportTimeoutNs;
      }
    });
    cmd->add_option("--format", format_,
                    "perfetto (.pftrace, for ui.perfetto.dev), chrome (JSON, for small or "
                    "narrowed captures, up to --max-size), xprof (an XProf session directory) "
                    "or csv (a row per event, for scripts)")
        ->transform(OneOf<std::string>(
            {{"perfetto", "perfetto"}, {"chrome", "chrome"}, {"xprof", "xprof"}, {"csv", "csv"}}))
        ->option_text("perfetto|chrome|xprof|csv");
    cmd->add_option("-o,--output", options_.path,
                    "File (or directory for xprof) to write; default CAPTURE.pftrace, "
                    "CAPTURE.json or CAPTURE.csv in the current directory");
    AddNarrowingFlags(cmd);
    cmd->footer(
        "Examples:\n  podprof export cap-1796003829474-cf16 -o pod.pftrace\n"
        "  podprof export cap-1796003829474-cf16 --format chrome -o pod.json\n"
        "  podprof export cap-1796003829474-cf16 --format chrome --from 200ms --to 400ms \\\n"
        "      --hosts host-0,host-1 --chips 0 --kernels 'fusion|all-reduce' -o part.json\n"
        "  podprof export cap-1796003829474-cf16 --format csv --from 200ms --to 210ms -o "
        "events.csv\n"
        "CSV columns: host,chip,line,kernel,module,start_ns,duration_ps,collective_id,category,"
        "program_id,flops,bytes_accessed; start_ns is ns since the Unix epoch on the "
        "aggregator's clock (where the Perfetto trace places the event); rows by host, chip, "
        "line, then start. Counter samples are not in it.\n"
        "Narrowing applies to every format. Events overlapping the window are kept whole; "
        "counter samples inside it are kept; module and step lines stay as context; a kernel's "
        "named scopes go with it.\n"
        "Chrome JSON is sized before it is written (from the stored event and sample counts of "
        "what was selected) and refused past --max-size, default 256MB (also max_size in the "
        "CLI's configuration file): export --format perfetto, or narrow it.\n"
        "The deadline (--timeout) covers the whole export; default 10m.");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    options_.kind = format_ == "chrome"  ? ExportKind::kChrome
                    : format_ == "xprof" ? ExportKind::kXprof
                    : format_ == "csv"   ? ExportKind::kCsv
                                         : ExportKind::kPerfetto;
    if (from_->count() > 0) options_.from_ns = from_ns_;
    if (to_->count() > 0) options_.to_ns = to_ns_;
    if (max_size_->count() == 0) options_.max_json_bytes = context.export_max_bytes;
    absl::StatusOr<ExportResult> result = RunExport(client, options_);
    if (!result.ok()) return Failed(err, result.status(), kExitBadInput);
    out << result->path << "\n";
    err << "podprof export: " << ExportSummary(options_, *result) << "\n";
    return 0;
  }

 private:
  void AddNarrowingFlags(CLI::App* cmd) {
    from_ = cmd->add_option("--from", from_ns_,
                            "Start of the window, after the capture's start (e.g. 200ms); "
                            "default its start")
                ->transform(NonNegativeDuration())
                ->option_text("DURATION");
    to_ = cmd->add_option("--to", to_ns_,
                          "End of the window, after the capture's start (e.g. 400ms); default "
                          "its end")
              ->transform(PositiveDuration())
              ->option_text("DURATION");
    cmd->add_option("--hosts", options_.hosts, "Only these hosts, comma-separated")
        ->delimiter(',')
        ->option_text("HOST,...");
    cmd->add_option("--chips", options_.chips,
                    "Only the chips with these ordinals (N of /device:TPU:N), comma-separated")
        ->delimiter(',')
        ->option_text("N,...");
    cmd->add_option("--kernels", options_.kernels,
                    "Only kernels whose op name or module this regular expression (RE2 syntax, "
                    "at most 4096 bytes) finds anywhere in it, e.g. 'fusion|all-reduce' or "
                    "'^convolution'")
        ->option_text("REGEX");
    max_size_ = cmd->add_option("--max-size", options_.max_json_bytes,
                                "Chrome JSON only: refuse past this size (e.g. 1GB); default "
                                "256MB, or max_size in the CLI's configuration file")
                    ->transform(ByteSize())
                    ->option_text("SIZE");
  }

  ExportOptions options_;
  std::string format_ = "perfetto";
  int64_t from_ns_ = 0, to_ns_ = 0;
  CLI::Option* from_ = nullptr;
  CLI::Option* to_ = nullptr;
  CLI::Option* max_size_ = nullptr;
};

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
    bytes_ += data.size();
    return absl::OkStatus();
  }

  // Closes and renames the file being written, if any.
  absl::Status Finish() {
    if (current_.empty()) return absl::OkStatus();
    file_.close();
    const std::string final_path = Target(current_);
    if (!file_) return absl::DataLossError(absl::StrCat("writing ", final_path, " failed"));
    std::error_code ec;
    if (!in_place_) fs::rename(final_path + suffix_, final_path, ec);
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
    if (!current_.empty() && !in_place_) fs::remove(Target(current_) + suffix_, ec);
    current_.clear();
  }

  int written() const { return written_; }
  uint64_t bytes() const { return bytes_; }

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
    // Only a regular file (or none yet) is replaced by renaming the finished one over it: a
    // device or FIFO (-o /dev/stdout, /dev/null, a pipe) is written in place, as a shell's
    // redirection would (renaming over /dev/null as root replaced the device with a file).
    // status() follows symlinks, so a link to either is treated as what it points at.
    const fs::file_status st = fs::status(target, ec);
    if (fs::is_directory(st)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write ", target, ": it is a directory (-o names the file to write)"));
    }
    in_place_ = fs::exists(st) && !fs::is_regular_file(st);
    file_.clear();
    file_.open(in_place_ ? target : target + suffix_,
               in_place_ ? std::ios::binary : std::ios::binary | std::ios::trunc);
    if (!file_) return absl::InvalidArgumentError(absl::StrCat("cannot write ", target));
    return absl::OkStatus();
  }

  const std::string root_;
  const bool directory_;
  const std::string suffix_;
  std::ofstream file_;
  std::string current_;    // the file being written, relative to the root
  bool in_place_ = false;  // current_ is a device or FIFO, written directly (no rename)
  int written_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<Command> AddExportCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<ExportCommand>(
      app.add_subcommand("export",
                         "Write a stored capture's merged timeline for Perfetto, Chrome or XProf, "
                         "or its events as CSV"),
      context);
}

absl::Status CheckExportOptions(const ExportOptions& options) {
  if (options.from_ns.has_value() && options.to_ns.has_value() &&
      *options.from_ns >= *options.to_ns) {
    return absl::InvalidArgumentError(
        absl::StrCat("--from ", FormatDurationPs(*options.from_ns * 1000), " is not before --to ",
                     FormatDurationPs(*options.to_ns * 1000)));
  }
  return CheckUserPattern("--kernels", options.kernels);
}

absl::StatusOr<ExportResult> RunExport(AggregatorClient& client, const ExportOptions& options) {
  RETURN_IF_ERROR(CheckExportOptions(options));
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
      break;
    case ExportKind::kXprof:
      request.set_format(v1::EXPORT_FORMAT_XSPACE_DIR);
      ext = "";
      break;
    case ExportKind::kCsv:
      request.set_format(v1::EXPORT_FORMAT_CSV);
      ext = ".csv";
      break;
  }
  if (options.from_ns.has_value()) request.set_from_ns(*options.from_ns);
  if (options.to_ns.has_value()) request.set_to_ns(*options.to_ns);
  for (const std::string& h : options.hosts) request.add_host_names(h);
  for (int c : options.chips) request.add_chip_ordinals(c);
  request.set_kernel_regex(options.kernels);
  request.set_max_json_bytes(options.max_json_bytes);
  ExportResult result;
  result.path = options.path.empty() ? options.capture_id + ext : options.path;
  ExportFiles files(result.path, options.kind == ExportKind::kXprof);
  grpc::ClientContext ctx;
  client.SetDeadline(ctx);
  auto reader = client.stub().ExportCapture(&ctx, request);
  v1::ExportChunk chunk;
  absl::Status failure;
  // Each chunk goes to its file as it arrives: an export of any size takes a chunk of memory.
  while (failure.ok() && reader->Read(&chunk)) {
    if (chunk.json_bytes_estimate() != 0) result.json_bytes_estimate = chunk.json_bytes_estimate();
    failure = files.Write(chunk.path(), chunk.data());
  }
  if (!failure.ok()) ctx.TryCancel();
  grpc::Status s = reader->Finish();
  if (failure.ok()) failure = client.Check(s);
  if (failure.ok()) failure = files.Finish();
  if (!failure.ok()) return failure;
  if (files.written() == 0) return absl::NotFoundError("the capture has nothing to export");
  result.bytes = files.bytes();
  result.files = files.written();
  return result;
}

std::string ExportSummary(const ExportOptions& options, const ExportResult& result) {
  std::string line = absl::StrCat("wrote ", FormatBytes(result.bytes), " to ", result.path);
  if (result.files > 1) absl::StrAppend(&line, " (", result.files, " files)");
  if (options.kind != ExportKind::kChrome && result.json_bytes_estimate != 0) {
    absl::StrAppend(&line, "; as Chrome JSON it would be about ",
                    FormatBytes(result.json_bytes_estimate));
  }
  return line;
}

}  // namespace podprof::cli
