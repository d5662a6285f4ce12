// A clock that is wrong in a known way: how simulated hosts (and agents under test) see time.
#ifndef PODPROF_COMMON_SKEWED_CLOCK_H_
#define PODPROF_COMMON_SKEWED_CLOCK_H_

#include <cstdint>

#include "common/clock.h"

namespace podprof {

// host(t) = t + offset + drift * (t - epoch), where t is the true time of `truth` and `epoch`
// the true time at construction unless given. Two processes that stand for one host (a
// simulated host and its agent) must be given the same epoch: each taking its own start-up
// time, their clocks would differ by drift x the time between the two starts (30 ms at 50 ppm
// is 1.5 us, which alignment would then be blamed for). Everything the simulated host stamps or
// waits for goes through it. Thread-safe (immutable; the underlying clock is thread-safe).
class SkewedClock final : public Clock {
 public:
  // `truth` must outlive this clock.
  // `epoch_ns` 0: now.
  SkewedClock(Clock& truth, int64_t offset_ns, double drift_ppm, int64_t epoch_ns = 0);

  int64_t NowNs() override { return ToHost(truth_.NowNs()); }
  int64_t MonotonicNs() override { return truth_.MonotonicNs(); }
  // Sleeps until the host clock reads `host_ns`.
  bool SleepUntilNs(int64_t host_ns, absl::Notification* cancel) override {
    return truth_.SleepUntilNs(ToTrue(host_ns), cancel);
  }

  int64_t ToHost(int64_t true_ns) const;
  int64_t ToTrue(int64_t host_ns) const;
  // Host-clock length of a true interval, ps (drift stretches it).
  int64_t HostIntervalPs(int64_t true_ps) const;

  int64_t offset_ns() const { return offset_ns_; }
  double drift_ppm() const { return drift_ppm_; }
  int64_t epoch_ns() const { return epoch_ns_; }

 private:
  Clock& truth_;
  const int64_t offset_ns_;
  const double drift_ppm_;
  const int64_t epoch_ns_;
};

}  // namespace podprof

#endif  // PODPROF_COMMON_SKEWED_CLOCK_H_
