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

// The timed faults (`--slowdown-at`, `--stall-at`, `--duty-drop-at`) count their times from
// `epoch_ns` (true time, ns since the Unix epoch), so every host of a pod given the same epoch
// changes at the same instant.
// `--slowdown-at` "T:host:chip:factor", e.g. "10s:2:1:1.6": chip 1 of host 2 runs 1.6x slower
// from epoch + 10 s on.
absl::StatusOr<Straggler> ParseSlowdown(const std::string& text, int64_t epoch_ns);
// `--stall-at` "T" or "T:for", e.g. "20s" (no step after epoch + 20 s) or "20s:5s".
absl::StatusOr<Stall> ParseStall(const std::string& text, int64_t epoch_ns);
// `--duty-drop-at` "T:fraction", e.g. "20s:0.3": from epoch + 20 s, 30% of steps are not issued.
absl::StatusOr<StepSkip> ParseDutyDrop(const std::string& text, int64_t epoch_ns);
// `--dcn-delay-at` "T:slice:us", e.g. "10s:1:500": from epoch + 10 s, the DCN data slice 1
// sends arrives 500 us late.
absl::StatusOr<DcnDelay> ParseDcnDelay(const std::string& text, int64_t epoch_ns);
// `--slow-slice` "slice:factor", e.g. "2:1.5": every chip of slice 2 computes 1.5x slower.
absl::StatusOr<SlowSlice> ParseSlowSlice(const std::string& text);
// `--slow-slice-at` "T:slice:factor", e.g. "10s:2:1.5": the same from epoch + 10 s on.
absl::StatusOr<SlowSlice> ParseSlowSliceAt(const std::string& text, int64_t epoch_ns);

}  // namespace podprof::sim

#endif  // PODPROF_SIM_SIM_MAIN_H_
