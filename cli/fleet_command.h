// `podprof fleet`: the fleet store in ClickHouse (docs/FLEET.md). `status` asks the aggregator
// how its replication stands; `history`, `top` and `regressions` read ClickHouse directly over
// HTTP (--clickhouse or $PODPROF_CLICKHOUSE), as a read-only user, across every pod there.
#ifndef PODPROF_CLI_FLEET_COMMAND_H_
#define PODPROF_CLI_FLEET_COMMAND_H_

#include <memory>

#include "cli/command.h"

namespace podprof::cli {

std::unique_ptr<Command> AddFleetCommand(CLI::App& app, CliContext& context);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_FLEET_COMMAND_H_
