// Entry point of podprof-aggregator: the pod-wide capture and statistics daemon.
#ifndef PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_
#define PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_

namespace podprof::aggregator {

// Parses flags and the config file (aggregator/config.h), serves until SIGTERM/SIGINT (SIGHUP
// reloads the [retention] keys; common/daemon.h), and returns the process exit code: 0 after a
// clean drain, 2 for bad configuration, 1 when the database cannot be opened or the address
// bound. Lives in the library, not in main.cc, so tests can run it.
int AggregatorMain(int argc, char** argv);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_
