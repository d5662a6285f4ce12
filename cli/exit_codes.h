// The exit codes of `podprof` and its subcommands, the same for every command. README.md's
// "Exit codes" section is the user's copy of this table; `podprof --help` points to it.
#ifndef PODPROF_CLI_EXIT_CODES_H_
#define PODPROF_CLI_EXIT_CODES_H_

namespace podprof::cli {

// 0 success; 1 a result that is only partly good (a capture with failed hosts,
// `diff --fail-on-regression` finding a regression); 2 a usage error (bad flag or value, no
// subcommand), input that could not be used (unreadable or damaged file, an error answered by
// the aggregator), or something named that does not exist (a capture, a kernel, a file);
// 3 the aggregator could not be reached or did not answer in time; 4 the aggregator refused
// this caller (PERMISSION_DENIED: its certificate is not in the role's allow list).
constexpr int kExitPartial = 1;
constexpr int kExitRegression = 1;
constexpr int kExitUsage = 2;
constexpr int kExitBadInput = 2;
constexpr int kExitNotFound = 2;
constexpr int kExitUnreachable = 3;
constexpr int kExitDenied = 4;

}  // namespace podprof::cli

#endif  // PODPROF_CLI_EXIT_CODES_H_
