#include <iostream>

#include "cli/cli_main.h"
#include "common/process.h"

int main(int argc, char** argv) {
  podprof::InitProcess();
  return podprof::cli::CliMain(argc, argv, std::cout, std::cerr);
}
