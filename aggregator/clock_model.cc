#include "aggregator/clock_model.h"

#include <algorithm>
#include <cmath>

namespace podprof::aggregator {

void ClockModel::AddProbe(const Probe& p) {
  if (p.t4 < p.t1 || p.width() < 0) return;  // Not a possible probe: clocks or order are broken.
  if (!bursts_.empty() && p.t1 - bursts_.back().t1 < kBurstSpanNs) {
    if (p.width() < bursts_.back().width()) bursts_.back() = p;
    return;
  }
  bursts_.push_back(p);
  while (bursts_.size() > kMaxBursts) bursts_.pop_front();
}

ClockEstimate ClockModel::At(int64_t at_ns) const {
  ClockEstimate e;
  if (bursts_.empty()) return e;
  e.probes = static_cast<int>(bursts_.size());
  e.min_rtt_ns = INT64_MAX;
  const Probe* best = &bursts_.front();
  for (const Probe& p : bursts_) {
    e.min_rtt_ns = std::min(e.min_rtt_ns, p.t4 - p.t1);
    if (p.width() < best->width()) best = &p;
  }
  double offset = static_cast<double>(best->midpoint_offset());
  double slope = 0;
  if (bursts_.size() >= 2) {
    // Weighted least squares of midpoint offset on time (times relative to the first burst,
    // so doubles keep ns precision), weights 1 / width^2.
    const double t0 = static_cast<double>(bursts_.front().midpoint_time());
    double sw = 0, st = 0, so = 0, stt = 0, sto = 0;
    for (const Probe& p : bursts_) {
      double w = 1.0 / std::pow(std::max<double>(1000, static_cast<double>(p.width())), 2);
      double t = static_cast<double>(p.midpoint_time()) - t0;
      double o = static_cast<double>(p.midpoint_offset());
      sw += w;
      st += w * t;
      so += w * o;
      stt += w * t * t;
      sto += w * t * o;
    }
    double denom = sw * stt - st * st;
    if (denom > 0 && stt / sw > 1e16) {  // bursts spread over at least ~0.1 s
      slope = (sw * sto - st * so) / denom;
      double intercept = (so - slope * st) / sw;
      offset = intercept + slope * (static_cast<double>(at_ns) - t0);
    }
  }
  // Every probe's bounds hold at its own instant; carried to `at_ns` with the fitted drift, the
  // tightest of them still holds, so the estimate never leaves it.
  double lo = -1e300, hi = 1e300;
  for (const Probe& p : bursts_) {
    double shift = slope * (static_cast<double>(at_ns) - static_cast<double>(p.midpoint_time()));
    lo = std::max(lo, static_cast<double>(p.lower()) + shift);
    hi = std::min(hi, static_cast<double>(p.upper()) + shift);
  }
  if (lo <= hi) {
    offset = std::clamp(offset, lo, hi);
    e.uncertainty_ns = static_cast<int64_t>(std::ceil((hi - lo) / 2));
  } else {
    // Bounds disagree (the drift changed): fall back to the freshest burst's own bound.
    e.uncertainty_ns = bursts_.back().width() / 2;
  }
  e.offset_ns = std::llround(offset);
  e.drift_ppb = slope * 1e9;
  return e;
}

int64_t ClockModel::ToAggregator(int64_t agent_ns) const {
  // offset changes by parts per million at most: two fixed-point steps are exact enough.
  int64_t guess = agent_ns - At(agent_ns).offset_ns;
  return agent_ns - At(guess).offset_ns;
}

}  // namespace podprof::aggregator
