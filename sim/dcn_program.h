// What a multi-slice training step's DCN transfers look like to the profiler: the host-transfer
// kernels (docs/MEGASCALE.md, "podprof's multi-slice layout"), their HLO as text (the `XLA Ops`
// metadata name) and as the program's HloProto (the `/host:metadata` plane), and the send's
// `dcn_collective_info` stat. The pod model places the kernels in the step and times them; the
// XSpace writer writes these. All functions are pure.
#ifndef PODPROF_SIM_DCN_PROGRAM_H_
#define PODPROF_SIM_DCN_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sim/pod_model.h"

namespace podprof::sim {

// Elements of the bf16 gradient bucket one rendezvous moves per chip (1 MiB).
inline constexpr int64_t kDcnElements = 524'288;
inline constexpr int64_t kDcnBytes = kDcnElements * 2;
// The first rendezvous' channel id (and instruction number); the next ones follow.
inline constexpr int64_t kFirstDcnChannel = 101;

// The four ops of each of the kDcnRendezvous rendezvous, in step order (send, recv, send-done,
// recv-done of "dcn_grads.0", then of "dcn_grads.1"), for a pod of `total_chips` chips of which
// `chips_per_slice` in each slice: the ring's source-target pairs name every chip.
std::vector<OpTemplate> DcnOps(int64_t total_chips, int64_t chips_per_slice);

// The `_xla_send_recv_source_target_pairs` value of the ring: "{{0,16},{16,32},...}".
std::string DcnSourceTargetPairs(int64_t total_chips, int64_t chips_per_slice);

// The serialized xla.HloProto of module `module_name` holding the DCN ops of `ops` (other
// kernels are skipped), built from their HLO texts as the XProf exporter builds a stored
// capture's (trace/hlo_host_transfer.h), with their tf_op as op name: as the profiler stores a
// program on `/host:metadata`. XLA rebuilds a module from it (HloModule::CreateFromProto): the
// entry computation returns the last rendezvous' data.
std::string DcnHloProto(const std::string& module_name, int64_t module_id,
                        const std::vector<OpTemplate>& ops);

// The serialized tensorflow.profiler.DcnCollectiveInfoProto of the ring (transfer type
// ONE_TO_ONE, one group per pair, endpoints {slice_id, device_id within the slice}), the
// `dcn_collective_info` stat of a send's metadata.
std::string DcnCollectiveInfo(int64_t total_chips, int64_t chips_per_slice);

}  // namespace podprof::sim

#endif  // PODPROF_SIM_DCN_PROGRAM_H_
