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
//   http = "https://agg.pod-a:7180"    # the HTTP API, for the Python client (podprof.Client)
//   [profiles.pod-b]                   # chosen with --profile pod-b or $PODPROF_PROFILE
//   aggregator = "agg.pod-b:7100"
//
// Every setting is taken from the first of these that gives it: a flag (before or after the
// subcommand), the environment ($PODPROF_AGGREGATOR, $PODPROF_TLS_CERT, _KEY, _CA), the
// profile chosen (--profile, else $PODPROF_PROFILE), the file's top-level keys, the built-in
// default. CliMain applies the file, then the environment, to the CliContext before the
// command line is parsed, so that a flag, parsed last, overwrites both. (CLI11's envname
// cannot do this: with the same option on the app and on a subcommand, the app's environment
// value would be applied after the subcommand's flag.)
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

// The value of the environment variable `name`; "" when it is unset or empty (`NAME= podprof
// ...` unsets one for a single command).
std::string EnvValue(const char* name);

// Sets `context`'s aggregator address and TLS files from $PODPROF_AGGREGATOR and
// $PODPROF_TLS_CERT, $PODPROF_TLS_KEY, $PODPROF_TLS_CA, each where it is set. Called after
// ApplyCliProfile and before the parse.
void ApplyCliEnvironment(CliContext& context);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_CLI_PROFILE_H_
