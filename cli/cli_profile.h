// `podprof`'s own configuration: where the aggregator is, the TLS files and the output format,
// so that an operator need not repeat them on every command. The file is TOML:
//
//   aggregator = "agg.pod-a:7100"      # the defaults
//   tls_cert = "/home/alice/.config/podprof/alice.crt"
//   tls_key = "/home/alice/.config/podprof/alice.key"
//   tls_ca = "/home/alice/.config/podprof/ca.crt"
//   format = "table"                   # table, json or csv
//   timeout = "30s"
//   max_size = "1GB"                   # the largest Chrome JSON `podprof export` asks for
//   [profiles.pod-b]                   # chosen with --profile pod-b or $PODPROF_PROFILE
//   aggregator = "agg.pod-b:7100"
//
// A profile's keys override the defaults; flags and environment variables override both.
#ifndef PODPROF_CLI_CLI_PROFILE_H_
#define PODPROF_CLI_CLI_PROFILE_H_

#include <string>

#include "absl/status/status.h"
#include "cli/command.h"

namespace podprof::cli {

// $PODPROF_CLI_CONFIG, else $XDG_CONFIG_HOME/podprof/cli.toml, else
// $HOME/.config/podprof/cli.toml; empty when none of these variables is set.
std::string CliConfigPath();

// The profile the command line names (--profile NAME or --profile=NAME), else
// $PODPROF_PROFILE, else "" (the defaults only). Read before the command line is parsed: it
// picks the values the parse starts from.
std::string ProfileName(int argc, char** argv);

// Sets `context`'s aggregator, TLS files, format, timeout and export size limit from the file at
// `path`: its top-level keys, then those of [profiles.`profile`]. A missing file is no error unless
// a profile is named. Errors (InvalidArgument, NotFound) name the file and the key: an unknown key,
// a bad value, an unknown profile.
absl::Status ApplyCliProfile(const std::string& path, const std::string& profile,
                             CliContext& context);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_CLI_PROFILE_H_
