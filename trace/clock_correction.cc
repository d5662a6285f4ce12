#include "trace/clock_correction.h"

namespace podprof::trace {

void ApplyCorrection(const ClockCorrection& c, EventBlock* b) {
  if (c.identity()) return;
  b->base_ns -= c.offset_ns;
  if (c.drift_ppb == 0) return;
  // From the event's instant in whole ps since the middle, so that one instant gets one
  // correction whichever block (base) it is expressed in: a scope starting with its kernel
  // stays inside it.
  const int64_t base_ps = (b->base_ns - c.mid_ns) * 1000;
  for (size_t e = 0; e < b->size(); ++e) {
    const double since_mid_ps = static_cast<double>(base_ps + b->start_ps[e]);
    b->start_ps[e] -= std::llround(c.drift_ppb * 1e-9 * since_mid_ps);
  }
}

void ApplyCorrection(const ClockCorrection& c, CounterSeries* s) {
  if (c.identity()) return;
  for (int64_t& t : s->time_ns) t = c.ApplyNs(t);
}

void ApplyCorrection(const ClockCorrection& c, HostCapture* capture) {
  for (EventBlock& b : capture->blocks) ApplyCorrection(c, &b);
  for (CounterSeries& s : capture->counters) ApplyCorrection(c, &s);
}

}  // namespace podprof::trace
