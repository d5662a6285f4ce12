// `podprof agents`: the agents registered with the aggregator, their state and clock models.
#ifndef PODPROF_CLI_AGENTS_COMMAND_H_
#define PODPROF_CLI_AGENTS_COMMAND_H_

#include <memory>
#include <ostream>

#include "absl/status/status.h"
#include "cli/capture_rows.h"
#include "cli/command.h"

namespace podprof::cli {

struct AgentsOptions {
  LabelMap selector;
  OutputFormat format = OutputFormat::kTable;
};

std::unique_ptr<Command> AddAgentsCommand(CLI::App& app, CliContext& context);

// Lists the registered agents: host, address, state, chips, labels, last heartbeat and the
// clock model (offset, uncertainty, drift, fastest round trip).
absl::Status RunAgents(AggregatorClient& client, const AgentsOptions& options, std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_AGENTS_COMMAND_H_
