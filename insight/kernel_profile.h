// What a kernel's sampled performance counters (trace/perf_counters.h) say of it: how busy each
// TensorCore unit was, whether the clock was throttled, and the cause that explains its time.
//
// The utilizations are XProf's Utilization Viewer's formulas over the counters' increase across
// the kernel's executions (insight/attribution.h), against the cycles the TensorCores counted:
//   scalar ALUs    (SCALAR_ALU_INSTRUCTION_0 + _1) / (2 x cycles)
//   vector ALUs    sum of VECTOR_ALU_INSTRUCTION_0..3 / (4 x cycles)
//   vector loads   (VLD_INSTRUCTION_0 + _1) / (2 x cycles)
//   vector stores  VST_INSTRUCTION / cycles
//   MXU busy       (0.5 x MXU_BUSY_1 + MXU_BUSY_2) / cycles   (MXU_BUSY_n: cycles with n busy)
//   XLU busy       (0.5 x XLU_BUSY_1 + XLU_BUSY_2) / cycles
//   HBM bandwidth  32 bytes x (read responses + write requests) / (per-core peak x time)
// Counters of both of v7x's TensorCores (one per die) add up, and so do their cycles. Without
// a cycle counter the cycles are the clock's: covered time x the generation's TensorCore
// frequency x cores. Throttling is the share of clock cycles skipped: v7x's power manager
// counts them (CLOCKS_SKIPPED / CYCLE_COUNT); otherwise it is 1 - counted / nominal cycles.
#ifndef PODPROF_INSIGHT_KERNEL_PROFILE_H_
#define PODPROF_INSIGHT_KERNEL_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/chip_catalog.h"

namespace podprof::insight {

// Unit names as the CLI and API show them, in display order.
inline constexpr const char* kUnitNames[] = {
    "mxu", "vector_alu", "vector_load", "vector_store", "scalar_alu", "xlu", "hbm_bandwidth"};

// One die's figures on a chip of several (v7x: a TensorCore per die), from its own counters
// (`perf/dieN_...`) against its own cycles, as XProf's Utilization Viewer keeps them apart.
struct DieProfile {
  int die = 0;
  std::map<std::string, double> units;
  double cycles = 0;
  double nominal_cycles = 0;
  double throttled = 0;
  bool power_manager = false;
  // Why it has no figures ("no cycle count"), else empty: without its cycles a die's shares
  // would be guesses, so none are given.
  std::string missing;
};

struct KernelProfile {
  // False when no performance counter covered the kernel (nothing below is meaningful).
  bool present = false;
  // Busy fraction (0..1) of each unit whose counters were sampled, by kUnitNames name.
  std::map<std::string, double> units;
  // TensorCore cycles counted over the kernel, and what the nominal clock gives for its time.
  double cycles = 0;
  double nominal_cycles = 0;
  // Share of clock cycles skipped (0..1); 0 when nothing shows throttling. `power_manager`:
  // counted by v7x's power manager, else inferred from counted against nominal cycles.
  double throttled = 0;
  bool power_manager = false;
  // Share of the kernel's time its TensorCores waited on sync flags (`SyncWait`); 0 unknown.
  double sync_wait = 0;
  // Per die, in die order, when the counters name dies; the figures above pool them (each
  // unit's busy cycles over all dies' cycles).
  std::vector<DieProfile> dies;
};

// The profile of a kernel from its perf counters' increases (`perf/...` name -> increase over
// the kernel's executions), the time those executions spent inside the counters' span, and
// the time its cores spent in SyncWait inside it. Counters of other names are ignored.
KernelProfile ProfileFromCounters(const trace::ChipGeneration* generation,
                                  const std::map<std::string, double>& totals, int64_t covered_ps,
                                  int64_t sync_wait_ps, int64_t total_ps);

// The cause a profile shows, in plain words naming the unit ("MXU idle waiting on HBM",
// "vector-store bound", "throttled"), or "" when it shows none. The kernel's own cause (its MXU
// waiting on memory) comes before the chip's (a throttled clock, which the text then adds),
// and both before a busy unit. `memory_bound` is the
// roofline's judgement of the kernel's static costs (insight/verdict.h).
// `mxu_work`: the kernel has flops for the MXU; a copy or fusion without any is memory bound
// when its counters show HBM busy, never "MXU idle".
struct ProfileCause {
  std::string name;  // "throttled", "MXU idle waiting on HBM", "<unit>-bound"
  std::string text;  // the figures behind it
};
ProfileCause CauseOf(const KernelProfile& profile, bool memory_bound, bool mxu_work = true);

// A unit this busy bounds the kernel.
inline constexpr double kUnitBoundShare = 0.7;
// Within this of a threshold a figure is "on the line": the verdict says so rather than let a
// tenth of a percent flip it without a word (69.9% compute bound, 70.1% MXU bound).
inline constexpr double kOnTheLine = 0.02;

// ", on the line: ..." when the profile's busiest unit is within kOnTheLine of
// kUnitBoundShare (`bound`: whether the verdict named it the bound), else "".
std::string OnTheLineNote(const KernelProfile& profile, bool bound);

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_KERNEL_PROFILE_H_
