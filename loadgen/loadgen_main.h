// Entry point of podprof-loadgen: one process that registers as N podprof agents with an
// aggregator, so the aggregator can be measured at the size of a real pod on a small machine.
#ifndef PODPROF_LOADGEN_LOADGEN_MAIN_H_
#define PODPROF_LOADGEN_LOADGEN_MAIN_H_

namespace podprof::loadgen {

// Parses flags, serves until SIGTERM/SIGINT or --exit-after, returns the exit code (2 for bad
// flags, 1 when the ports cannot be bound).
int LoadgenMain(int argc, char** argv);

}  // namespace podprof::loadgen

#endif  // PODPROF_LOADGEN_LOADGEN_MAIN_H_
