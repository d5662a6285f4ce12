// A thread that runs a task again and again on a Clock until stopped: the one shape of every
// periodic loop in the daemons (the aggregator's clock prober and overview warmer, the fleet
// replicator, the agent's metric sampler), so that each stops the same way, promptly, and waits
// only through the Clock a test can drive.
#ifndef PODPROF_COMMON_PERIODIC_H_
#define PODPROF_COMMON_PERIODIC_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "common/clock.h"

namespace podprof {

class PeriodicThread {
 public:
  // What a run of the task asks for next: the wall time to run again at, or none to end the
  // thread.
  using Task = std::function<std::optional<int64_t>()>;

  // Starts a thread named `name` (what `top -H` and a debugger show; at most 15 characters
  // are kept) that sleeps on `clock` until `first_ns` (wall time), runs `task`, and sleeps
  // until the time the task returns, until the task returns none or Stop() is called.
  // `clock` must outlive the thread.
  PeriodicThread(std::string name, Clock& clock, int64_t first_ns, Task task);
  // The same, named "podprof-periodic".
  PeriodicThread(Clock& clock, int64_t first_ns, Task task)
      : PeriodicThread("podprof-periodic", clock, first_ns, std::move(task)) {}
  // Every `interval_ns` from one interval after now, for a task that never ends the thread.
  static std::optional<int64_t> Every(Clock& clock, int64_t interval_ns) {
    return clock.NowNs() + interval_ns;
  }
  ~PeriodicThread() { Stop(); }
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  // Cuts the current sleep short, waits for a running task to return, and joins the thread.
  // Idempotent; not to be called from the task itself.
  void Stop();
  // Whether Stop() was asked for.
  bool stopping() const { return stop_.HasBeenNotified(); }

 private:
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace podprof

#endif  // PODPROF_COMMON_PERIODIC_H_
