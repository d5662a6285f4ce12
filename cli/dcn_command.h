// `podprof dcn`: a multi-slice capture's cross-slice (DCN) transfers: who made the receivers
// wait, a late producing slice or a slow link, and XProf's per-host `megascale_stats` figures.
#ifndef PODPROF_CLI_DCN_COMMAND_H_
#define PODPROF_CLI_DCN_COMMAND_H_

#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/command.h"
#include "proto/podprof_aggregator.pb.h"
#include "report/dcn_rows.h"

namespace podprof::cli {

struct DcnOptions {
  std::string capture_id;
  int top = 10;        // worst transfers shown in the table, and asked of the aggregator
  bool xprof = false;  // the table shows XProf's per-host rows too
  bool cells = false;  // the JSON holds the slices x instances matrix (GetDcnRequest.cells)
  report::DcnTable table = report::DcnTable::kLinks;  // the one table csv writes
  OutputFormat format = OutputFormat::kTable;
};

std::unique_ptr<Command> AddDcnCommand(CLI::App& app, CliContext& context);

// Errors: those of AggregatorClient::Call (NOT_FOUND for an unknown capture), Unavailable
// when `out` fails.
absl::Status RunDcn(AggregatorClient& client, const DcnOptions& options, std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_DCN_COMMAND_H_
