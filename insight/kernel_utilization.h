// Each kernel execution's hardware-counter figures, as XProf's per-kernel tool
// (`kernel_utilization` in xprof's raw_to_tool_data) lists them: per chip and execution, MXU
// utilisation, the MXU cycles by precision, and the Utilization Viewer's rows pooled over the
// chip's TensorCores (insight/kernel_profile.h). podprof's figures are the measured ones; where
// XProf's differ by design (a die that was not sampled, counted idle at nominal cycles) the
// execution carries XProf's too, and why (docs/INTEROP.md, "XProf's per-kernel tool").
#ifndef PODPROF_INSIGHT_KERNEL_UTILIZATION_H_
#define PODPROF_INSIGHT_KERNEL_UTILIZATION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "insight/kernel_profile.h"
#include "trace/model.h"

namespace podprof::insight {

// The fields of one `kernel_utilization` entry, from pooled rows, in percent.
struct XprofFigures {
  // Avg MXU Busy: cycles with one MXU busy count half.
  double mxu_utilization = 0;
  bool has_mxu = false;
  // The MXU cycles by precision ("BF16", "FP8", "Int8", "Int4"), shares of their sum; empty
  // when the MXUs counted none.
  std::map<std::string, double> mxu_cycles_breakdown;
  // Every other row by XProf's name (HBM Rd+Wr is "HBM Bandwidth Utilization").
  std::map<std::string, double> other_metrics;
};
XprofFigures XprofFiguresOf(const std::vector<UtilizationRow>& pooled_rows);

struct ExecutionUtilization {
  int chip = 0;         // index into Host::chips
  uint32_t kernel = 0;  // index into HostCapture::kernels
  int64_t begin_ns = 0;
  int64_t duration_ps = 0;
  // The measured figures: the dies that were sampled, pooled as XProf pools them.
  KernelProfile profile;
  // XProf's figures where they differ by design, and why; `xprof_differs` empty otherwise.
  std::vector<UtilizationRow> xprof_rows;
  std::string xprof_differs;
};

// Every execution on a kernel line of `capture` that some performance counter counted over
// (a `counters_<kernel>` line given to it, or periodic samples spanning it), in chip, then
// time order. Its counts are each perf series' increase across the execution
// (insight/attribution.h).
std::vector<ExecutionUtilization> ExecutionUtilizations(const trace::HostCapture& capture);

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_KERNEL_UTILIZATION_H_
