// What a kernel's sampled performance counters (trace/perf_counters.h) say of it: how busy each
// TensorCore unit was, whether the clock was throttled, and the cause that explains its time.
//
// The figures are XProf's Utilization Viewer's rows (xplane_to_utilization_viewer.cc and
// tpu_generic_utilization_utils.cc in openxla/xprof), computed per die (v7x: a TensorCore per
// die; v6e: one) from the counters' increase over the kernel's executions (insight/
// attribution.h): each row an achieved count against a peak, both from counters, e.g.
//   Avg MXU Busy    0.5 x MXU_BUSY_1 + MXU_BUSY_2           of cycles
//   VPU Utilization sum of the 20 VPU_VALU_*_OPS_0..3        of 4 x cycles
//   HBM Rd+Wr       32 bytes x (read responses + write requests) of the per-core peak over
//                   the TC's COUNT_CYCLES at the generation's clock
// The cycles are v7x's power manager's CYCLE_COUNT (v6e: the TensorCore's COUNT_CYCLES): a die
// without them gets no figures, and says so, rather than a guess from the clock. Throttling is
// only what the power manager counted (CLOCKS_SKIPPED of CYCLE_COUNT). The kernel's pooled
// figures are each row's achieved summed over dies against their peaks summed, as XProf pools.
#ifndef PODPROF_INSIGHT_KERNEL_PROFILE_H_
#define PODPROF_INSIGHT_KERNEL_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/chip_catalog.h"

namespace podprof::insight {

// Unit names as the CLI and API show them, in display order, and the Utilization Viewer row
// each is read from.
inline constexpr const char* kUnitNames[] = {"mxu",         "vpu",          "vector_alu",
                                             "vector_load", "vector_store", "scalar_alu",
                                             "xlu",         "hbm_bandwidth"};

// One of XProf's Utilization Viewer rows: `achieved` of `peak`, counted in `unit`
// ("cycles", "instructions", "bytes", "percent").
struct UtilizationRow {
  std::string name;  // as XProf names it: "Avg MXU Busy", "MXU0", "HBM Rd+Wr", ...
  double achieved = 0;
  double peak = 0;
  std::string unit;
  // Whether any of its counters was sampled. Rows that none was are not shown (XProf shows
  // them as 0); they still count in the pooled peak, as in XProf's pooling.
  bool measured = true;
  double Share() const { return peak > 0 ? achieved / peak : 0; }
};

// One die's figures (v7x: a TensorCore per die; v6e: the chip's one), from its own counters
// (`perf/dieN_...`) against its own cycles, as XProf's Utilization Viewer keeps them apart.
struct DieProfile {
  int die = 0;
  std::vector<UtilizationRow> rows;
  // Busy fraction (0..1) of each kUnitNames unit whose counters were sampled.
  std::map<std::string, double> units;
  double cycles = 0;
  double throttled = 0;
  bool power_manager = false;
  // Why it has no figures ("no cycle count"), else empty.
  std::string missing;
};

struct KernelProfile {
  // False when no performance counter covered the kernel (nothing below is meaningful).
  bool present = false;
  // The pooled rows (each row's achieved and peak summed over the dies) and unit shares.
  std::vector<UtilizationRow> rows;
  std::map<std::string, double> units;
  // Cycles counted over the kernel, all dies together.
  double cycles = 0;
  // Share of clock cycles the power manager skipped (0..1); 0 when it did not count.
  double throttled = 0;
  bool power_manager = false;
  // Share of the kernel's time its TensorCores waited on sync flags (`SyncWait`); 0 unknown.
  double sync_wait = 0;
  // Per die, in die order.
  std::vector<DieProfile> dies;
  // Why there are no figures ("no cycle count on any die"), else empty.
  std::string missing;
};

// The profile of a kernel from its perf counters' increases (`perf/...` name -> increase over
// the kernel's executions), the time those executions spent inside the counters' span, and
// the time its cores spent in SyncWait inside it. Counters of other names are ignored.
KernelProfile ProfileFromCounters(const trace::ChipGeneration* generation,
                                  const std::map<std::string, double>& totals, int64_t covered_ps,
                                  int64_t sync_wait_ps, int64_t total_ps);

// The pooled rows XProf's per-kernel tool (`kernel_utilization`) computes for one execution,
// which differ from the measured ones by design (docs/INTEROP.md, "XProf's per-kernel tool"):
// it counts every TensorCore of the chip (v7x: both dies), and one without a cycle count at
// `nominal_cycles` (the execution's time at the clock): its TensorCore counters against
// those (its HBM rows keep their own time base, the TC's COUNT_CYCLES). `*nominal` says whether
// some die was counted so: otherwise the rows are the measured ones.
std::vector<UtilizationRow> XprofPooledRows(const trace::ChipGeneration& generation,
                                            const std::map<std::string, double>& totals,
                                            double nominal_cycles, std::vector<int>* nominal);

// The cause a profile shows, in plain words naming the unit ("MXU idle waiting on HBM",
// "vector-store bound", "throttled"), or "" when it shows none. The kernel's own cause (its MXU
// waiting on memory) comes before the chip's (a throttled clock, which the text then adds),
// and both before a busy unit. Decided per die: the dies agreeing, from the pooled figures;
// otherwise the cause of the die that shows one, naming it and what the other die shows.
// `memory_bound` is the
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
