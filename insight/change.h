// What counts as a change between two sets of executions of one kernel: the relative change of
// a figure, and the regression rule `podprof diff`, `podprof fleet regressions` and the history
// chart share (docs/INSIGHT.md, "Regressions"). Also the rate a kernel achieved, from totals
// that may merge several kernel rows.
#ifndef PODPROF_INSIGHT_CHANGE_H_
#define PODPROF_INSIGHT_CHANGE_H_

#include <cstdint>

#include "trace/ddsketch.h"

namespace podprof::insight {

// The threshold `podprof diff` and the history chart use unless told otherwise: 5%.
inline constexpr double kDefaultRegressionThreshold = 0.05;

// The change of `candidate` over `baseline`, as a fraction (0.1 = 10% slower); 0 if either is
// 0 or less (nothing measured on one side is not a change).
double RelativeChange(double baseline, double candidate);

// How one quantile moved, and whether that is a regression.
struct QuantileShift {
  double change = 0;  // RelativeChange of the quantile
  bool regressed = false;
};

// The median's shift: a regression when it rose by more than `threshold` (never less than twice
// the sketch's own error, which noise alone reaches) and past the baseline's p90, so a shift
// inside the baseline's own spread does not count.
QuantileShift MedianShift(const trace::DDSketch& baseline, const trace::DDSketch& candidate,
                          double threshold);

// The tail's shift, by the same rule one decade further out: p99 against the baseline's p99.9.
QuantileShift TailShift(const trace::DDSketch& baseline, const trace::DDSketch& candidate,
                        double threshold);

// TFLOP/s achieved: `flops_executed` (each row's flops per execution times its executions,
// summed over the rows merged) over `total_ps` (their summed time). Flops per ps are TFLOP/s.
// 0 when no time was spent.
double AchievedTflops(double flops_executed, int64_t total_ps);

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_CHANGE_H_
