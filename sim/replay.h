// Replay of a recorded capture: answers Profile with a real `.xplane.pb`, re-based into the
// requested window, so the whole system can run on real data.
#ifndef PODPROF_SIM_REPLAY_H_
#define PODPROF_SIM_REPLAY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/xplane.pb.h"

namespace podprof::sim {

class Replay {
 public:
  // Reads and parses `path` once; errors name the path.
  static absl::StatusOr<Replay> Load(const std::string& path);

  // The recording as host `host_name` would have written it for a session starting at
  // `host_start_ns` and ending at `host_stop_ns` (host clock): line times become relative to
  // the new profile start, which the `Task Environment` plane records.
  tensorflow::profiler::XSpace Rebase(const std::string& host_name, int64_t host_start_ns,
                                      int64_t host_stop_ns) const;

  // Kernel-like events in the recording (device planes), for the session summary.
  int64_t device_events() const { return device_events_; }

 private:
  tensorflow::profiler::XSpace recorded_;
  int64_t device_events_ = 0;
};

}  // namespace podprof::sim

#endif  // PODPROF_SIM_REPLAY_H_
