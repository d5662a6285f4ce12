// Hardware counters attributed to the kernels that ran while they counted.
//
// Every counter series of a chip is integrated over each kernel execution on that chip: a
// running total (trace::CounterKind::kCumulative) gives the increase across the execution, its
// value between samples read off the straight line through them; a gauge gives the integral
// of its level, each sample holding until the next, so that the time-weighted mean over a
// kernel is integral / covered time. Only the part of an execution inside the series' span
// counts, and the covered time says how much that was: a kernel outside every series gets no
// row rather than a made-up number.
#ifndef PODPROF_INSIGHT_ATTRIBUTION_H_
#define PODPROF_INSIGHT_ATTRIBUTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trace/analysis_rows.h"
#include "trace/model.h"

namespace podprof::insight {

// One counter over all executions of one kernel on one chip.
using KernelCounter = trace::KernelCounter;

// A series integrated over time; times are ns on the series' clock, read at ps precision.
class SeriesIntegral {
 public:
  explicit SeriesIntegral(const trace::CounterSeries& series);
  // The increase (cumulative) or integral (gauge, value x ps) over [begin_ps, end_ps), times
  // in ps since `origin_ns()`; `covered_ps` gets the part inside the series' span.
  double Over(int64_t begin_ps, int64_t end_ps, int64_t* covered_ps) const;
  // The same, for intervals asked in increasing order: `*cursor` (start it at 0) remembers
  // where the last one was found, so a sweep over a timeline costs no search.
  double Over(int64_t begin_ps, int64_t end_ps, int64_t* covered_ps, size_t* cursor) const;
  int64_t origin_ns() const { return origin_ns_; }
  bool empty() const { return t_ps_.size() < 2; }

 private:
  // The cumulative value (or the gauge's integral since the first sample) at `t_ps`, inside
  // the span, given the index of the sample at or before it.
  double AtSample(size_t k, int64_t t_ps) const;
  // The index of the last sample at or before `t_ps` (inside the span), from `*cursor` on when
  // that is not past it.
  size_t Find(int64_t t_ps, size_t* cursor) const;

  trace::CounterKind kind_;
  int64_t origin_ns_ = 0;
  std::vector<int64_t> t_ps_;   // sample times since origin_ns_, increasing
  std::vector<double> value_;   // the samples
  std::vector<double> prefix_;  // gauge: integral from the first sample to sample i
};

// Every (chip, kernel, counter) with some execution inside the counter's span, for the kernel
// lines (XLA Ops, GPU streams) of `capture`. The series of `also` (sampled beside the capture:
// the agent's runtime metrics) count as if they followed the capture's own.
std::vector<KernelCounter> AttributeCounters(const trace::HostCapture& capture,
                                             const std::vector<trace::CounterSeries>& also = {});

// Every (chip, kernel, scope line, scope name) of `capture`: the scopes (LineKind::kScopes
// events) summed per kernel execution they fall in, by their midpoint, on their chip. Scopes
// outside every kernel are left out.
std::vector<trace::KernelScope> AttributeScopes(const trace::HostCapture& capture);

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_ATTRIBUTION_H_
