// Snapshots of one continuous profiling session joined into one XSpace, so that the flight
// recorder's frozen window (agent/recorder.h) is read, analysed and streamed as a capture is.
//
// Each snapshot is an XSpace of its own: its line times relative to its own start (its Task
// Environment plane's profile_start_time) and its metadata numbered from 1. Joined, every
// line is on absolute time, each plane's event and stat metadata of a later snapshot are
// renumbered past the earlier ones' (every reference with them: events, stats, ref values,
// child ids), a plane's own stats (e.g. a chip's core_details) are its first snapshot's, and
// one Task Environment spans from the first start to the last stop. Events are not deduplicated
// or cut: snapshots of one session do not overlap.
#ifndef PODPROF_AGENT_XSPACE_MERGE_H_
#define PODPROF_AGENT_XSPACE_MERGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/xplane.pb.h"

namespace podprof::agent {

// The profile's window (profile_start_time, profile_stop_time of the Task Environment plane),
// ns since the epoch on the profiled host's clock; NotFound without one.
absl::Status ProfileWindow(const tensorflow::profiler::XSpace& space, int64_t* start_ns,
                           int64_t* stop_ns);

// `snapshots` oldest first. InvalidArgument when there are none, or one has no profile window.
absl::StatusOr<tensorflow::profiler::XSpace> MergeSnapshots(
    std::vector<tensorflow::profiler::XSpace> snapshots);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_XSPACE_MERGE_H_
