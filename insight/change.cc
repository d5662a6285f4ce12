#include "insight/change.h"

#include <algorithm>

namespace podprof::insight {
namespace {

QuantileShift Shift(const trace::DDSketch& baseline, const trace::DDSketch& candidate, double q,
                    double spread_q, double threshold) {
  const double floor = std::max(threshold, 2 * trace::DDSketch::kRelativeError);
  const double c = candidate.Quantile(q);
  QuantileShift s;
  s.change = RelativeChange(baseline.Quantile(q), c);
  s.regressed = s.change > floor && c > baseline.Quantile(spread_q);
  return s;
}

}  // namespace

double RelativeChange(double baseline, double candidate) {
  if (baseline <= 0 || candidate <= 0) return 0;
  return candidate / baseline - 1;
}

QuantileShift MedianShift(const trace::DDSketch& baseline, const trace::DDSketch& candidate,
                          double threshold) {
  return Shift(baseline, candidate, 0.5, 0.9, threshold);
}

QuantileShift TailShift(const trace::DDSketch& baseline, const trace::DDSketch& candidate,
                        double threshold) {
  return Shift(baseline, candidate, 0.99, 0.999, threshold);
}

double AchievedTflops(double flops_executed, int64_t total_ps) {
  return total_ps > 0 ? flops_executed / static_cast<double>(total_ps) : 0;
}

}  // namespace podprof::insight
