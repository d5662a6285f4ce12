#include "common/process.h"
#include "loadgen/loadgen_main.h"

int main(int argc, char** argv) {
  podprof::InitProcess();
  return podprof::loadgen::LoadgenMain(argc, argv);
}
