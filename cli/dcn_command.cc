#include "cli/dcn_command.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/exit_codes.h"
#include "cli/one_of.h"
#include "cli/report.h"
#include "common/status_macros.h"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

class DcnCommand : public AggregatorCommand {
 public:
  DcnCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    cmd->add_option("capture", options_.capture_id, "Capture id")->required();
    cmd->add_option("--top", options_.top,
                    "Worst transfers asked for and shown, in every format (default 10, at most "
                    "1000)");
    cmd->add_flag("--xprof", options_.xprof,
                  "Also show each host's rows as XProf's megascale_stats reports them (slack, "
                  "observed, stall, occurrences, recv stall as XProf shows it and corrected)");
    cmd->add_flag("--cells", options_.cells,
                  "With --format json: also the slices x instances matrix (each slice's "
                  "receivers' wait and its own lateness as a producer per rendezvous instance, "
                  "at most 64 x 2000), as GET /api/v1/captures/{id}/dcn?cells=1 has it");
    std::vector<std::pair<std::string, report::DcnTable>> tables(report::DcnTablesByName().begin(),
                                                                 report::DcnTablesByName().end());
    cmd->add_option("--table", options_.table,
                    "The table --format csv writes: links (default), producers, transfers or "
                    "xprof")
        ->transform(OneOf(tables))
        ->option_text("NAME");
    cmd->footer(
        "The receivers of a multi-slice job wait at their recv-done for data sent by another "
        "slice; each wait is split into the producer's lateness and the network's excess over "
        "the capture's expected transit, and a slice or link is named only when it was the "
        "worst significantly more often than chance (docs/INSIGHT.md).\n\n"
        "Examples:\n  podprof dcn cap-1796003829474-cf16\n"
        "  podprof dcn cap-1796003829474-cf16 --xprof --top 5\n"
        "  podprof dcn cap-1796003829474-cf16 --format csv --table transfers --top 1000\n"
        "  podprof dcn cap-1796003829474-cf16 --format json | jq '.links[0]'");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    options_.format = context.format;
    absl::Status s = RunDcn(client, options_, out);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  DcnOptions options_;
};

}  // namespace

std::unique_ptr<Command> AddDcnCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<DcnCommand>(
      app.add_subcommand("dcn",
                         "Show who made a multi-slice capture's cross-slice (DCN) transfers "
                         "wait: a late slice or a slow link"),
      context);
}

absl::Status RunDcn(AggregatorClient& client, const DcnOptions& options, std::ostream& out) {
  v1::GetDcnRequest request;
  request.set_capture_id(options.capture_id);
  request.set_top(static_cast<uint32_t>(std::clamp(options.top, 0, 1000)));
  // Only the JSON shows the matrix: the table and the CSVs would drop it.
  request.set_cells(options.cells && options.format == OutputFormat::kJson);
  v1::GetDcnResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::GetDcn, request, &response));
  switch (options.format) {
    case OutputFormat::kJson:
      out << report::DcnJsonText(response);
      break;
    case OutputFormat::kCsv:
      report::WriteDcnCsv(response, options.table, out);
      break;
    case OutputFormat::kTable:
      report::WriteDcnTable(response, options.top, options.xprof, out);
      break;
  }
  return FlushOutput(out);
}

}  // namespace podprof::cli
