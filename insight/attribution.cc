#include "insight/attribution.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "trace/megascale_trace.h"

namespace podprof::insight {

SeriesIntegral::SeriesIntegral(const trace::CounterSeries& series) : kind_(series.kind()) {
  const size_t n = std::min(series.time_ns.size(), series.value.size());
  if (n == 0) return;
  origin_ns_ = series.time_ns[0];
  for (size_t i = 0; i < n; ++i) {
    const int64_t t = (series.time_ns[i] - origin_ns_) * 1000;
    // Samples out of order or at the same instant add nothing to a span: keep the later one.
    if (!t_ps_.empty() && t <= t_ps_.back()) {
      if (t == t_ps_.back()) value_.back() = series.value[i];
      continue;
    }
    t_ps_.push_back(t);
    value_.push_back(series.value[i]);
  }
  if (kind_ == trace::CounterKind::kGauge) {
    prefix_.assign(t_ps_.size(), 0);
    for (size_t i = 1; i < t_ps_.size(); ++i) {
      prefix_[i] = prefix_[i - 1] + value_[i - 1] * static_cast<double>(t_ps_[i] - t_ps_[i - 1]);
    }
  }
}

size_t SeriesIntegral::Find(int64_t t_ps, size_t* cursor) const {
  size_t k = *cursor;
  if (k >= t_ps_.size() || t_ps_[k] > t_ps) {
    k = static_cast<size_t>(std::upper_bound(t_ps_.begin(), t_ps_.end(), t_ps) - t_ps_.begin());
    k = k == 0 ? 0 : k - 1;
  } else {
    while (k + 1 < t_ps_.size() && t_ps_[k + 1] <= t_ps) ++k;
  }
  *cursor = k;
  // The last sample's value is only an end point: read the segment before it.
  return std::min(k, t_ps_.size() - 2);
}

double SeriesIntegral::AtSample(size_t k, int64_t t_ps) const {
  const double dt = static_cast<double>(t_ps - t_ps_[k]);
  if (kind_ == trace::CounterKind::kGauge) return prefix_[k] + value_[k] * dt;
  const double slope = (value_[k + 1] - value_[k]) / static_cast<double>(t_ps_[k + 1] - t_ps_[k]);
  return value_[k] + slope * dt;
}

double SeriesIntegral::Over(int64_t begin_ps, int64_t end_ps, int64_t* covered_ps) const {
  size_t cursor = t_ps_.size();
  return Over(begin_ps, end_ps, covered_ps, &cursor);
}

double SeriesIntegral::Over(int64_t begin_ps, int64_t end_ps, int64_t* covered_ps,
                            size_t* cursor) const {
  *covered_ps = 0;
  if (empty()) return 0;
  const int64_t a = std::max(begin_ps, t_ps_.front());
  const int64_t b = std::min(end_ps, t_ps_.back());
  if (b <= a) return 0;
  *covered_ps = b - a;
  const double at_a = AtSample(Find(a, cursor), a);
  size_t end_cursor = *cursor;
  const double at_b = AtSample(Find(b, &end_cursor), b);
  return at_b - at_a;
}

std::vector<KernelCounter> AttributeCounters(const trace::HostCapture& capture,
                                             const std::vector<trace::CounterSeries>& also) {
  // Per execution only a slot in a table indexed by kernel; the (chip, kernel, counter) map is
  // touched once per kernel and series. Two series of one name on a chip (a counter split
  // across lines) add up there.
  struct Sum {
    double integral = 0;
    int64_t covered_ps = 0;
    int64_t executions = 0;
  };
  std::vector<Sum> sums(capture.kernels.size());
  std::vector<uint32_t> touched;
  std::map<std::tuple<int, uint32_t, std::string>, KernelCounter> merged;
  auto attribute = [&](const trace::CounterSeries& series) {
    // What the Megascale runtime measured of each transfer (trace/megascale_trace.h) is a
    // figure per arrival, not a level the kernels ran under: the DCN analysis reads it.
    if (absl::StartsWith(series.name, trace::kMegascaleSeriesPrefix)) return;
    const SeriesIntegral integral(series);
    if (integral.empty()) return;
    for (const trace::EventBlock& b : capture.blocks) {
      if (b.chip != series.chip || !trace::IsKernelLine(b.kind)) continue;
      const int64_t base_ps = (b.base_ns - integral.origin_ns()) * 1000;
      size_t cursor = 0;  // kernels come in time order: sweep the samples alongside
      for (size_t i = 0; i < b.size(); ++i) {
        const int64_t begin = base_ps + b.start_ps[i];
        int64_t covered = 0;
        const double v = integral.Over(begin, begin + b.duration_ps[i], &covered, &cursor);
        if (covered <= 0) continue;
        if (b.kernel[i] >= sums.size()) sums.resize(b.kernel[i] + size_t{1});
        Sum& sum = sums[b.kernel[i]];
        if (sum.executions == 0) touched.push_back(b.kernel[i]);
        sum.integral += v;
        sum.covered_ps += covered;
        ++sum.executions;
      }
    }
    for (uint32_t kernel : touched) {
      Sum& sum = sums[kernel];
      KernelCounter& k = merged[{series.chip, kernel, series.name}];
      if (k.executions == 0) {
        k.chip = series.chip;
        k.kernel = kernel;
        k.counter = series.name;
        k.kind = series.kind();
      }
      k.integral += sum.integral;
      k.covered_ps += sum.covered_ps;
      k.executions += sum.executions;
      sum = Sum();
    }
    touched.clear();
  };
  for (const trace::CounterSeries& series : capture.counters) attribute(series);
  for (const trace::CounterSeries& series : also) attribute(series);
  std::vector<KernelCounter> out;
  out.reserve(merged.size());
  for (auto& [key, k] : merged) out.push_back(std::move(k));
  return out;
}

namespace {

// A chip's kernel executions in time order, ps since a common origin.
struct Execution {
  int64_t begin_ps, end_ps;
  uint32_t kernel;
};

std::vector<Execution> ChipExecutions(const trace::HostCapture& capture, int chip,
                                      int64_t origin_ns) {
  std::vector<Execution> runs;
  for (const trace::EventBlock& b : capture.blocks) {
    if (b.chip != chip || !trace::IsKernelLine(b.kind)) continue;
    const int64_t base_ps = (b.base_ns - origin_ns) * 1000;
    for (size_t i = 0; i < b.size(); ++i) {
      const int64_t begin = base_ps + b.start_ps[i];
      runs.push_back({begin, begin + b.duration_ps[i], b.kernel[i]});
    }
  }
  std::sort(runs.begin(), runs.end(),
            [](const Execution& a, const Execution& b) { return a.begin_ps < b.begin_ps; });
  return runs;
}

}  // namespace

std::vector<trace::KernelScope> AttributeScopes(const trace::HostCapture& capture) {
  std::map<std::tuple<int, uint32_t, std::string, uint32_t>, trace::KernelScope> merged;
  for (size_t chip = 0; chip < capture.host.chips.size(); ++chip) {
    const int c = static_cast<int>(chip);
    bool any = false;
    int64_t origin_ns = 0;
    for (const trace::EventBlock& b : capture.blocks) {
      if (b.chip != c || b.kind != trace::LineKind::kScopes || b.size() == 0) continue;
      origin_ns = any ? std::min(origin_ns, b.base_ns) : b.base_ns;
      any = true;
    }
    if (!any) continue;
    const std::vector<Execution> runs = ChipExecutions(capture, c, origin_ns);
    if (runs.empty()) continue;
    for (const trace::EventBlock& b : capture.blocks) {
      if (b.chip != c || b.kind != trace::LineKind::kScopes) continue;
      const int64_t base_ps = (b.base_ns - origin_ns) * 1000;
      for (size_t i = 0; i < b.size(); ++i) {
        const int64_t mid = base_ps + b.start_ps[i] + b.duration_ps[i] / 2;
        auto it = std::upper_bound(runs.begin(), runs.end(), mid,
                                   [](int64_t t, const Execution& e) { return t < e.begin_ps; });
        if (it == runs.begin()) continue;
        --it;
        if (mid >= it->end_ps) continue;
        trace::KernelScope& s = merged[{c, it->kernel, b.line, b.kernel[i]}];
        if (s.count == 0) {
          s.chip = c;
          s.kernel = it->kernel;
          s.line = b.line;
          s.scope_kernel = b.kernel[i];
          s.name = b.kernel[i] < capture.kernels.size() ? capture.kernels[b.kernel[i]].name : "";
        }
        ++s.count;
        s.total_ps += b.duration_ps[i];
      }
    }
  }
  std::vector<trace::KernelScope> out;
  out.reserve(merged.size());
  for (auto& [key, s] : merged) out.push_back(std::move(s));
  return out;
}

}  // namespace podprof::insight
