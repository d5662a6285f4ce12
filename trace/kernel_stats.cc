#include "trace/kernel_stats.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "common/checked.h"

namespace podprof::trace {

int64_t KernelStats::QuantilePs(double q) const {
  if (count == 0) return 0;
  int64_t v = std::llround(sketch.Quantile(q));
  return std::clamp(v, min_ps, max_ps);
}

void KernelStats::Add(int64_t duration_ps) {
  if (count == 0) {
    min_ps = max_ps = duration_ps;
  } else {
    min_ps = std::min(min_ps, duration_ps);
    max_ps = std::max(max_ps, duration_ps);
  }
  ++count;
  total_ps += duration_ps;
  sketch.Add(static_cast<double>(duration_ps));
}

void KernelStats::Merge(const KernelStats& other) {
  if (other.count == 0) return;
  if (count == 0) {
    min_ps = other.min_ps;
    max_ps = other.max_ps;
  } else {
    min_ps = std::min(min_ps, other.min_ps);
    max_ps = std::max(max_ps, other.max_ps);
  }
  // Saturating: each side was checked on arrival, but a pod's or a history's sum of them may
  // still pass 2^63.
  count = SaturatingAdd(count, other.count);
  total_ps = SaturatingAdd(total_ps, other.total_ps);
  sketch.Merge(other.sketch);
}

KernelRates ComputeRates(const KernelStats& stats, const KernelDef& def, double peak_tflops,
                         double peak_hbm_gbps) {
  KernelRates r;
  // Async pairs (`copy-start`/`copy-done`, ...) move their bytes between the two ops: the start
  // only issues the work and the done only waits (from nanoseconds to the whole transfer), so
  // rates over either op's own time are meaningless (up to millions of percent of peak).
  if (stats.total_ps <= 0 || absl::EndsWith(def.category, "-start") ||
      absl::EndsWith(def.category, "-done")) {
    return r;
  }
  const double total_ps = static_cast<double>(stats.total_ps);
  // FLOP per ps is TFLOP/s; bytes per ps is TB/s, so x1000 for GB/s.
  r.achieved_tflops = static_cast<double>(def.flops) * stats.count / total_ps;
  r.achieved_hbm_gbps = static_cast<double>(def.bytes_accessed) * stats.count / total_ps * 1000.0;
  if (peak_tflops > 0) r.fraction_of_peak_flops = r.achieved_tflops / peak_tflops;
  if (peak_hbm_gbps > 0) r.fraction_of_peak_hbm = r.achieved_hbm_gbps / peak_hbm_gbps;
  // Over the peak is not a measurement (a wrong cost or peak): refused, 0 prints "-"; the
  // verdict says which inputs (insight::Decide).
  constexpr double kOver = 1 + 1e-9;
  if (r.fraction_of_peak_flops > kOver) r.fraction_of_peak_flops = 0;
  if (r.fraction_of_peak_hbm > kOver) r.fraction_of_peak_hbm = 0;
  return r;
}

void SortByTotal(std::vector<KernelStats>* stats) {
  std::sort(stats->begin(), stats->end(), [](const KernelStats& a, const KernelStats& b) {
    return std::make_tuple(-a.total_ps, a.chip, a.kernel) <
           std::make_tuple(-b.total_ps, b.chip, b.kernel);
  });
}

std::vector<KernelStats> ComputeKernelStats(const HostCapture& capture) {
  // One dense row per chip, indexed by kernel: the event loop does no hashing.
  std::vector<std::vector<KernelStats>> by_chip(capture.host.chips.size());
  for (const EventBlock& block : capture.blocks) {
    if (!IsKernelLine(block.kind)) continue;
    std::vector<KernelStats>& row = by_chip[block.chip];
    if (row.size() < capture.kernels.size()) row.resize(capture.kernels.size());
    for (size_t i = 0; i < block.size(); ++i) row[block.kernel[i]].Add(block.duration_ps[i]);
  }
  std::vector<KernelStats> out;
  for (size_t chip = 0; chip < by_chip.size(); ++chip) {
    for (size_t k = 0; k < by_chip[chip].size(); ++k) {
      KernelStats& s = by_chip[chip][k];
      if (s.count == 0) continue;
      s.chip = static_cast<int>(chip);
      s.kernel = static_cast<uint32_t>(k);
      out.push_back(std::move(s));
    }
  }
  SortByTotal(&out);
  return out;
}

std::vector<KernelStats> RollUpByKernel(const std::vector<KernelStats>& per_chip) {
  absl::flat_hash_map<uint32_t, size_t> index;
  std::vector<KernelStats> out;
  for (const KernelStats& s : per_chip) {
    auto [it, inserted] = index.try_emplace(s.kernel, out.size());
    if (inserted) {
      out.emplace_back();
      out.back().kernel = s.kernel;
    }
    out[it->second].Merge(s);
  }
  SortByTotal(&out);
  return out;
}

}  // namespace podprof::trace
