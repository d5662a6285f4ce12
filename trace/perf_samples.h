// The XSpace reader's part for kernel-profiling captures (docs/INTEROP.md, "Kernel profiling
// data"): a plane's sampled performance counters gathered into series, and what a chip's data
// lacked, said once per chip as capture warnings. Internal to trace/; the reader's own state,
// one object per plane or chip; not synchronised.
#ifndef PODPROF_TRACE_PERF_SAMPLES_H_
#define PODPROF_TRACE_PERF_SAMPLES_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "trace/model.h"

namespace podprof::trace {

// What one chip's planes lacked or lost, summed over its TPU plane and SparseCore planes.
struct ChipNotes {
  // Trace events the profiler dropped (`dropped_traces` of a plane or an event).
  int64_t dropped_traces = 0;
  // Samples carrying `performance_counter_id` but no `counter_value`: dropped.
  int64_t missing_values = 0;
  // Perf series whose samples came out of time order (sorted).
  int64_t unordered_series = 0;
  // `counters_<kernel>` lines read as running totals (PerfSampleCollector::Finish): the
  // chip's first one, whose increase is unknown, is then left out; and the decreases (a
  // reset) among them, read as 0.
  bool cumulative_executions = false;
  int64_t counter_resets = 0;
  // Counts of one execution past 2^53, the most a double holds exactly: no counter counts so
  // much in one kernel (52 days of cycles at 2 GHz), so the value is damage (an out-of-range
  // counter_value, clamped to 2^64 - 1). Left out, since adding it to the running total would
  // round away every later execution's counts.
  int64_t impossible_counts = 0;
  // Counter ids the generation's table lacks (kept as perf/id_<id>).
  std::set<uint64_t> unknown_ids;
};

// The warnings for chip `ordinal` of `generation` (empty when unknown), one per kind of note,
// appended to `out`; none for a chip without notes.
void AppendChipWarnings(int ordinal, absl::string_view generation, const ChipNotes& notes,
                        std::vector<std::string>* out);

// One kernel execution's counts: a `counters_<kernel>` line (docs/INTEROP.md).
struct ExecutionCounts {
  std::string kernel;
  // The line's events' extent, absolute ns: the execution they were counted over.
  int64_t begin_ns = 0, end_ns = 0;
  // Counter id -> value; the last event of an id wins, as XProf's tools read a line.
  absl::flat_hash_map<uint64_t, double> counts;
};

// Samples of one plane's performance counters, grouped by counter id whatever line they are on
// (XProf writes a line per sample, an event per counter), and the executions of
// `counters_<kernel>` lines.
class PerfSampleCollector {
 public:
  // One periodic sample of counter `id`: `time_ns` absolute (the line's start plus the
  // event's offset), `value` the raw `counter_value`.
  void Add(uint64_t id, int64_t time_ns, double value);
  void AddExecution(ExecutionCounts execution);
  bool empty() const { return series_.empty() && executions_.empty(); }
  // The kernels the `counters_<kernel>` lines name.
  absl::flat_hash_set<std::string> ExecutionKernels() const;
  // Gives each `counters_<kernel>` line to an execution of its kernel, by name, whatever the
  // line's own time (XProf's per-kernel tool reads a line so; captures put the line at the
  // execution's start, its end, or elsewhere): `runs` holds each kernel's executions on the
  // chip's kernel lines, absolute ns [begin, end) in time order. As many lines as executions
  // pair up, the lines in the file's order; otherwise a line goes to the execution it
  // overlaps most, else the nearest. A line whose
  // kernel has no execution keeps its own time. Call before Finish.
  void PlaceExecutions(
      const absl::flat_hash_map<std::string, std::vector<std::pair<int64_t, int64_t>>>& runs);
  // About what the samples and executions held take in memory.
  size_t bytes() const { return bytes_; }

  // The series for chip `chip` of `generation`, appended to `out` in first-seen order, named
  // by PerfSeriesName (ids the table lacks are noted), each a running total
  // (CounterKind::kCumulative) whatever the capture held:
  // - Periodic samples, sorted by time (counted in `notes` when they were not), are running
  //   totals, unwrapped with the capture's `scaling` (trace/perf_counters.h), unless the
  //   chip's cycle counter shows they are counts per sample (CountsPerSample): then they
  //   are summed.
  // - Each execution's counts become a step of the running total across the execution, so
  //   that attribution gives exactly those counts to it. They are taken as they are unless
  //   the cycle counter shows they are running totals (a line counting more cycles than its
  //   execution's time allows): then each is the increase over the chip's line before.
  // Leaves the collector empty.
  void Finish(int chip, absl::string_view generation, int scaling, std::vector<CounterSeries>* out,
              ChipNotes* notes);

 private:
  struct Series {
    uint64_t id;
    std::vector<int64_t> time_ns;
    std::vector<double> value;
  };
  Series& SeriesOf(uint64_t id);
  void FinishExecutions(absl::string_view generation, ChipNotes* notes);
  std::vector<Series> series_;
  absl::flat_hash_map<uint64_t, size_t> index_of_;  // counter id -> series_ index
  std::vector<ExecutionCounts> executions_;
  size_t bytes_ = 0;
};

// The value XProf's tools read from a `counter_value` stat: negative and NaN as 0, at or
// beyond 2^64 as 2^64 - 1 (as a double).
double ClampCounterValue(double v);

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_PERF_SAMPLES_H_
