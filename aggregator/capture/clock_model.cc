#include "aggregator/capture/clock_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace podprof::aggregator {

namespace {

// The range of offsets at `at_ns` of the lines a + b t that pass within every probe's bounds
// in [begin, end). That is a linear program in (a, b), and a two-variable one has its optimum
// fixed by two of its constraints; every other pair only allows more. So the range is the
// tightest of the ranges each pair of probes allows alone, which for a pair is the line
// through their bounds' ends, chosen by the sign each probe's weight has at `at_ns`. One probe
// alone: its own bounds (no drift known). lo > hi: no line fits them all.
std::pair<double, double> FeasibleRange(std::deque<Probe>::const_iterator begin,
                                        std::deque<Probe>::const_iterator end, int64_t at_ns) {
  if (end - begin == 1) {
    return {static_cast<double>(begin->lower()), static_cast<double>(begin->upper())};
  }
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  for (auto i = begin; i != end; ++i) {
    for (auto j = i + 1; j != end; ++j) {
      const double span = static_cast<double>(j->midpoint_time() - i->midpoint_time());
      if (span == 0) continue;
      // offset(at) = wi * offset(ti) + wj * offset(tj), wi + wj = 1.
      const double wj = static_cast<double>(at_ns - i->midpoint_time()) / span;
      const double wi = 1 - wj;
      const auto l = [](const Probe& p) { return static_cast<double>(p.lower()); };
      const auto u = [](const Probe& p) { return static_cast<double>(p.upper()); };
      hi = std::min(hi, wi * (wi >= 0 ? u(*i) : l(*i)) + wj * (wj >= 0 ? u(*j) : l(*j)));
      lo = std::max(lo, wi * (wi >= 0 ? l(*i) : u(*i)) + wj * (wj >= 0 ? l(*j) : u(*j)));
    }
  }
  return {lo, hi};
}

}  // namespace

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
  // The bounds of every line that passes through all the bursts' bounds: the fitted drift is
  // itself uncertain, and carried far along it the bounds can miss the truth. When no line fits
  // them all (the drift changed), the oldest bursts are dropped until one does.
  for (size_t first = 0; first < bursts_.size(); ++first) {
    const auto [lo, hi] =
        FeasibleRange(bursts_.begin() + static_cast<std::ptrdiff_t>(first), bursts_.end(), at_ns);
    if (lo > hi) continue;
    offset = std::clamp(offset, lo, hi);
    e.uncertainty_ns = static_cast<int64_t>(std::ceil((hi - lo) / 2));
    break;
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
