// The life of a podprof daemon under systemd, shared by podprof-agent and podprof-aggregator so
// that both speak the service-manager protocol (common/sd_notify.h) the same way:
//
//   READY=1, STATUS=<status line>   once serving (the line is logged too)
//   WATCHDOG=1                       every half watchdog period, only while health() is OK
//   SIGHUP                           RELOADING=1, reload(), then READY=1 with the status line
//                                    (or "reload refused: bad configuration")
//   SIGTERM, SIGINT                  STOPPING=1, STATUS=draining, then drain(deadline)
//
// A main builds its service, fills a DaemonHooks and calls Run(), which returns once the daemon
// has drained. Every hook runs on the thread that called Run(), one at a time, so a hook never
// races another hook; they may still race the daemon's own threads (gRPC handlers).
//
// Time (the watchdog period, periodic work, the drain deadline) comes from a Clock, so a test
// drives the whole lifecycle with FakeClock.

#ifndef PODPROF_COMMON_DAEMON_H_
#define PODPROF_COMMON_DAEMON_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "common/sd_notify.h"

namespace podprof {

// What a daemon tells its lifecycle. Only status_line is required; a null hook does nothing.
struct DaemonHooks {
  // The STATUS= text once serving and after each reload, e.g. "listening on port 7100; ...".
  std::function<std::string()> status_line;

  // Whether the daemon does its work now. OK sends WATCHDOG=1; an error withholds it and is
  // logged, so that systemd restarts a daemon that is alive but wedged. Called every half
  // watchdog period, and only when systemd asked for a watchdog (WatchdogSec=). Null: healthy.
  std::function<absl::Status()> health;

  // Rereads the configuration and applies what may change while running. Returns a one-line
  // summary for the log, normally ChangedSummary(keys); or an error naming the file and the key,
  // in which case the hook must have left the running configuration as it was.
  std::function<absl::StatusOr<std::string>()> reload;

  // Stops taking new work and lets running work finish, by `deadline_ns` (wall time of the
  // lifecycle's Clock). Called once, after STOPPING=1.
  std::function<void(int64_t deadline_ns)> drain;

  // Periodic work that should not run beside a reload (the agent's heartbeat, retention): called
  // first `first_tick_ns` after Run() starts, then each time the delay it returns has passed.
  std::function<int64_t()> tick;
  int64_t first_tick_ns = 0;

  // The time drain() is given.
  int64_t drain_timeout_ns = 10'000'000'000;

  // Whether Run() takes SIGTERM, SIGINT and SIGHUP for as long as it runs (restoring the
  // previous handlers when it returns). Off, only RequestStop and RequestReload drive it.
  bool handle_signals = true;
};

// "changed: a, b", or "changed: nothing" for no keys: the reload summary both daemons log.
std::string ChangedSummary(const std::vector<std::string>& keys);

// Runs one daemon's lifecycle. Run() is called once, from one thread; RequestStop and
// RequestReload are thread-safe and may be called at any time, also before Run() (the request
// waits for it). At most one lifecycle per process may handle signals at a time.
class DaemonLifecycle {
 public:
  // `clock` and `notifier` must outlive the lifecycle. The notifier's watchdog period (from
  // WATCHDOG_USEC) decides whether health() is ever called.
  DaemonLifecycle(DaemonHooks hooks, Clock& clock, ServiceNotifier& notifier);
  DaemonLifecycle(const DaemonLifecycle&) = delete;
  DaemonLifecycle& operator=(const DaemonLifecycle&) = delete;

  // Announces READY, serves (watchdog, tick, reloads) until a stop request or signal, then
  // announces STOPPING and drains. Returns the signal that stopped it (RequestStop's argument).
  // Failing to install signal handlers or to reach the notify socket is logged, not fatal: the
  // daemon still serves.
  int Run();

  // Asks Run() to stop as if `signal` (SIGTERM or SIGINT; 0 and SIGHUP count as SIGTERM) had
  // arrived.
  void RequestStop(int signal);

  // Asks Run() to reload as if SIGHUP had arrived.
  void RequestReload();

 private:
  // A signal number; SIGHUP means reload, anything else stop.
  using Request = int;

  // Waits until a request is pending (returning it) or MonotonicNs() reaches `due_ns` (returning
  // 0), without ever sleeping past a wall-clock slice, so a step of the system time cannot
  // starve the watchdog.
  Request WaitForRequest(int64_t due_ns);
  void Deliver(Request request);
  // Whether the reload was applied.
  bool Reload();
  void CheckHealth();

  const DaemonHooks hooks_;
  Clock& clock_;
  ServiceNotifier& notifier_;

  absl::Mutex mu_;
  std::deque<Request> pending_ ABSL_GUARDED_BY(mu_);
  // Notified when a request arrives while Run() sleeps; borrowed from WaitForRequest's frame.
  absl::Notification* wake_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace podprof

#endif  // PODPROF_COMMON_DAEMON_H_
