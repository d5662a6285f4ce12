// Where a true instant lands in a simulated host's XSpace. Shared by the XSpace builder and
// the kernel-profiling writer so that everything on a device plane uses one mapping.
#ifndef PODPROF_SIM_TIMEBASE_H_
#define PODPROF_SIM_TIMEBASE_H_

#include <cstdint>

#include "common/skewed_clock.h"

namespace podprof::sim {

// Host-clock ps since the profile start (a host clock's view of the window), plus the device
// shift on device planes.
struct Timebase {
  const SkewedClock& clock;
  int64_t true_start_ps = 0;
  int64_t true_end_ps = 0;
  int64_t device_shift_ps = 0;

  int64_t HostOffsetPs(int64_t true_ps) const {
    return clock.HostIntervalPs(true_ps - true_start_ps);
  }
  int64_t DeviceOffsetPs(int64_t true_ps) const { return HostOffsetPs(true_ps) + device_shift_ps; }
  bool Inside(int64_t true_ps) const { return true_ps >= true_start_ps && true_ps < true_end_ps; }
};

}  // namespace podprof::sim

#endif  // PODPROF_SIM_TIMEBASE_H_
