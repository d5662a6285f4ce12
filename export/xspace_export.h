// A stored host capture written back as the profiler's XSpace, for XProf: one file per host
// in an XProf session directory (plugins/profile/<run>/<host>.xplane.pb), times on the
// aggregator's clock so that `xprof --logdir` shows every host of a pod in one session, aligned.
#ifndef PODPROF_EXPORT_XSPACE_EXPORT_H_
#define PODPROF_EXPORT_XSPACE_EXPORT_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

#include "proto/xplane.pb.h"
#include "trace/model.h"

namespace podprof::exporter {

// The capture as XProf's post-processed files lay it out: a `/device:TPU:N` (or GPU) plane
// per chip with its lines (one XLine per line name, events sorted and nested), event metadata
// carrying each kernel's name, category, flops, bytes, program id and source, the
// `all_reduce_unique_id` of collective events, counters as a `_counters_` line, sampled
// performance counters (perf/ series) as XProf's kernel-profiling captures hold them (a line
// per sample instant, an event per counter with `performance_counter_id` and `counter_value`,
// the plane's `global_chip_id`: what XProf's Perf Counters tool and Utilization Viewer read),
// and a `Task Environment` plane whose profile start and stop are the capture's window. Every
// line, counters included, starts at its first event relative to the profile start (as the
// profiler's post-processing leaves it; INTEROP.md says why not since the epoch) and lasts to
// its last event's end. A capture with host-transfer (DCN) ops also gets what XProf's
// `megascale_stats` reads of a host (export/megascale_planes.h): those ops' metadata named by
// their HLO text and shown by their instruction name, the sends' `dcn_collective_info`, a
// `/host:CPU` plane with a `MegaScale:` event metadata and a `/host:metadata` plane with their
// program's `Hlo Proto` and `program_id`, after the Task Environment plane.
tensorflow::profiler::XSpace ToXSpace(const trace::HostCapture& capture);

// The same XSpace written to `out` in its wire format a plane at a time, so that only one chip's
// XPlane (not the host's whole XSpace) is in memory beside the capture: each plane as an
// XSpace.planes record (field 1, length-delimited), then XSpace.hostnames (field 4). Parsed back
// it equals ToXSpace(capture) (protobuf concatenates repeated fields). False when `out` fails
// or a plane passes protobuf's 2 GiB message limit; what was written by then stays written.
bool WriteXSpace(const trace::HostCapture& capture, std::ostream* out);

// The number of bytes WriteXSpace(capture) writes (and ToXSpace(capture).ByteSizeLong()),
// building one plane at a time as it does: for a reader that needs a file's size before its
// bytes (a tar member's header).
uint64_t XSpaceByteSize(const trace::HostCapture& capture);

// The planes of ToXSpace(capture), in order, each built only when `visit` is called with it;
// `visit` may take the plane's contents (Swap). Stops early when `visit` returns false.
void ForEachXPlane(const trace::HostCapture& capture,
                   const std::function<bool(tensorflow::profiler::XPlane*)>& visit);

// The run directory name XProf expects, from ns since the Unix epoch: "2026_11_30_02_03_04".
std::string XprofRunName(int64_t start_ns);

}  // namespace podprof::exporter

#endif  // PODPROF_EXPORT_XSPACE_EXPORT_H_
