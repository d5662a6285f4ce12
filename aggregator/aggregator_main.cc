#include "aggregator/aggregator_main.h"

#include <iostream>
#include <string>

#include "CLI/CLI.hpp"

namespace podprof::aggregator {

int AggregatorMain(int argc, char** argv) {
  CLI::App app{"podprof-aggregator: the pod-wide capture and statistics daemon"};
  app.name("podprof-aggregator");
  std::string config;
  app.add_option("--config", config, "TOML configuration file");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // The daemon itself is not part of this release; say so instead of pretending to run.
  std::cerr << "podprof-aggregator: not available in this release; see --help\n";
  return 1;
}

}  // namespace podprof::aggregator
