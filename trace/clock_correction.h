// A host's clock correction and its application: aggregator time = host time - offset_ns at the
// reference instant mid_ns, with drift_ppb across the window. The ingest pipeline keeps
// timelines and counters on the host's clock with these parameters beside them, and readers
// apply them, so nothing is rewritten once the pod's alignment is known.
#ifndef PODPROF_TRACE_CLOCK_CORRECTION_H_
#define PODPROF_TRACE_CLOCK_CORRECTION_H_

#include <cmath>
#include <cstdint>

#include "trace/model.h"

namespace podprof::trace {

struct ClockCorrection {
  int64_t offset_ns = 0;
  double drift_ppb = 0;
  int64_t mid_ns = 0;  // aggregator clock

  bool identity() const { return offset_ns == 0 && drift_ppb == 0; }
  // Host instant `t_ns` on the aggregator's clock.
  int64_t ApplyNs(int64_t t_ns) const {
    const int64_t shifted = t_ns - offset_ns;
    return shifted - std::llround(drift_ppb * 1e-9 * static_cast<double>(shifted - mid_ns));
  }
};

// Puts a block's events on the aggregator's clock: the offset moves its base, the drift each
// event at ps resolution.
void ApplyCorrection(const ClockCorrection& c, EventBlock* b);
// Puts a series' samples on the aggregator's clock (the same correction as the events, drift
// included: attributing counters to kernels needs the two to agree well under a microsecond).
void ApplyCorrection(const ClockCorrection& c, CounterSeries* s);
// Both, for every block and series of `capture`.
void ApplyCorrection(const ClockCorrection& c, HostCapture* capture);

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_CLOCK_CORRECTION_H_
