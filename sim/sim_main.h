// Entry point of podprof-simhost: a simulated TPU host serving the profiler and metric
// protocols.
#ifndef PODPROF_SIM_SIM_MAIN_H_
#define PODPROF_SIM_SIM_MAIN_H_

#include <string>

#include "absl/status/statusor.h"
#include "sim/pod_model.h"

namespace podprof::sim {

// Parses flags, serves until SIGTERM or SIGINT, and returns the process exit code (2 for bad
// flags). Lives in the library, not in main.cc, so tests can run it.
int SimHostMain(int argc, char** argv);

// Parses `--straggler` values "host:chip:factor", e.g. "1:3:1.5".
absl::StatusOr<Straggler> ParseStraggler(const std::string& text);

// Parses `--throttle` values "host:chip:fraction", e.g. "1:2:0.3" (30% of clocks skipped).
absl::StatusOr<Throttle> ParseThrottle(const std::string& text);

}  // namespace podprof::sim

#endif  // PODPROF_SIM_SIM_MAIN_H_
