// Putting a pod's hosts on one clock: each host's correction from its clock probes, refined by
// the collectives the hosts share (every chip ends one collective at the same instant).
#ifndef PODPROF_AGGREGATOR_CAPTURE_ALIGNMENT_H_
#define PODPROF_AGGREGATOR_CAPTURE_ALIGNMENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trace/model.h"

namespace podprof::aggregator {

// One host's clock correction: aggregator time = host time - offset_ns (at the window's middle,
// with drift_ppb across it).
struct HostCorrection {
  std::string host;
  int64_t probe_offset_ns = 0;  // from the clock model alone
  int64_t offset_ns = 0;        // after collective refinement (= probe_offset_ns if none)
  int64_t uncertainty_ns = 0;
  double drift_ppb = 0;
  int collectives = 0;  // synchronization points used
  bool refined = false;
};

// Collective id -> end time (host clock, ns), the median over the host's chips, in order of
// id (analysis::CollectiveEnds). A flat list: a pod's hosts keep theirs until the last host
// delivers (16 bytes a collective, where a map node took 48 and an allocation).
using CollectiveEndList = std::vector<std::pair<uint64_t, int64_t>>;

// Collective-based refinement. `ends` maps host -> its collective ends; `probe` holds each host's
// probe-only correction. Hosts are pinned to the reference host (the one sharing the most
// collectives) by the median difference of their shared collectives' end times; a refinement is
// accepted only inside the two hosts' probe uncertainties (plus the slack a device-to-host mapping
// may add). `mid_ns` is the window's middle on the aggregator's clock: offsets are given there,
// drifts across the window. Finally the common error all hosts inherit from the reference is
// estimated by the median of the hosts' probe disagreements (those that agree with most,
// weighted by their precision) and removed.
std::vector<HostCorrection> RefineWithCollectives(
    const std::map<std::string, CollectiveEndList>& ends, std::vector<HostCorrection> probe,
    int64_t mid_ns);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CAPTURE_ALIGNMENT_H_
