// `podprof demo --recorder`: the flight recorder seen working in one command. Starts the demo's
// simulated pod (demo_pod.h) with every agent's recorder armed behind a short guard, the
// aggregator's triggers on short recent and baseline windows, and one fault scheduled in the
// simulated hosts a healthy while after the start: a chip turning slow (straggler), the job
// ceasing to issue steps (hang) or its input starving the chips (duty-drop). Before the fault it
// takes a baseline snapshot from the recorders; then it waits for the aggregator's trigger to
// snapshot the pod and prints that snapshot's id, its reason in a sentence, the straggler
// analysis of its window, and the `podprof diff` of the baseline against it.
#ifndef PODPROF_CLI_DEMO_RECORDER_H_
#define PODPROF_CLI_DEMO_RECORDER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/demo.h"

namespace podprof::cli {

// What a scenario does to the simulated pod.
struct DemoFault {
  // The simulated hosts' flags that schedule it (sim/sim_main.h), counted from the demo's start.
  std::vector<std::string> simhost_flags;
  // For people: "chip 1 of host-2 turns 1.6x slower".
  std::string said;
  // The triggers expected to take its snapshot (aggregator/recorder/triggers.h names).
  std::vector<std::string> triggers;
  // The straggler injected (host name, chip), for the straggler scenario; empty host otherwise.
  std::string host;
  int chip = -1;
};

// The fault of `scenario` (straggler, hang, duty-drop) at `fault_at_ns` on a pod of `hosts`;
// InvalidArgument naming the scenarios for another name.
absl::StatusOr<DemoFault> ScenarioFault(const std::string& scenario, int hosts,
                                        int64_t fault_at_ns);

// Runs the demo; returns the exit code: 0 a triggered snapshot was stored and shown; 1 (partial)
// no trigger fired within options.trigger_timeout_ns of the fault, or its snapshot failed,
// with what to try on `err`; 2 the pod could not start or a flag was bad.
int RunRecorderDemo(const DemoOptions& options, std::ostream& out, std::ostream& err);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_DEMO_RECORDER_H_
