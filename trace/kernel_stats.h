// Kernel statistics: per (chip, kernel) duration statistics over a capture's kernel lines,
// their roll-up across chips, and the achieved rates against the chip's peaks.
#ifndef PODPROF_TRACE_KERNEL_STATS_H_
#define PODPROF_TRACE_KERNEL_STATS_H_

#include <cstdint>
#include <vector>

#include "trace/ddsketch.h"
#include "trace/model.h"

namespace podprof::trace {

struct KernelStats {
  // Index into Host::chips, or kAllChips for a roll-up across chips.
  static constexpr int kAllChips = -1;
  int chip = kAllChips;
  // Index into HostCapture::kernels.
  uint32_t kernel = 0;
  int64_t count = 0;
  // Sum, minimum and maximum of the executions' durations, ps.
  int64_t total_ps = 0;
  int64_t min_ps = 0;
  int64_t max_ps = 0;
  DDSketch sketch;

  double mean_ps() const { return count == 0 ? 0 : static_cast<double>(total_ps) / count; }
  // The q-quantile of durations, ps, from the sketch (within DDSketch::kRelativeError), kept
  // inside [min_ps, max_ps].
  int64_t QuantilePs(double q) const;
  // Adds one execution.
  void Add(int64_t duration_ps);
  // Adds another set of executions of the same kernel.
  void Merge(const KernelStats& other);
};

// What a kernel achieved: FLOP/s and HBM bandwidth over its total time, and their fraction of
// the chip's peaks (0 when the peak or the static cost is unknown).
struct KernelRates {
  double achieved_tflops = 0;
  double achieved_hbm_gbps = 0;
  double fraction_of_peak_flops = 0;
  double fraction_of_peak_hbm = 0;
};

KernelRates ComputeRates(const KernelStats& stats, const KernelDef& def, double peak_tflops,
                         double peak_hbm_gbps);

// Orders statistics by total time, longest first (ties by chip, then kernel index).
void SortByTotal(std::vector<KernelStats>* stats);

// Statistics per (chip, kernel) over the capture's kernel lines (`XLA Ops`, GPU streams),
// ordered by SortByTotal.
std::vector<KernelStats> ComputeKernelStats(const HostCapture& capture);

// Merges per-chip statistics into one entry per kernel (chip = kAllChips), same order rule.
std::vector<KernelStats> RollUpByKernel(const std::vector<KernelStats>& per_chip);

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_KERNEL_STATS_H_
