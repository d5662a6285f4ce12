// `podprof demo`: the command line of the simulated pod that cli/demo.h runs.
#ifndef PODPROF_CLI_DEMO_COMMAND_H_
#define PODPROF_CLI_DEMO_COMMAND_H_

#include <memory>

#include "cli/command.h"

namespace podprof::cli {

std::unique_ptr<Command> AddDemoCommand(CLI::App& app, CliContext& context);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_DEMO_COMMAND_H_
