#include "aggregator/aggregator_main.h"
#include "common/process.h"

int main(int argc, char** argv) {
  podprof::InitProcess();
  return podprof::aggregator::AggregatorMain(argc, argv);
}
