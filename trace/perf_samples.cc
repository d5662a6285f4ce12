#include "trace/perf_samples.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "trace/chip_catalog.h"
#include "trace/perf_counters.h"

namespace podprof::trace {
namespace {

// A cycle counter counts at most the clock's rate over the time it covers; this much over it
// (a clock running above nominal, timestamps rounded to ns) still fits.
constexpr double kClockSlack = 1.05;
constexpr double kSlackCycles = 4;
// 2^53: past it a double no longer holds every integer.
constexpr double kMostExactCount = 9007199254740992.0;

// True for the counters that count the TensorCore's cycles: the TC block's COUNT_CYCLES and
// v7x's power manager's CYCLE_COUNT, on any die.
bool IsCycleCounter(absl::string_view generation, uint64_t id) {
  std::optional<absl::string_view> name = PerfCounterName(generation, id);
  if (!name) return false;
  return absl::EndsWith(*name,
                        "TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_UNPRIVILEGED_COUNT_CYCLES") ||
         absl::EndsWith(*name,
                        "PWRMGR_PWRMGR_TC_THROTTLE_CORE_DEBUG_STATS_UNPRIVILEGED_CYCLE_COUNT");
}

// Whether `cycles` could have been counted in `ns` at the generation's clock.
bool FitsIn(double cycles, double ns, double clock_hz) {
  return cycles <= ns * 1e-9 * clock_hz * kClockSlack + kSlackCycles;
}

// Puts a series' samples in time order; false when they already were. Stable: samples of one
// instant keep the order they were written in.
bool SortByTime(std::vector<int64_t>* time_ns, std::vector<double>* value) {
  if (std::is_sorted(time_ns->begin(), time_ns->end())) return false;
  std::vector<size_t> order(time_ns->size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return (*time_ns)[a] < (*time_ns)[b]; });
  std::vector<int64_t> t(order.size());
  std::vector<double> v(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    t[i] = (*time_ns)[order[i]];
    v[i] = (*value)[order[i]];
  }
  *time_ns = std::move(t);
  *value = std::move(v);
  return true;
}

}  // namespace

void AppendChipWarnings(int ordinal, absl::string_view generation, const ChipNotes& notes,
                        std::vector<std::string>* out) {
  if (notes.dropped_traces > 0) {
    out->push_back(absl::StrCat("chip ", ordinal, ": the profiler dropped ", notes.dropped_traces,
                                " trace events (dropped_traces)"));
  }
  if (notes.missing_values > 0) {
    out->push_back(absl::StrCat("chip ", ordinal, ": ", notes.missing_values,
                                " performance counter samples without a counter_value, dropped"));
  }
  if (notes.unordered_series > 0) {
    out->push_back(absl::StrCat("chip ", ordinal, ": ", notes.unordered_series,
                                " performance counter series had samples out of time order; "
                                "sorted by time"));
  }
  if (notes.cumulative_executions) {
    out->push_back(absl::StrCat(
        "chip ", ordinal,
        ": its counters_<kernel> lines hold running totals (a line counted more "
        "cycles than its execution's time allows); each execution is the increase over the "
        "line before, and the first, whose increase is unknown, is left out"));
  }
  if (notes.impossible_counts > 0) {
    out->push_back(absl::StrCat("chip ", ordinal, ": ", notes.impossible_counts,
                                " counts of one kernel execution past 2^53, more than a counter "
                                "can count (a damaged counter_value), left out"));
  }
  if (notes.counter_resets > 0) {
    out->push_back(absl::StrCat("chip ", ordinal, ": ", notes.counter_resets,
                                " running-total counters went down between executions (a reset); "
                                "read as no increase"));
  }
  if (!notes.unknown_ids.empty()) {
    out->push_back(absl::StrCat(
        "chip ", ordinal, ": ", notes.unknown_ids.size(), " performance counter ids not in ",
        generation.empty() ? std::string("any") : absl::StrCat("the ", generation),
        " counter table (e.g. ", *notes.unknown_ids.begin(), "), kept as ", kPerfSeriesPrefix,
        "id_<id>"));
  }
}

double ClampCounterValue(double v) {
  constexpr double kMax = 18446744073709551615.0;  // 2^64 - 1, rounded to 2^64 as a double
  if (!(v > 0)) return 0;                          // negative and NaN
  return v >= kMax ? kMax : v;
}

