// The `podprof` command line: subcommands over captures, agents and the aggregator.
#ifndef PODPROF_CLI_CLI_MAIN_H_
#define PODPROF_CLI_CLI_MAIN_H_

#include <ostream>

namespace podprof::cli {

// Exit codes: 0 success, 1 a usage error, 2 the input could not be used (unreadable or
// damaged file, bad values) or the aggregator could not be reached or answered an error,
// 3 `diff --fail-on-regression` found a regression.
constexpr int kExitUsage = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitRegression = 3;

// Runs `podprof` with the given arguments, writing results to `out` and errors to `err`.
// Returns the process exit code.
int CliMain(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_CLI_MAIN_H_
