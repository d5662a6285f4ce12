// What a capture's host planes hold, looked at without keeping any of it: whether the host's
// threads recorded events (the host tracer's TraceMe events) and whether Python functions were
// traced (the Python tracer's events). The streaming reader skips these planes
// (trace/xspace_reader.h); this answers the one question a capture's request needs answered of
// them: did the tracers it asked for record anything (kernelprof/capture_check.h).
//
// The planes, as the profiler writes them: the host's threads on `/host:CPU`, a line per thread;
// the Python tracer's events on `/host:python-tracer`, which the profiler's post-processing
// usually merges into `/host:CPU` (onto the same threads' lines). A Python event is told by its
// name, which the tracer writes as "$" followed by "file.py:LINE function" (a Python function)
// or "module function" (a C function); TraceMe names do not start with "$". Pure functions:
// thread-safe.
#ifndef PODPROF_TRACE_HOST_PLANES_H_
#define PODPROF_TRACE_HOST_PLANES_H_

#include <string>

#include "absl/status/statusor.h"
#include "trace/byte_source.h"

namespace podprof::trace {

// The host planes of one capture.
struct HostPlanes {
  // The capture has a `/host:CPU` plane (with or without events).
  bool host_plane = false;
  // Some event on a host plane that is not a Python event.
  bool thread_events = false;
  // Some Python event, on `/host:CPU` or `/host:python-tracer`.
  bool python_events = false;
};

// Looks at the host planes of the XSpace in `source`, reading only their event names and as
// many events as it takes to find one of each kind (device planes are skipped by their length,
// unread). Damaged input fails with DataLoss "malformed XSpace at byte offset N: ..."; an
// empty source with InvalidArgument.
absl::StatusOr<HostPlanes> ReadHostPlanes(ByteSource& source);

// ReadHostPlanes of the file at `path`; errors start with the path.
absl::StatusOr<HostPlanes> ReadHostPlanesFile(const std::string& path);

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_HOST_PLANES_H_
