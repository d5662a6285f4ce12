// `podprof inspect --executions`: each kernel execution that performance counters counted
// over, with the figures XProf's per-kernel tool (kernel_utilization) shows, as a table for
// people and as JSON in that tool's own shape (devices, each with its kernel executions), so
// that a kernel author can set the two side by side.
#ifndef PODPROF_CLI_KERNEL_EXECUTIONS_H_
#define PODPROF_CLI_KERNEL_EXECUTIONS_H_

#include <ostream>
#include <vector>

#include "insight/kernel_utilization.h"
#include "nlohmann/json.hpp"
#include "report/table.h"
#include "trace/model.h"

namespace podprof::cli {

// {"host", "devices": [{"device_id", "device_type", "kernels": [{"kernel_name", "start_ns",
// "duration_us", "mxu_utilization", "mxu_cycles_breakdown", "other_metrics", "dies": [...],
// and where XProf shows other figures by design "xprof": {the same fields, "why"}}]}]}:
// percentages as numbers, unrounded; a figure without a counter behind it is left out.
nlohmann::json KernelExecutionsJson(const trace::HostCapture& capture,
                                    const std::vector<insight::ExecutionUtilization>& executions);

// One row per execution: chip, kernel, start, duration, MXU, HBM, VPU, the clocks skipped, and
// what XProf shows instead where it differs.
void WriteKernelExecutionsTable(const trace::HostCapture& capture,
                                const std::vector<insight::ExecutionUtilization>& executions,
                                const report::TableFit& fit, std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_KERNEL_EXECUTIONS_H_
