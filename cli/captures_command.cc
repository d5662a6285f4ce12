#include "cli/captures_command.h"

#include <set>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "common/status_macros.h"
#include "kernelprof/options.h"
#include "nlohmann/json.hpp"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

// Turns a capture status name into the enum's number, so that the option binds the enum.
CLI::Validator CaptureStatusValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        absl::StatusOr<v1::CaptureStatus> status = ParseCaptureStatus(text);
        if (!status.ok()) return std::string(status.status().message());
        text = absl::StrCat(static_cast<int>(*status));
        return "";
      },
      "STATUS");
}

class CapturesCommand : public AggregatorCommand {
 public:
  CapturesCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    AddStartRangeFlags(cmd, options_.range, "2h");
    cmd->add_option("--limit", options_.limit,
                    "Captures per call (default: the aggregator's, 100)");
    cmd->add_option("--status", options_.status,
                    "Only captures in this state: pending, running, complete, partial, failed, "
                    "cancelled")
        ->transform(CaptureStatusValidator())
        ->option_text("STATUS");
    // One value per --label, so that a positional after it stays a positional.
    cmd->add_option("--label", labels_, "Only captures with this label, key=value; repeatable")
        ->allow_extra_args(false);
    cmd->add_flag("--all", options_.all, "Follow the pages until every capture is listed");
    cmd->footer(
        "Examples:\n  podprof captures --since 24h\n  podprof captures --label run=baseline "
        "--status complete --format json");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    absl::StatusOr<LabelMap> labels = ParseLabels(labels_);
    if (!labels.ok()) return Failed(err, labels.status(), kExitUsage);
    options_.labels = *labels;
    options_.format = context.format;
    absl::Status s = RunCaptures(client, options_, out);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  CapturesOptions options_;
  std::vector<std::string> labels_;
};

void WriteCapturesTable(const v1::ListCapturesResponse& response, std::ostream& out) {
  using Align = TextTable::Align;
  TextTable table({{"CAPTURE"},
                   {"START"},
                   {"DURATION", Align::kRight},
                   {"STATUS"},
                   {"HOSTS", Align::kRight},
                   {"CHIPS", Align::kRight},
                   {"KERNELS", Align::kRight},
                   {"EVENTS", Align::kRight},
                   {"LABELS"},
                   {"OPTIONS", Align::kLeft, 60}});
  for (const v1::CaptureSummary& c : response.captures()) {
    table.AddRow({c.capture_id(), FormatTimestampNs(c.start_ns()), CaptureDuration(c),
                  CaptureStatusName(c.status()), absl::StrCat(c.hosts_size()),
                  absl::StrCat(c.chip_count()), absl::StrCat(c.kernel_count()),
                  absl::StrCat(c.event_count()), TableLabels(c.labels()),
                  kernelprof::DescribeOptions(c.options())});
  }
  table.Write(out);
  if (!response.next_page_token().empty()) {
    out << "... more captures match (--all lists them all)\n";
  }
}

}  // namespace

std::unique_ptr<Command> AddCapturesCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<CapturesCommand>(
      app.add_subcommand("captures", "List captures stored by the aggregator, newest first"),
      context);
}

const char* const kCapturesCsvHeader =
    "capture,start_ns,end_ns,status,hosts,chips,kernels,events,labels";

absl::Status RunCaptures(AggregatorClient& client, const CapturesOptions& options,
                         std::ostream& out) {
  v1::ListCapturesRequest request;
  request.set_since_ns(options.range.SinceNs(client.clock().NowNs()));
  request.set_until_ns(options.range.until_ns);
  request.set_limit(options.limit);
  request.set_status(options.status);
  AddLabels(options.labels, request.mutable_label_selector());

  v1::ListCapturesResponse all;
  // A server that hands back a token it gave before would keep this loop going forever.
  std::set<std::string> tokens_seen;
  while (true) {
    v1::ListCapturesResponse page;
    RETURN_IF_ERROR(client.Call(&Stub::ListCaptures, request, &page));
    all.mutable_captures()->MergeFrom(page.captures());
    all.set_next_page_token(page.next_page_token());
    if (!options.all || page.next_page_token().empty()) break;
    if (!tokens_seen.insert(page.next_page_token()).second) {
      return absl::InternalError("the aggregator repeated a page token; the listing would not end");
    }
    request.set_page_token(page.next_page_token());
  }
  WriteCaptures(all, options.format, out);
  return FlushOutput(out);
}

void WriteCaptures(const v1::ListCapturesResponse& response, OutputFormat format,
                   std::ostream& out) {
  switch (format) {
    case OutputFormat::kCsv:
      out << kCapturesCsvHeader << "\n";
      for (const v1::CaptureSummary& c : response.captures()) {
        out << CsvField(c.capture_id()) << ',' << c.start_ns() << ',' << c.end_ns() << ','
            << CaptureStatusName(c.status()) << ',' << c.hosts_size() << ',' << c.chip_count()
            << ',' << c.kernel_count() << ',' << c.event_count() << ','
            << CsvField(JoinLabels(c.labels())) << "\n";
      }
      break;
    case OutputFormat::kJson: {
      nlohmann::json j = nlohmann::json::array();
      for (const v1::CaptureSummary& c : response.captures()) j.push_back(report::CaptureJson(c));
      WriteJson(j, out);
      break;
    }
    case OutputFormat::kTable:
      WriteCapturesTable(response, out);
      break;
  }
}

}  // namespace podprof::cli
