// The `podprof` command line: subcommands over captures, agents and the aggregator.
#ifndef PODPROF_CLI_CLI_MAIN_H_
#define PODPROF_CLI_CLI_MAIN_H_

#include <ostream>

namespace podprof::cli {

// Exit codes: 0 success; 1 a result that is only partly good (a capture with failed hosts,
// `diff --fail-on-regression` finding a regression); 2 a usage error, or input that could not
// be used (unreadable or damaged file, bad values, an error answered by the aggregator);
// 3 the aggregator could not be reached or did not answer in time.
constexpr int kExitPartial = 1;
constexpr int kExitRegression = 1;
constexpr int kExitUsage = 2;
constexpr int kExitBadInput = 2;
constexpr int kExitUnreachable = 3;

// Runs `podprof` with the given arguments, writing results to `out` and errors to `err`.
// Returns the process exit code.
int CliMain(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_CLI_MAIN_H_
