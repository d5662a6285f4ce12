#include "aggregator/aggregator_main.h"

int main(int argc, char** argv) { return podprof::aggregator::AggregatorMain(argc, argv); }
