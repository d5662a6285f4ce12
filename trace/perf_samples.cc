#include "trace/perf_samples.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trace/perf_counters.h"

namespace podprof::trace {
namespace {

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
  if (!notes.unknown_ids.empty()) {
    out->push_back(absl::StrCat(
        "chip ", ordinal, ": ", notes.unknown_ids.size(), " performance counter ids not in ",
        generation.empty() ? std::string("any") : absl::StrCat("the ", generation),
        " counter table (e.g. ", *notes.unknown_ids.begin(), "), kept as ", kPerfSeriesPrefix,
        "id_<id>"));
  }
}

void PerfSampleCollector::Add(uint64_t id, int64_t time_ns, double value) {
  auto [it, fresh] = index_of_.try_emplace(id, series_.size());
  if (fresh) series_.push_back({id, {}, {}});
  Series& s = series_[it->second];
  s.time_ns.push_back(time_ns);
  s.value.push_back(value);
}

void PerfSampleCollector::Finish(int chip, absl::string_view generation, int scaling,
                                 std::vector<CounterSeries>* out, ChipNotes* notes) {
  for (Series& s : series_) {
    // Unwrapping reads a decrease as a wrap: only in time order does that hold.
    if (SortByTime(&s.time_ns, &s.value)) ++notes->unordered_series;
    UnwrapCounterSamples(scaling, s.value.data(), s.value.size());
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
}

}  // namespace podprof::trace
