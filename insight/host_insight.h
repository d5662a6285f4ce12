// Verdicts for one host's capture on its own, without an aggregator: its counters, the
// collectives among its chips (one host's chips share a clock) and its costs. What
// `podprof inspect` shows for a .xplane.pb file.
#ifndef PODPROF_INSIGHT_HOST_INSIGHT_H_
#define PODPROF_INSIGHT_HOST_INSIGHT_H_

#include <vector>

#include "insight/verdict.h"
#include "trace/kernel_stats.h"
#include "trace/model.h"

namespace podprof::insight {

// What is known of each row of `stats` (per chip, or rolled up over chips with
// KernelStats::kAllChips), in the same order. What was left out of the collectives' waits,
// and why, is added to `warnings` when given.
std::vector<KernelFacts> HostFacts(const trace::HostCapture& capture,
                                   const std::vector<trace::KernelStats>& stats,
                                   std::vector<std::string>* warnings = nullptr);

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_HOST_INSIGHT_H_
