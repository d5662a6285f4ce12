// Time as podprof sees it.
//
// Production code never reads the system clock or sleeps directly: it is
// given a Clock& in its constructor. main() builds one RealClock; tests use
// FakeClock and move time forward explicitly, so nothing in a unit test
// depends on how fast the machine is.

#ifndef PODPROF_COMMON_CLOCK_H_
#define PODPROF_COMMON_CLOCK_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace podprof {

// Source of wall and monotonic time, and a cancellable sleep.
// Implementations are thread-safe: every method may be called from any
// thread concurrently.
class Clock {
 public:
  virtual ~Clock() = default;

  // Returns the wall clock time in ns since the Unix epoch. May jump in
  // either direction when the system time is stepped.
  virtual int64_t NowNs() = 0;

  // Returns ns since an arbitrary fixed origin (per Clock object). Never
  // decreases; use it to measure intervals.
  virtual int64_t MonotonicNs() = 0;

  // Blocks the calling thread until NowNs() >= `wall_ns`. Returns true when
  // that time is reached (at once if it already has), or false as soon as
  // `cancel` is notified, which takes precedence: a cancel notified before
  // the call makes it return false even if `wall_ns` is in the past.
  // `cancel` may be null (then the sleep cannot be cut short); it is
  // borrowed for the duration of the call only.
  virtual bool SleepUntilNs(int64_t wall_ns, absl::Notification* cancel) = 0;
};

// The system clock. The only code in podprof that reads the OS clocks or
// sleeps (log timestamps aside, see logging.cc). Stateless, so one instance may be shared by any
// number of threads.
class RealClock final : public Clock {
 public:
  RealClock() = default;

  // CLOCK_REALTIME.
  int64_t NowNs() override;

  // CLOCK_MONOTONIC.
  int64_t MonotonicNs() override;

  // Wakes within microseconds of `cancel` being notified. A step of the
  // system time is noticed within 100 ms (see clock.cc).
  bool SleepUntilNs(int64_t wall_ns, absl::Notification* cancel) override;
};

// A clock that only moves when told to, for tests. Thread-safe: one thread
// may sleep on it while another advances it.
class FakeClock final : public Clock {
 public:
  // Starts the wall clock at `start_ns` (ns since the Unix epoch) and the
  // monotonic clock at 0.
  explicit FakeClock(int64_t start_ns);

  FakeClock(const FakeClock&) = delete;
  FakeClock& operator=(const FakeClock&) = delete;

  // Returns the fake wall time.
  int64_t NowNs() override;

  // Returns the largest (fake wall time - start_ns) seen so far, so it
  // follows the wall clock forward but stays put when SetNs moves the wall
  // clock back.
  int64_t MonotonicNs() override;

  // Blocks until another thread moves the fake time to >= `wall_ns`, or
  // `cancel` is notified (noticed within about 10 ms of real time, since
  // Notification cannot wake a Mutex waiter). Counts in Sleepers() while
  // blocked.
  bool SleepUntilNs(int64_t wall_ns, absl::Notification* cancel) override;

  // Sets the fake wall time to `now_ns`, which may be earlier than the
  // current fake time (a clock step), and wakes sleepers that are due.
  void SetNs(int64_t now_ns);

  // Moves the fake wall time by `delta_ns` (normally positive) and wakes
  // sleepers that are due.
  void AdvanceNs(int64_t delta_ns);

  // Returns how many threads are blocked in SleepUntilNs right now.
  int Sleepers() const;

  // Blocks until at least `count` threads are blocked in SleepUntilNs, or
  // `timeout` of real time has passed. Returns whether the count was
  // reached. Lets a test park a thread before advancing time, without
  // polling.
  bool AwaitSleepers(int count, absl::Duration timeout) const;

 private:
  const int64_t start_ns_;
  mutable absl::Mutex mu_;

  // Guarded by mu_.
  int64_t now_ns_ ABSL_GUARDED_BY(mu_);
  int64_t monotonic_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int sleepers_ ABSL_GUARDED_BY(mu_) = 0;
};

// Parses a duration written as a decimal number and a unit, e.g. "250ms",
// "2s", "1.5s", "-37.5ms", "100us", "10ns", "3m", "1h", and returns it in ns
// (fractions rounded to the nearest ns). Units: ns, us, ms, s, m (minutes),
// h, d (days). A unit is required except for zero ("0"). No whitespace, no compound
// forms ("1h30m"), at least one digit on each side of a decimal point.
// Errors: InvalidArgument naming the text and the problem, e.g.
//   bad duration "2x": unknown unit "x" (use ns, us, ms, s, m, h, d)
// for empty text, garbage, an unknown or missing unit, or a value that does
// not fit in int64 ns (about +-292 years).
absl::StatusOr<int64_t> ParseDurationNs(absl::string_view text);

// Formats `ps` picoseconds for people, with the largest unit among ps, ns,
// us, ms, s that keeps the number >= 1 and three significant digits:
// "812 ps", "1.23 ns", "45.6 us", "2.00 ms", "1.50 s". Negative values get a
// leading "-". Picoseconds are shown as an integer; durations of 1000 s and
// more are shown as whole seconds ("3600 s").
std::string FormatDurationPs(int64_t ps);

}  // namespace podprof

#endif  // PODPROF_COMMON_CLOCK_H_
