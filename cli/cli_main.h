// The `podprof` command line: subcommands over captures, agents and the aggregator.
#ifndef PODPROF_CLI_CLI_MAIN_H_
#define PODPROF_CLI_CLI_MAIN_H_

#include <ostream>
#include <string>
#include <vector>

namespace podprof::cli {

// Runs `podprof` with the given arguments, writing results to `out` and errors to `err`.
// Returns the process exit code.
int CliMain(int argc, char** argv, std::ostream& out, std::ostream& err);

// Every subcommand CliMain has, each as its words ("stats", "fleet top"): the commands that run
// (a command with subcommands of its own is named by those). From the same list CliMain builds,
// for the test that holds each to the tool registry.
std::vector<std::string> CommandNames();

}  // namespace podprof::cli

#endif  // PODPROF_CLI_CLI_MAIN_H_
