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
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/xplane.pb.h"

namespace podprof::agent {

// The profile's window (profile_start_time, profile_stop_time of the Task Environment plane),
// ns since the epoch on the profiled host's clock; NotFound without one.
absl::Status ProfileWindow(const tensorflow::profiler::XSpace& space, int64_t* start_ns,
                           int64_t* stop_ns);

// The join built a snapshot at a time, so that a snapshot's bytes can be let go as soon as it
// is parsed and added: memory is the join and the snapshot being added. Not synchronised.
class SnapshotMerger {
 public:
  // Adds the next snapshot (oldest first); its lines are moved into the join. InvalidArgument
  // when it has no profile window or holds a metadata id past 2^52 (then the merger is left
  // in an unspecified state: discard it).
  absl::Status Add(tensorflow::profiler::XSpace snapshot);
  // The join; InvalidArgument when nothing was added.
  absl::StatusOr<tensorflow::profiler::XSpace> Finish() &&;

 private:
  tensorflow::profiler::XSpace out_;
  absl::flat_hash_map<std::string, tensorflow::profiler::XPlane*> by_name_;  // planes of out_
  int64_t first_start_ = 0, last_stop_ = 0;
  size_t added_ = 0;
};

// ProfileWindow of a serialized XSpace, parsing only its Task Environment plane.
// InvalidArgument when the bytes are no XSpace, NotFound without the plane.
absl::Status ProfileWindowOfBytes(absl::string_view xspace, int64_t* start_ns, int64_t* stop_ns);

// About the memory a serialized XSpace takes once parsed, bytes: its own bytes (strings and
// packed fields) plus each line, event, stat and metadata entry as the message objects hold
// them. Read from the wire without parsing, so that a snapshot's join can be refused before it
// is made: events a few bytes each on the wire (a workload's, whatever it sends) parse to
// twenty times their bytes. InvalidArgument when the bytes are no XSpace.
absl::StatusOr<uint64_t> ParsedBytesEstimate(absl::string_view xspace);

// `snapshots` oldest first, through a SnapshotMerger. InvalidArgument when there are none, or
// one has no profile window.
absl::StatusOr<tensorflow::profiler::XSpace> MergeSnapshots(
    std::vector<tensorflow::profiler::XSpace> snapshots);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_XSPACE_MERGE_H_
