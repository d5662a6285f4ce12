// The Megascale runtime's action graph as a simulated multi-slice host writes it: the plane
// `/device:CUSTOM:Megascale Trace`, laid out as docs/MEGASCALE.md ("The runtime's action graph")
// says and XProf's Megascale viewer reads it (section 1.7 there).
//
// One line per chip of the host, `Megascale device <raw id>` (raw id = slice x 100000 + the
// chip's index within its slice); per chip and DCN rendezvous instance (step K) three events,
// each with the stat `graph_key` = `device_<raw id>_gid_<rendezvous>$<program_id>^i<K>`:
//   * `device_<raw id>_gid_<rendezvous>_0`, the action graph, from the chip's send start to its
//     recv-done end: `input_size` (uint64 bytes), `transmission_budget_us` (uint64, 60) and
//     `delay_budget_us` (uint64, the kernel the chip overlaps with the transfer: the optimizer's
//     update in `dcn_grads.0`, 0 in `dcn_grads.1`);
//   * `NetworkSend END`, 1 us ending when the chip's buffer has left: `action_index` (int64 1),
//     `action_duration_ns` (uint64, the buffer's time to leave) and `is_last_instance` (int64 1);
//   * `NetworkReceive END`, 1 us ending when the data from the source chip (same index, previous
//     slice) arrived: `action_index` (int64 2), `network_transport_latency_us` (uint64, from the
//     source's buffer leaving to this arrival, PodModel::DcnTransitPs, the figure the
//     `megascale.dcn_transfer_latencies` metric counts), `buffer_sizes`
//     (`s<source raw id>-><raw id>d|$c0=<bytes>`) and `is_last_instance` (int64 1).
// Microsecond stats are rounded to the nearest us. Times as on the host's device planes (line
// timestamp 0, offsets from the profile start on the device's clock). An instance is written
// only when all three of its events lie inside the window.
#ifndef PODPROF_SIM_MEGASCALE_TRACE_H_
#define PODPROF_SIM_MEGASCALE_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/xplane.pb.h"
#include "sim/pod_model.h"
#include "sim/timebase.h"

namespace podprof::sim {

inline constexpr absl::string_view kMegascaleTracePlane = "/device:CUSTOM:Megascale Trace";
// The network time the simulated runtime allows a transfer, us: its 34-46 us network with room.
inline constexpr uint64_t kTransmissionBudgetUs = 60;

// The raw Megascale device id of pod-wide chip `global_chip` (slice x 100000 + its index in its
// slice).
int64_t MegascaleDeviceId(const PodModel& model, int64_t global_chip);

// Appends the plane, with plane id `plane_id`, to `space`, for this host's steps
// (`steps[i][chip]`, the steps the device planes were written from). Nothing with one slice.
void AddMegascaleTracePlane(const PodModel& model, const Timebase& time,
                            const std::vector<std::vector<ChipStep>>& steps, int64_t plane_id,
                            tensorflow::profiler::XSpace& space);

}  // namespace podprof::sim

#endif  // PODPROF_SIM_MEGASCALE_TRACE_H_
