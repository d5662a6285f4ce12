// Parsing a daemon's command line, the one way both daemons do it. Header-only, for the daemons'
// mains, which link CLI11 (the rest of common/ does not need it).
#ifndef PODPROF_COMMON_DAEMON_FLAGS_H_
#define PODPROF_COMMON_DAEMON_FLAGS_H_

#include <optional>

#include "CLI/CLI.hpp"

namespace podprof {

// Parses `argv` with `app`. Returns the exit status when the process should stop now (0 after
// --help or --version, `usage_exit` after a bad flag, with CLI11's message printed), else
// nullopt. Sets `*config_given` to whether `config` (the --config option) was given: a named
// file must exist, the default path may be missing.
inline std::optional<int> ParseDaemonFlags(CLI::App& app, int argc, char** argv,
                                           const CLI::Option* config, bool* config_given,
                                           int usage_exit) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports help and usage errors by exception; this is the one place they stop.
    return app.exit(e) == 0 ? 0 : usage_exit;
  }
  *config_given = config->count() > 0;
  return std::nullopt;
}

}  // namespace podprof

#endif  // PODPROF_COMMON_DAEMON_FLAGS_H_
