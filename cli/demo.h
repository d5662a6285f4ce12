// `podprof demo`: a whole pod on this machine, captured once. Starts, as child processes on
// loopback ports they pick, an aggregator with a fresh database, N simulated TPU hosts forming
// one pod (each with a small, known clock error) and N agents; waits until every agent is
// registered and its clock probed; runs a capture with the live display; prints the top
// kernels, each host's clock correction against the error it was given, and the path of a
// Perfetto trace of the merged timeline; then stops every child (or, with --keep, leaves them
// running and says how to reach and stop them). With --slices, the pod is a multi-slice job
// and the capture's DCN view follows its rows. With --recorder, the flight recorder's path
// instead (demo_recorder.h): a fault injected and the snapshot its trigger takes.
#ifndef PODPROF_CLI_DEMO_H_
#define PODPROF_CLI_DEMO_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "cli/capture_command.h"
#include "cli/report.h"
#include "common/clock.h"

namespace podprof::cli {

struct DemoOptions {
  int hosts = 4;
  std::string generation = "v5p";
  int64_t duration_ns = 2'000'000'000;
  // How long after the window the capture may take (the hosts writing their traces, the agents
  // streaming, the aggregator storing); past it the demo cancels the capture, names the hosts
  // not done and says what to try.
  int64_t timeout_ns = 90'000'000'000;
  bool keep = false;
  // Where the database, logs and trace go; empty = a new directory under $TMPDIR or /tmp.
  std::string dir;
  uint64_t seed = 1;
  // Ask the capture for kernel profiling (every 10 us), and throttle a simulated chip
  // ("HOST:CHIP:FRACTION", podprof-simhost --throttle; empty = none).
  bool kernel_profiling = false;
  std::string throttle;
  OutputFormat format = OutputFormat::kTable;
  Display display;
  // `--slices`: the pod as a multi-slice job of this many slices (0 = one slice, the plain
  // pod), the hosts split evenly, each simulated host told its slice; after the capture the
  // demo shows its cross-slice (DCN) view as `podprof dcn CAPTURE` shows it. `dcn_delays`
  // ("T:SLICE:US") and `slow_slices` ("SLICE:FACTOR") are podprof-simhost's --dcn-delay-at and
  // --slow-slice, given to every host, T counted from the demo's start.
  int slices = 0;
  std::vector<std::string> dcn_delays, slow_slices;
  // Directory holding podprof-aggregator, podprof-agent and podprof-simhost; empty = this
  // executable's own directory.
  std::string bin_dir;
  // `--recorder`: the flight recorder's path (demo_recorder.h) instead of one capture: the
  // agents' recorders armed, a fault injected at `fault_at_ns` from the demo's start, and the
  // snapshot its trigger takes shown. `scenario` is straggler, hang or duty-drop; past
  // `trigger_timeout_ns` after the fault without a triggered snapshot the demo gives up.
  bool recorder = false;
  std::string scenario = "straggler";
  int64_t fault_at_ns = 15'000'000'000;
  int64_t trigger_timeout_ns = 45'000'000'000;
  // Paces every wait of the demo (children starting, agents registering, children stopping);
  // null = the system clock. Borrowed for the duration of RunDemo.
  Clock* clock = nullptr;
};

// Returns the process exit code (0 complete, 1 partial, failed or timed-out capture, 2 could
// not start). A capture without data prints each host's outcome and advice, never a trace or
// queries to try.
int RunDemo(const DemoOptions& options, std::ostream& out, std::ostream& err);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_DEMO_H_
