#include "insight/host_insight.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <utility>

#include "insight/attribution.h"
#include "insight/collectives.h"
#include "insight/verdict.h"
#include "trace/chip_catalog.h"
#include "trace/perf_counters.h"
#include "trace/xspace_schema.h"

namespace podprof::insight {

namespace {

constexpr int kAll = trace::KernelStats::kAllChips;

// What the host's counters, scopes and collectives attribute to each (chip, kernel), the chip
// kAll for the host's sum.
struct Attributed {
  // Gauge integrals and covered time per (chip, kernel, counter).
  std::map<std::tuple<int, uint32_t, std::string>, std::pair<double, int64_t>> gauges;
  // Performance counters' increases (kernel profiling), with the time they covered.
  std::map<std::tuple<int, uint32_t, std::string>, std::pair<double, int64_t>> perf;
  std::map<std::pair<int, uint32_t>, int64_t> sync_wait;
  std::map<std::pair<int, uint32_t>, Wait> waits;
};

Attributed Attribute(const trace::HostCapture& c, std::vector<std::string>* warnings) {
  Attributed a;
  for (const KernelCounter& k : AttributeCounters(c)) {
    const bool is_perf = trace::IsPerfSeries(k.counter);
    if (k.kind != trace::CounterKind::kGauge && !is_perf) continue;
    for (int chip : {k.chip, kAll}) {
      auto& g = (is_perf ? a.perf : a.gauges)[{chip, k.kernel, k.counter}];
      g.first += k.integral;
      g.second += k.covered_ps;
    }
  }
  for (const trace::KernelScope& s : AttributeScopes(c)) {
    if (s.line != trace::xspace::kSyncFlagLine || s.name != trace::xspace::kSyncWaitEvent) {
      continue;
    }
    a.sync_wait[{s.chip, s.kernel}] += s.total_ps;
    a.sync_wait[{kAll, s.kernel}] += s.total_ps;
  }
  std::vector<int64_t> chips(c.host.chips.size()), kernels(c.kernels.size());
  std::iota(chips.begin(), chips.end(), 0);
  std::iota(kernels.begin(), kernels.end(), 0);
  CollectiveNames names;
  const CollectiveReport report =
      AnalyzeCollectives(CollectiveRuns(c, 0, chips, kernels, &names), names);
  if (warnings != nullptr && report.left_out > 0) {
    warnings->push_back(LeftOutWarning(report.left_out, report.left_out_example));
  }
  for (const auto& [key, w] : report.waits) {
    const uint32_t kernel = static_cast<uint32_t>(key.second);
    for (int chip : {static_cast<int>(key.first), kAll}) {
      Wait& sum = a.waits[{chip, kernel}];
      sum.wait_ps += w.wait_ps;
      sum.instances += w.instances;
      if (w.straggler_times > sum.straggler_times) {
        sum.straggler = w.straggler;
        sum.straggler_times = w.straggler_times;
      }
    }
  }
  return a;
}

// The facts of one statistics row (a chip's, or the host's roll-up), from what was attributed.
KernelFacts FactsOf(const trace::HostCapture& c, const trace::KernelStats& s, const Attributed& a) {
  const trace::KernelDef& k = c.kernels[s.kernel];
  KernelFacts f;
  f.category = k.category;
  f.flops = k.flops;
  f.bytes_accessed = k.bytes_accessed;
  f.count = s.count;
  f.total_ps = s.total_ps;
  // A chip's peaks, or their mean over the host's chips for a roll-up.
  int n = 0;
  for (size_t i = 0; i < c.host.chips.size(); ++i) {
    if (s.chip != kAll && static_cast<int>(i) != s.chip) continue;
    f.peak_tflops += c.host.chips[i].peak_tflops;
    f.peak_hbm_gbps += c.host.chips[i].peak_hbm_gbps;
    ++n;
  }
  if (n > 0) {
    f.peak_tflops /= n;
    f.peak_hbm_gbps /= n;
  }
  const auto mine = [&](const auto& key) {
    return std::get<0>(key) == s.chip && std::get<1>(key) == s.kernel;
  };
  for (auto it = a.gauges.lower_bound({s.chip, s.kernel, ""});
       it != a.gauges.end() && mine(it->first); ++it) {
    if (std::optional<double> mean = GaugeMean(it->second.first, it->second.second)) {
      f.gauges[std::get<2>(it->first)] = *mean;
    }
  }
  for (auto it = a.perf.lower_bound({s.chip, s.kernel, ""}); it != a.perf.end() && mine(it->first);
       ++it) {
    f.totals[std::get<2>(it->first)] = it->second.first;
    f.covered_ps = std::max(f.covered_ps, it->second.second);
  }
  const size_t gen_chip = s.chip == kAll ? 0 : static_cast<size_t>(s.chip);
  if (gen_chip < c.host.chips.size()) {
    f.generation = trace::FindGenerationByName(c.host.chips[gen_chip].generation);
  }
  auto sw = a.sync_wait.find({s.chip, s.kernel});
  if (sw != a.sync_wait.end()) f.sync_wait_ps = sw->second;
  auto w = a.waits.find({s.chip, s.kernel});
  if (w != a.waits.end()) {
    f.wait_ps = w->second.wait_ps;
    f.straggler = w->second.straggler;
    f.collective = true;
  }
  return f;
}

}  // namespace

std::vector<KernelFacts> HostFacts(const trace::HostCapture& c,
                                   const std::vector<trace::KernelStats>& stats,
                                   std::vector<std::string>* warnings) {
  const Attributed attributed = Attribute(c, warnings);
  std::vector<KernelFacts> out;
  out.reserve(stats.size());
  for (const trace::KernelStats& s : stats) out.push_back(FactsOf(c, s, attributed));
  return out;
}

}  // namespace podprof::insight
