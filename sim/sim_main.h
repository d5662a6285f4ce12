// Entry point of podprof-simhost: a simulated TPU host serving the profiler and metric protocols.
#ifndef PODPROF_SIM_SIM_MAIN_H_
#define PODPROF_SIM_SIM_MAIN_H_

namespace podprof::sim {

// Parses flags and runs the program; returns the process exit code. Lives in the library, not
// in main.cc, so integration tests can run it.
int SimHostMain(int argc, char** argv);

}  // namespace podprof::sim

#endif  // PODPROF_SIM_SIM_MAIN_H_
