// `podprof stragglers`: which chips made the others wait at a capture's collectives.
#ifndef PODPROF_CLI_STRAGGLERS_COMMAND_H_
#define PODPROF_CLI_STRAGGLERS_COMMAND_H_

#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/command.h"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::cli {

struct StragglerOptions {
  std::string capture_id;
  int top = 10;  // worst instances shown in the table
  OutputFormat format = OutputFormat::kTable;
};

std::unique_ptr<Command> AddStragglersCommand(CLI::App& app, CliContext& context);

// Errors: those of AggregatorClient::Check (NOT_FOUND for an unknown capture), Unavailable
// when `out` fails.
absl::Status RunStragglers(AggregatorClient& client, const StragglerOptions& options,
                           std::ostream& out);

// The table or csv of `response`; json is the response itself (report/proto_json.h).
void WriteStragglers(const v1::GetStragglersResponse& response, const StragglerOptions& options,
                     std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_STRAGGLERS_COMMAND_H_
