// What every TensorCore of the host is doing, from the runtime's GetTpuRuntimeStatus: the
// step (run id) it executes, the HLO instruction it is in or that it waits between kernels, the
// programs queued behind it, and any error. A snapshot carries it as one line of its host's
// warnings, so that a hang's snapshot says where each core stood even when no kernel ran in its
// window (the chips idle, or one kernel that never ends).
#ifndef PODPROF_AGENT_RUNTIME_STATUS_H_
#define PODPROF_AGENT_RUNTIME_STATUS_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "proto/tpu_metric_service.grpc.pb.h"

namespace podprof::agent {

// One line: "runtime status: core 0 (chip 0) step 1234 in fusion.12, 1 queued; core 1 ...".
// Asks with include_hlo_info (one call, at most `deadline_ns`); an error names the service's
// failure. At most `max_cores` cores are described, then how many more there are.
absl::StatusOr<std::string> DescribeRuntimeStatus(
    tpu::monitoring::runtime::RuntimeMetricService::StubInterface& stub, Clock& clock,
    int64_t deadline_ns = 300'000'000, int max_cores = 16);

// The same line from a response already read. Exposed for tests.
std::string DescribeRuntimeStatus(
    const tpu::monitoring::runtime::GetTpuRuntimeStatusResponse& status, int max_cores = 16);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_RUNTIME_STATUS_H_
