// What both of `podprof demo`'s paths share (the one capture, demo.cc, and the flight
// recorder's, demo_recorder.cc): the simulated pod they start, the thread that stops it on
// Ctrl-C, the wait for its agents, and where the binaries and files are.
#ifndef PODPROF_CLI_DEMO_POD_H_
#define PODPROF_CLI_DEMO_POD_H_

#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/aggregator_client.h"
#include "cli/demo.h"
#include "common/clock.h"
#include "launch/pod_launcher.h"

namespace podprof::cli {

// The demo's pod in `dir`: the aggregator, then per host a simulated host and its agent, each
// started once the one before is ready, from the thread that runs the demo (their death signal
// fires when it exits). Each host's clock is wrong by a few milliseconds, drifts by some ppm,
// and every other host's device clock is off by up to 100 us: alignment has something to do.
// With options.slices, a multi-slice job with its DCN faults timed from now on `clock`.
// `clock` is borrowed by the Pod made from the result.
launch::PodOptions DemoPod(const DemoOptions& options, const std::string& bin,
                           const std::string& dir, Clock& clock);

// Signals that would end the demo (Ctrl-C, SIGTERM, SIGHUP) are taken by a thread of their
// own, which stops the pod before the demo exits, so no process or port outlives it; the
// children's death signal covers the demo dying some other way. With --keep there is no such
// thread, and the children run on, in sessions of their own, after the demo. Lives on the
// demo's thread; `pod` must outlive it.
class StopOnSignal {
 public:
  StopOnSignal(bool keep, launch::Pod& pod);
  ~StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

 private:
  const bool keep_;
  launch::Pod& pod_;
  std::thread watcher_;
};

// Waits up to 30 s for `hosts` agents online, each with two probe bursts behind it (so its
// clock model has a drift). DeadlineExceeded naming `dir` (the logs) when they are not.
absl::Status WaitForAgents(AggregatorClient& client, Clock& clock, int hosts,
                           const std::string& dir);

// The folder of the daemons' binaries: options.bin_dir, else this executable's; NotFound
// naming the first one missing.
absl::StatusOr<std::string> BinDir(const DemoOptions& options);

// The demo's folder: options.dir, else a new one under $TMPDIR or /tmp.
absl::StatusOr<std::string> DemoDir(const DemoOptions& options);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_DEMO_POD_H_
