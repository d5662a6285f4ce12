#include "sim/sim_main.h"

int main(int argc, char** argv) { return podprof::sim::SimHostMain(argc, argv); }
