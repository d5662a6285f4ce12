// Entry point of podprof-aggregator: the pod-wide capture and statistics daemon.
#ifndef PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_
#define PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_

namespace podprof::aggregator {

// Parses flags and runs the program; returns the process exit code. Lives in the library, not
// in main.cc, so integration tests can run it.
int AggregatorMain(int argc, char** argv);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_
