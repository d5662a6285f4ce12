// Every host's capture of one window of a simulated pod, written as files the way XProf's
// tools and `podprof import` read a session: <dir>/<host>.xplane.pb per host, and
// <dir>/truth.json with what was simulated (slices, injected faults, the window, and the
// occurrences of each DCN rendezvous that XProf's `megascale_stats` should count per host).
// `podprof-simhost --write-captures DIR` runs it; the peer tests compare XProf's tools and
// podprof's analyses on these files. The hosts' clocks are true (no offset, no drift), so
// every host's file is on one timeline.
#ifndef PODPROF_SIM_CAPTURE_FILES_H_
#define PODPROF_SIM_CAPTURE_FILES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "sim/pod_model.h"

namespace podprof::sim {

struct CaptureFilesOptions {
  std::string dir;            // created if missing
  int64_t true_start_ns = 0;  // the window, true time, ns since the epoch
  int64_t duration_ns = 0;
  bool counters = false;
  // Host i is named "<host_prefix><i>".
  std::string host_prefix = "simhost-";
};

// Writes every host's XSpace of `pod` (its host_index is ignored) and truth.json; the pod-wide
// part of each step is computed once for all hosts. Returns the XSpace paths by host index.
// InvalidArgument for a bad pod or window; the I/O error naming the file otherwise.
absl::StatusOr<std::vector<std::string>> WritePodCaptures(const PodConfig& pod,
                                                          const CaptureFilesOptions& options);

// What a model's multi-slice job and its DCN faults are, for ground-truth files: slices,
// hosts per slice, this host's slice, the DCN delays and slow slices.
nlohmann::json DcnTruth(const PodModel& model);

}  // namespace podprof::sim

#endif  // PODPROF_SIM_CAPTURE_FILES_H_