PerfSampleCollector::Series& PerfSampleCollector::SeriesOf(uint64_t id) {
  auto [it, fresh] = index_of_.try_emplace(id, series_.size());
  if (fresh) series_.push_back({id, {}, {}});
  return series_[it->second];
}

void PerfSampleCollector::Add(uint64_t id, int64_t time_ns, double value) {
  Series& s = SeriesOf(id);
  s.time_ns.push_back(time_ns);
  s.value.push_back(value);
  bytes_ += sizeof(int64_t) + sizeof(double);
}

void PerfSampleCollector::AddExecution(ExecutionCounts execution) {
  // A hash map's slot and control byte per count, and the record itself.
  bytes_ += sizeof(ExecutionCounts) + execution.kernel.size() +
            execution.counts.capacity() * (sizeof(std::pair<uint64_t, double>) + 1);
  executions_.push_back(std::move(execution));
}

absl::flat_hash_set<std::string> PerfSampleCollector::ExecutionKernels() const {
  absl::flat_hash_set<std::string> kernels;
  for (const ExecutionCounts& e : executions_) kernels.insert(e.kernel);
  return kernels;
}

namespace {

// How far apart an execution and a line's extent are, to be ordered: the gap between them
// (0 when they overlap or touch), then the most overlap, then how far apart their midpoints
// are (a line at one execution's end touches the next's start too).
std::tuple<int64_t, int64_t, int64_t> Distance(const std::pair<int64_t, int64_t>& run,
                                               const ExecutionCounts& e) {
  const int64_t gap = std::max<int64_t>({0, run.first - e.end_ns, e.begin_ns - run.second});
  const int64_t overlap =
      std::max<int64_t>(0, std::min(run.second, e.end_ns) - std::max(run.first, e.begin_ns));
  const int64_t mid = (run.first + run.second) / 2 - (e.begin_ns + e.end_ns) / 2;
  return {gap, -overlap, mid < 0 ? -mid : mid};
}

// The execution a line was counted over: inside the kernel's, at least a ns wide, so that
// attribution gives that execution all of it.
void PlaceOn(const std::pair<int64_t, int64_t>& run, ExecutionCounts* e) {
  e->begin_ns = run.first;
  e->end_ns = std::max(run.second, run.first + 1);
}

}  // namespace

void PerfSampleCollector::PlaceExecutions(
    const absl::flat_hash_map<std::string, std::vector<std::pair<int64_t, int64_t>>>& runs) {
  absl::flat_hash_map<std::string, std::vector<ExecutionCounts*>> lines;
  for (ExecutionCounts& e : executions_) lines[e.kernel].push_back(&e);
  for (auto& [kernel, of_kernel] : lines) {
    auto it = runs.find(kernel);
    if (it == runs.end() || it->second.empty()) continue;
    const std::vector<std::pair<int64_t, int64_t>>& r = it->second;
    // In the order the file lists them, as the profiler writes an execution's line: their
    // own times may cross (a line put before a long execution starts before the one ahead).
    if (of_kernel.size() == r.size()) {
      for (size_t i = 0; i < r.size(); ++i) PlaceOn(r[i], of_kernel[i]);
      continue;
    }
    for (ExecutionCounts* e : of_kernel) {
      const auto nearest = std::min_element(r.begin(), r.end(), [&](const auto& a, const auto& b) {
        return Distance(a, *e) < Distance(b, *e);
      });
      PlaceOn(*nearest, e);
    }
  }
}

namespace {

// Periodic samples are counts per sample, not running totals, when the chip's cycle counter
// says so: sampled at least three times, and every sample's cycles (scaled back) fit in the
// time since the one before. A running total grows past that by its third sample.
bool CountsPerSample(
    const std::vector<std::pair<const std::vector<int64_t>*, const std::vector<double>*>>&
        cycle_series,
    int scaling, double clock_hz) {
  if (cycle_series.empty() || clock_hz <= 0) return false;
  const double scale = std::ldexp(1.0, scaling);
  for (const auto& [t, v] : cycle_series) {
    if (t->size() < 3) return false;
    for (size_t i = 1; i < t->size(); ++i) {
      const double ns = static_cast<double>((*t)[i] - (*t)[i - 1]);
      if (!FitsIn((*v)[i] * scale, ns, clock_hz)) return false;
    }
  }
  return true;
}

}  // namespace

