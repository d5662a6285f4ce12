// Why a kernel takes the time it takes, in plain words (see docs/INSIGHT.md for the rules).
//
// From what the capture says of a kernel on a chip or over the pod: its static cost (flops,
// HBM bytes) against the chip's peaks (the roofline), the unit utilizations and stalls its
// counters saw, and the time it spent waiting in collectives for later chips.
#ifndef PODPROF_INSIGHT_VERDICT_H_
#define PODPROF_INSIGHT_VERDICT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "insight/kernel_profile.h"
#include "trace/chip_catalog.h"

namespace podprof::insight {

enum class Bound {
  kUnknown,         // no cost model, no counters: nothing to say
  kCompute,         // arithmetic intensity at or above the ridge point
  kMemory,          // below the ridge point: HBM bandwidth bounds it
  kStalled,         // counters show the units stalled most of the time
  kCollectiveWait,  // a collective that mostly waited for a later chip
  kCommunication,   // a collective busy moving data
  kOverhead,        // short, and far from what its cost needs: launch and fixed costs
  kAsyncWait,       // the start or done half of an asynchronous copy: issuing or awaiting it
  kThrottled,       // performance counters show the TensorCore clock throttled
  kUnitBound,       // performance counters show one unit busy nearly all the time
};

// "compute bound", "memory bound", ... as the CLI and API print it.
const char* BoundName(Bound b);

// What is known of a kernel over a set of executions.
struct KernelFacts {
  std::string category;
  int64_t flops = 0;           // per execution
  int64_t bytes_accessed = 0;  // per execution
  int64_t count = 0;
  int64_t total_ps = 0;
  double peak_tflops = 0;
  double peak_hbm_gbps = 0;
  bool collective = false;  // an all-reduce, all-gather, ... (by category or collective id)
  // Time-weighted means of the gauges its counters saw (busy fractions 0..1, stalls 0..1):
  // GaugeMeans of their integrals.
  std::map<std::string, double> gauges;
  int64_t wait_ps = 0;    // waiting in collectives for later chips
  std::string straggler;  // who it waited for most often
  // Kernel profiling (insight/kernel_profile.h): the chip's generation, the increase of each
  // counter over the kernel (only `perf/...` ones are used), the time the counters covered and
  // the time its cores spent in SyncWait inside it.
  const trace::ChipGeneration* generation = nullptr;
  std::map<std::string, double> totals;
  int64_t covered_ps = 0;
  int64_t sync_wait_ps = 0;
};

// A gauge's time-weighted mean: the integral of its level over time (level x ps) divided by the
// ps it covered; none when it covered no time.
std::optional<double> GaugeMean(double integral, int64_t covered_ps);
// GaugeMean of each (integral, covered ps), by name; gauges without a mean are left out.
std::map<std::string, double> GaugeMeans(
    const std::map<std::string, std::pair<double, int64_t>>& integrals);

struct Verdict {
  Bound bound = Bound::kUnknown;
  std::string text;               // one line, plain words
  double intensity = 0;           // flops / byte; 0 when unknown
  double ridge = 0;               // the chip's peak flops / peak bytes per second
  double achieved_tflops = 0;     // flops x count / time
  double achieved_gbps = 0;       // bytes x count / time
  double compute_fraction = 0;    // of the peak
  double bandwidth_fraction = 0;  // of the peak
  double roofline_fraction = 0;   // the roofline's time for the work / the time it took
  double wait_fraction = 0;       // of its time, waiting in collectives
  double stall_fraction = 0;      // the stall gauges added up
  std::string dominant_stall;     // the largest stall gauge
  bool has_counters = false;
  // What the kernel's performance counters show (profile.present false without them), and
  // the cause they name (ProfileCause::name; empty when none decided the verdict).
  KernelProfile profile;
  std::string cause;
};

// True for collective categories (all-reduce, all-gather, reduce-scatter, all-to-all,
// collective-permute and their -start/-done halves).
bool IsCollectiveCategory(const std::string& category);

Verdict Decide(const KernelFacts& facts);

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_VERDICT_H_
