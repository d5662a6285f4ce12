// `podprof tools`: the tool registry (tools/registry.h), every question podprof answers with
// the route, command and Python method answering it. Needs no aggregator.
#ifndef PODPROF_CLI_TOOLS_COMMAND_H_
#define PODPROF_CLI_TOOLS_COMMAND_H_

#include <memory>
#include <ostream>

#include "cli/command.h"

namespace podprof::cli {

std::unique_ptr<Command> AddToolsCommand(CLI::App& app, CliContext& context);

// Writes the registry as `format` says: a table (name, role, route, CLI command, summary), CSV
// of the same columns, or JSON {"tools": [ToolJson...], "not_tools": [{"what", "why"}...]}.
void WriteTools(OutputFormat format, const TableFit& fit, std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_TOOLS_COMMAND_H_
