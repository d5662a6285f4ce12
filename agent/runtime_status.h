// What every TensorCore of the host is doing, from the runtime's GetTpuRuntimeStatus: the
// step (run id) it executes, the HLO instruction it is in or that it waits between kernels, the
// programs queued behind it, and any error. A snapshot carries it as one line of its host's
// warnings, so that a hang's snapshot says where each core stood even when no kernel ran in its
// window (the chips idle, or one kernel that never ends).
#ifndef PODPROF_AGENT_RUNTIME_STATUS_H_
#define PODPROF_AGENT_RUNTIME_STATUS_H_

#include <string>

#include "proto/tpu_metric_service.grpc.pb.h"

namespace podprof::agent {

// One line: "runtime status: core 0 (chip 0) step 1234 in fusion.12, 1 queued; core 1 ...",
// from a GetTpuRuntimeStatus answer asked with include_hlo_info (RuntimeMetrics::RuntimeStatus).
// At most `max_cores` cores are described, then how many more there are.
std::string DescribeRuntimeStatus(
    const tpu::monitoring::runtime::GetTpuRuntimeStatusResponse& status, int max_cores = 16);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_RUNTIME_STATUS_H_
