// The exit codes of `podprof` and its subcommands.
#ifndef PODPROF_CLI_EXIT_CODES_H_
#define PODPROF_CLI_EXIT_CODES_H_

namespace podprof::cli {

// 0 success; 1 a result that is only partly good (a capture with failed hosts,
// `diff --fail-on-regression` finding a regression); 2 a usage error, or input that could not
// be used (unreadable or damaged file, bad values, an error answered by the aggregator);
// 3 the aggregator could not be reached or did not answer in time; 4 the aggregator refused
// this caller (PERMISSION_DENIED: its certificate is not in the role's allow list).
constexpr int kExitPartial = 1;
constexpr int kExitRegression = 1;
constexpr int kExitUsage = 2;
constexpr int kExitBadInput = 2;
constexpr int kExitUnreachable = 3;
constexpr int kExitDenied = 4;

}  // namespace podprof::cli

#endif  // PODPROF_CLI_EXIT_CODES_H_
