// A model of one agent's clock against the aggregator's, from NTP-style probes.
//
// A probe records four instants: t1 (aggregator sends), t2 (agent receives), t3 (agent sends),
// t4 (aggregator receives), each on its own side's clock. With offset = agent - aggregator,
// the true offset of that moment lies in [t3 - t4, t2 - t1]: the network cannot carry a message
// back in time. The narrowest probes (the fastest round trips) bound it best, so the model keeps
// the fastest probe of each burst and fits offset and drift through them.
// Not synchronised: the registry guards it.
#ifndef PODPROF_AGGREGATOR_CAPTURE_CLOCK_MODEL_H_
#define PODPROF_AGGREGATOR_CAPTURE_CLOCK_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace podprof::aggregator {

struct Probe {
  int64_t t1 = 0, t2 = 0, t3 = 0, t4 = 0;
  int64_t lower() const { return t3 - t4; }
  int64_t upper() const { return t2 - t1; }
  int64_t width() const { return upper() - lower(); }
  int64_t midpoint_time() const { return t1 + (t4 - t1) / 2; }
  int64_t midpoint_offset() const { return lower() + width() / 2; }
};

struct ClockEstimate {
  int64_t offset_ns = 0;       // agent clock - aggregator clock at the asked instant
  int64_t uncertainty_ns = 0;  // half the width of the bounds there
  double drift_ppb = 0;        // agent clock rate - 1, parts per billion
  int64_t min_rtt_ns = 0;
  int probes = 0;  // bursts the fit used
};

class ClockModel {
 public:
  // Probes within this span of each other form one burst (of which the fastest is kept).
  static constexpr int64_t kBurstSpanNs = 2'000'000'000;
  // Bursts kept for the fit: a sliding window, so the model follows slow drift changes.
  static constexpr size_t kMaxBursts = 32;

  void AddProbe(const Probe& p);
  bool empty() const { return bursts_.empty(); }

  // The offset at aggregator time `at_ns`: a line through the kept probes' midpoints (least
  // squares, weighted by their precision) when two or more bursts exist, else the best probe.
  // The result is clamped into the range every line within all the probes' bounds allows
  // there; `uncertainty_ns` is half that range.
  ClockEstimate At(int64_t at_ns) const;

  // Aggregator time -> agent time and back, with the estimate at that instant.
  int64_t ToAgent(int64_t aggregator_ns) const {
    return aggregator_ns + At(aggregator_ns).offset_ns;
  }
  int64_t ToAggregator(int64_t agent_ns) const;

 private:
  std::deque<Probe> bursts_;  // fastest probe of each burst, oldest first
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CAPTURE_CLOCK_MODEL_H_
