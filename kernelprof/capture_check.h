// What a host's capture holds against what its request asked for. A workload's profiler takes
// the options it cannot honour without a word (a tracer it lacks, counters its chips cannot
// sample, a set its runtime does not know): the capture simply comes back without them. The
// agent checks each host's capture against the request once it has read it, and says what is
// missing as host warnings, each naming the host ("host-0: asked for TC_MEMORY counters; the
// capture holds none"), so that an absence is never mistaken for a measurement of zero.
//
// What is checked, each only when asked for:
//   device tracing   device_tracer_level set to 1: some TPU or GPU plane, with some event
//   host tracing     host_tracer_level 1-3: some event on the host's threads (trace/host_planes.h)
//   Python tracing   python_tracer_level 1: some Python event (trace/host_planes.h)
//   kernel profiling some performance counter series (trace/perf_counters.h); when there are
//                    none, why: a chip before TPU7x, or the workload sent none
//   counter sets     some series of a component the set covers (CounterSetComponents): XProf
//                    does not list the sets' counters, so a set is present when its component is
//   --counters       each index asked, on some chip and die (trace::ComponentCounterId)
// Pure functions: thread-safe.
#ifndef PODPROF_KERNELPROF_CAPTURE_CHECK_H_
#define PODPROF_KERNELPROF_CAPTURE_CHECK_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/podprof_types.pb.h"
#include "trace/host_planes.h"
#include "trace/model.h"

namespace podprof::kernelprof {

// What one host's capture holds, as far as a request can be checked against it.
struct CaptureHolds {
  // The capture's chips (trace::Host::chips): their kinds and generations.
  std::vector<trace::Chip> chips;
  // Timeline events read from TPU and GPU planes (the CPU device's, from host threads, aside).
  int64_t device_events = 0;
  // The performance counter series' names (trace::IsPerfSeries), by index into `chips`.
  std::map<int, std::set<std::string>> perf_series;
  // The host planes; nullopt when they were not looked at, and then neither host nor Python
  // tracing is checked.
  std::optional<trace::HostPlanes> host_planes;
};

// One warning per thing `asked` asks for that `holds` lacks, each starting "<host>: asked for";
// empty when the capture holds all of it. Without performance counter series at all, one
// warning says so and why, rather than one per set and component.
std::vector<std::string> MissingFromCapture(absl::string_view host, const v1::CaptureOptions& asked,
                                            const CaptureHolds& holds);

}  // namespace podprof::kernelprof

#endif  // PODPROF_KERNELPROF_CAPTURE_CHECK_H_
