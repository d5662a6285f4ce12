#include "agent/agent_main.h"

#include <iostream>
#include <string>

#include "CLI/CLI.hpp"

namespace podprof::agent {

int AgentMain(int argc, char** argv) {
  CLI::App app{"podprof-agent: the per-host capture daemon"};
  app.name("podprof-agent");
  std::string config;
  app.add_option("--config", config, "TOML configuration file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // The daemon itself is not part of this release; say so instead of pretending to run.
  std::cerr << "podprof-agent: not available in this release; see --help\n";
  return 1;
}

}  // namespace podprof::agent