void PerfSampleCollector::Finish(int chip, absl::string_view generation, int scaling,
                                 std::vector<CounterSeries>* out, ChipNotes* notes) {
  std::vector<std::pair<const std::vector<int64_t>*, const std::vector<double>*>> cycles;
  for (Series& s : series_) {
    if (SortByTime(&s.time_ns, &s.value)) ++notes->unordered_series;
    if (IsCycleCounter(generation, s.id)) cycles.push_back({&s.time_ns, &s.value});
  }
  const ChipGeneration* g = FindGenerationByName(generation);
  const bool deltas = CountsPerSample(cycles, scaling, g != nullptr ? g->tc_clock_hz : 0);
  for (Series& s : series_) {
    if (deltas) {
      // Counts per sample: the running total is their sum.
      const double scale = std::ldexp(1.0, scaling);
      double total = 0;
      for (double& v : s.value) v = (total += v * scale);
    } else {
      // Unwrapping reads a decrease as a wrap: only in time order does that hold.
      UnwrapCounterSamples(scaling, s.value.data(), s.value.size());
    }
  }
  FinishExecutions(generation, notes);
  for (Series& s : series_) {
    if (!PerfCounterName(generation, s.id)) notes->unknown_ids.insert(s.id);
    CounterSeries series;
    series.chip = chip;
    series.name = PerfSeriesName(generation, s.id);
    series.time_ns = std::move(s.time_ns);
    series.value = std::move(s.value);
    out->push_back(std::move(series));
  }
  series_.clear();
  index_of_.clear();
  executions_.clear();
  bytes_ = 0;
}

void PerfSampleCollector::FinishExecutions(absl::string_view generation, ChipNotes* notes) {
  if (executions_.empty()) return;
  std::stable_sort(
      executions_.begin(), executions_.end(),
      [](const ExecutionCounts& a, const ExecutionCounts& b) { return a.begin_ns < b.begin_ns; });
  // Running totals when most lines counted more cycles than their execution's time allows:
  // one line's damaged count (a value past 2^64, clamped) is not a running total.
  const ChipGeneration* g = FindGenerationByName(generation);
  int judged = 0, too_many = 0;
  for (const ExecutionCounts& e : executions_) {
    if (g == nullptr || e.end_ns <= e.begin_ns) continue;
    bool has_cycles = false, fits = true;
    for (const auto& [id, value] : e.counts) {
      if (!IsCycleCounter(generation, id)) continue;
      has_cycles = true;
      fits = fits && FitsIn(value, static_cast<double>(e.end_ns - e.begin_ns), g->tc_clock_hz);
    }
    judged += has_cycles;
    too_many += has_cycles && !fits;
  }
  const bool cumulative = judged >= 2 && 2 * too_many > judged;
  notes->cumulative_executions = notes->cumulative_executions || cumulative;
  absl::flat_hash_map<uint64_t, double> last;  // running totals: each counter's last value
  absl::flat_hash_map<uint64_t, double> total;
  for (size_t k = 0; k < executions_.size(); ++k) {
    const ExecutionCounts& e = executions_[k];
    for (const auto& [id, value] : e.counts) {
      double count = value;
      if (cumulative) {
        auto [it, fresh] = last.try_emplace(id, value);
        if (fresh) continue;
        count = value - it->second;
        it->second = value;
        if (count < 0) {
          ++notes->counter_resets;
          count = 0;
        }
      }
      if (count > kMostExactCount) {
        ++notes->impossible_counts;
        continue;
      }
      // A step across the execution (at least a ns wide): the total before it, then after.
      // Lines given the same execution (PlaceExecutions) make one step of their sum.
      Series& s = SeriesOf(id);
      double& t = total[id];
      const size_t n = s.time_ns.size();
      if (n >= 2 && s.time_ns[n - 2] == e.begin_ns && s.time_ns[n - 1] == e.end_ns) {
        t += count;
        s.value.back() = t;
        continue;
      }
      const int64_t begin = s.time_ns.empty() ? e.begin_ns : std::max(e.begin_ns, s.time_ns.back());
      s.time_ns.push_back(begin);
      s.value.push_back(t);
      t += count;
      s.time_ns.push_back(std::max(e.end_ns, begin + 1));
      s.value.push_back(t);
    }
  }
}

}  // namespace podprof::trace
