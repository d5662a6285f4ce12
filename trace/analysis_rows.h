// The rows kernel insight (insight/) produces and the store (storage/) keeps: plain data that
// both use without either depending on the other (the store inserts rows it is handed; the
// analysis runs before the write, in the aggregator's ingest pipeline).
#ifndef PODPROF_TRACE_ANALYSIS_ROWS_H_
#define PODPROF_TRACE_ANALYSIS_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "trace/model.h"

namespace podprof::trace {

// One counter over all executions of one kernel on one chip.
struct KernelCounter {
  int chip = 0;         // index into HostCapture::host.chips
  uint32_t kernel = 0;  // index into HostCapture::kernels
  std::string counter;  // the series' name
  CounterKind kind = CounterKind::kGauge;
  // Cumulative: the total increase over the executions. Gauge: the integral of the level over
  // them, in value x ps (the mean is integral / covered_ps).
  double integral = 0;
  int64_t covered_ps = 0;  // execution time inside the series' span
  int64_t executions = 0;  // executions that overlapped the span
  // Cumulative: integral; gauge: the time-weighted mean.
  double Value() const {
    if (kind == CounterKind::kCumulative) return integral;
    return covered_ps > 0 ? integral / static_cast<double>(covered_ps) : 0;
  }
};

// The time one kernel on one chip spent in one named scope: a Pallas primitive, a source line,
// an LLO instruction, a sync wait (the scope lines of docs/INTEROP.md), summed over executions.
struct KernelScope {
  int chip = 0;         // index into HostCapture::host.chips
  uint32_t kernel = 0;  // index into HostCapture::kernels
  std::string line;     // the scope's line, e.g. "Pallas Primitives"
  std::string name;     // the scope's name, e.g. "dma_wait" or "kernel.py:42"
  // The capture's kernel index of the scope's own definition (its name's), for a summary that
  // travels: its receiver names the scope from the definition as it arrived.
  uint32_t scope_kernel = 0;
  int64_t count = 0;
  int64_t total_ps = 0;
};

// One chip as a straggler at a capture's collectives.
struct StragglerRow {
  std::string host;
  int chip_ordinal = 0;
  int64_t times_last = 0;      // instances where it arrived last
  int64_t instances = 0;       // instances it took part in
  int64_t caused_ps = 0;       // the others' waiting in the instances it was last in
  int64_t lateness_ps = 0;     // summed over those instances
  std::vector<int64_t> steps;  // steps of those instances (distinct, increasing; up to 64)
  // How often it would have been last by chance: the sum of 1/members over the instances it
  // took part in; negative when unknown (rows stored before it was kept).
  double expected_last = -1;
};

// One collective instance, for the worst-instances list.
struct InstanceRow {
  uint64_t id = 0;
  std::string kernel_name;
  int64_t step = -1;
  std::string straggler_host;
  int straggler_chip = 0;
  int chips = 0;
  int64_t spread_ps = 0;    // last arrival - first arrival: the longest wait
  int64_t lateness_ps = 0;  // last arrival - next-to-last
  int64_t caused_ps = 0;    // every chip's wait added up
};

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_ANALYSIS_ROWS_H_
