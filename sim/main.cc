#include "common/process.h"
#include "sim/sim_main.h"

int main(int argc, char** argv) {
  podprof::InitProcess();
  return podprof::sim::SimHostMain(argc, argv);
}
