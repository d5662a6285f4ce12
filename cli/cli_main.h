// The `podprof` command line: subcommands over captures, agents and the aggregator.
#ifndef PODPROF_CLI_CLI_MAIN_H_
#define PODPROF_CLI_CLI_MAIN_H_

#include <ostream>

namespace podprof::cli {

// Runs `podprof` with the given arguments, writing results to `out` and errors to `err`.
// Returns the process exit code.
int CliMain(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_CLI_MAIN_H_
