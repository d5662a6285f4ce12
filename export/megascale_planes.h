// What the XSpace export adds for a capture with host-transfer (DCN) ops, so that XProf's
// `megascale_stats` reads the exported host as it reads the original (docs/MEGASCALE.md
// 1.2-1.3, docs/INTEROP.md "XProf session export"): the program of those ops on
// `/host:metadata` (an `Hlo Proto` built from the stored kernels' HLO texts, and `program_id`),
// a `MegaScale:` event metadata on `/host:CPU` (XProf's gate), and, on the sends' metadata,
// the group XProf sizes the transfer by. A capture without host-transfer ops gets none of it.
// Part of export/xspace_export.cc; pure functions.
#ifndef PODPROF_EXPORT_MEGASCALE_PLANES_H_
#define PODPROF_EXPORT_MEGASCALE_PLANES_H_

#include <cstdint>
#include <string>

#include "proto/xplane.pb.h"
#include "trace/model.h"

namespace podprof::exporter {

// True for a kernel whose `hlo_category` is `host send`, `host send-done`, `host recv` or
// `host recv-done`.
bool IsHostTransferKernel(const trace::KernelDef& k);
bool HasHostTransferKernels(const trace::HostCapture& capture);

// The `dcn_collective_info` (a tensorflow.profiler.DcnCollectiveInfoProto) of a host-transfer
// send whose text says ONE_TO_ONE and lists its source-target pairs: that transfer type and a
// one_to_one_groups entry per pair. The entries' endpoints (slice, device within the slice)
// are left unset: the store does not keep the original stat, and a pod-wide chip id does not
// say its slice. XProf reads only whether there are groups (a group of 1 for ONE_TO_ONE, the
// factor of the bytes it reports). "" for any other kernel: XProf then reports 0 bytes, as it
// does for the original when the stat is absent.
std::string DcnCollectiveInfoOf(const trace::KernelDef& k);

// `/host:CPU` (plane id `id`) with one event metadata, `MegaScale: Communication Transport
// Send`, used by no event: what makes XProf take the host as one with DCN data.
void WriteMegaScaleHostPlane(int64_t id, tensorflow::profiler::XPlane* plane);

// `/host:metadata` (plane id `id`): per program (module, program id) of the capture's
// host-transfer kernels, an event metadata named after the module with stats `Hlo Proto`
// (trace/hlo_host_transfer.h: the instructions as their stored texts give them; a kernel
// without text, or whose text cannot be read, is left out) and `program_id` (when known).
// Kernels without a module are left out: XProf finds an op's instruction by its module's
// name. False (the plane left empty) when no program could be written.
bool WriteHostMetadataPlane(const trace::HostCapture& capture, int64_t id,
                            tensorflow::profiler::XPlane* plane);

}  // namespace podprof::exporter

#endif  // PODPROF_EXPORT_MEGASCALE_PLANES_H_
