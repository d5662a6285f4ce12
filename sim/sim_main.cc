#include "sim/sim_main.h"

#include <iostream>
#include <string>

#include "CLI/CLI.hpp"

namespace podprof::sim {

int SimHostMain(int argc, char** argv) {
  CLI::App app{"podprof-simhost: a simulated TPU host serving the profiler and metric protocols"};
  app.name("podprof-simhost");
  std::string config;
  app.add_option("--config", config, "TOML configuration file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // The daemon itself is not part of this release; say so instead of pretending to run.
  std::cerr << "podprof-simhost: not available in this release; see --help\n";
  return 1;
}

}  // namespace podprof::sim
