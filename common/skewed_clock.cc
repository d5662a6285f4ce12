#include "common/skewed_clock.h"

#include <cmath>

namespace podprof {

SkewedClock::SkewedClock(Clock& truth, int64_t offset_ns, double drift_ppm, int64_t epoch_ns)
    : truth_(truth),
      offset_ns_(offset_ns),
      drift_ppm_(drift_ppm),
      epoch_ns_(epoch_ns != 0 ? epoch_ns : truth.NowNs()) {}

int64_t SkewedClock::ToHost(int64_t true_ns) const {
  // Drift is applied to the time since the epoch only, so int64 ns stay exact for offsets.
  return true_ns + offset_ns_ +
         std::llround(static_cast<double>(true_ns - epoch_ns_) * drift_ppm_ * 1e-6);
}

int64_t SkewedClock::ToTrue(int64_t host_ns) const {
  double since = static_cast<double>(host_ns - offset_ns_ - epoch_ns_) / (1 + drift_ppm_ * 1e-6);
  return epoch_ns_ + std::llround(since);
}

int64_t SkewedClock::HostIntervalPs(int64_t true_ps) const {
  return true_ps + std::llround(static_cast<double>(true_ps) * drift_ppm_ * 1e-6);
}

}  // namespace podprof
