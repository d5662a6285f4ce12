// Kernel profiling in the simulated host: what a capture asks for (ProfileOptions'
// advanced_configuration, spelled as XProf's docs/kernel-profiling.md documents it) and what a
// chip then writes into its device plane, in the layout of docs/INTEROP.md "Kernel profiling
// data (TPU7x)". Not asked for, or on a generation without it (before v7x), nothing of this is
// written, as with the real runtime.
//
// Two layouts, as the request decides (KernelProfilingRequest::per_kernel):
//  - XProf's standard kernel profiling (`tpu_enable_kernel_profiling` without TensorCore or
//    CMN sampling options): per compute kernel execution one line `counters_<kernel>` (line
//    id = the sample number from 1), an event per (counter, die) spanning the execution (the
//    offset and duration of its `XLA Ops` event) whose `counter_value` is what the counter
//    counted during that execution: not a running total, not scaled, not wrapped.
//  - Periodic sampling (`tpu_<component>_perf_counter_sampling_options`): a line per sample
//    instant (line id = sample number from 0, timestamp = the instant, named after the
//    kernel), inside compute kernels only; values are running totals since the session's
//    start, shifted right by the sampling's scaling and cut to its packed width, so they wrap
//    as the hardware's do.
// Both carry `performance_counter_id` and `counter_value` (uint64) on every event. On v7x each
// die's power manager counters (CYCLE_COUNT: every cycle of the clock; CLOCKS_SKIPPED: those
// the throttle skipped; EXT_THROTTLE_ and LDIDT_DROOP_CLOCKS_SKIPPED: 0, the model's throttling
// has neither cause) come with every line. Pallas kernels also get their `Pallas Primitives`,
// `Source Lines`, `LLO Instructions` and `Tensor Core Sync Flag` lines.
#ifndef PODPROF_SIM_KERNEL_PROFILING_H_
#define PODPROF_SIM_KERNEL_PROFILING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "export/plane_stats.h"
#include "proto/profiler_options.pb.h"
#include "proto/xplane.pb.h"
#include "sim/pod_model.h"
#include "sim/timebase.h"
#include "sim/xspace_stream.h"
#include "trace/perf_counters.h"

namespace podprof::sim {

// advanced_configuration keys the simulated runtime honours.
inline constexpr char kPeriodicSamplingKey[] = "tpu_enable_periodic_counter_sampling";
inline constexpr char kKernelProfilingKey[] = "tpu_enable_kernel_profiling";
inline constexpr char kTcSamplingKey[] = "tpu_tc_perf_counter_sampling_options";
inline constexpr char kCmnSamplingKey[] = "tpu_cmn_perf_counter_sampling_options";
inline constexpr char kCounterSetsKey[] = "tpu_perf_counter_sets";

// The counter sets of `tpu_perf_counter_sets`, as XProf documents them.
inline constexpr absl::string_view kCounterSets[] = {"TC_COMPUTATION", "TC_MEMORY", "SC_ACTIVITY",
                                                     "SC_MEMORY", "HBM"};

struct KernelProfilingRequest {
  // The capture asked for kernel profiling (either switch set to true).
  bool requested = false;
  // The per-kernel layout (XProf's standard kernel profiling, see the top of this file); else
  // periodic sampling.
  bool per_kernel = false;
  // The TensorCore counters (indices, sorted) and, periodic only, the sampling schedule and
  // packing of every counter: the TensorCore's options, else the CMN's, else XProf's defaults
  // (the model samples all components on one timer).
  trace::SamplingOptions tc;
  // CMN counter indices (its sampling options' and the HBM set's), sorted.
  std::vector<int> cmn;
  // The HBM controllers' read and write counters (the HBM set).
  bool hbm_controllers = false;
  // Other components asked for (`tpu_<c>_perf_counter_sampling_options`) and the SparseCore
  // sets: the model has no SparseCore and no ICR, so they are only validated.
  std::vector<std::string> ignored_components;
  std::vector<std::string> ignored_sets;
};

// What a counter set stands for in the simulated runtime, by component ("tc", "cmn"): XProf's
// docs name the sets and their components but do not list their indices, so these are the
// simulator's choice, made so that each set covers what XProf's Utilization Viewer reads.
//   TC_COMPUTATION  tc: COUNT_CYCLES, SCALAR_ALU_INSTRUCTION_0/1, VECTOR_ALU_INSTRUCTION_0-3,
//                   VPU_VALU_{FADD,FMUL,MISC,INT,FMAC}_OPS_0-3, MXU_BUSY_0-2, MATMUL_* (per
//                   precision and MXU), MATPUSH_CYCLES_MXU_0/1, XLU_BUSY_0-2, PACKED_XLU_*,
//                   ROTATE_PERMUTE_*, TRANSPOSE_XLU_*
//   TC_MEMORY       tc: COUNT_CYCLES, VST_INSTRUCTION, VLD_INSTRUCTION_0/1
//   HBM             cmn: 0-2 (CYCLE_COUNTER_WINDOW, RD_RSP_BEAT_FROM_HBM, WR_REQ_BEAT_TO_HBM),
//                   plus every HBM controller's RD_RESP_PS0/1, WR_REQ_PS0/1 and
//                   PARTIAL_WRITE_REQ_PS0/1 (no component index: KernelProfilingRequest::
//                   hbm_controllers)
//   SC_ACTIVITY, SC_MEMORY: nothing (no SparseCore in the model).
// Indices are those of `generation`'s table (v7x); empty for an unknown set.
std::vector<std::pair<std::string, std::vector<int>>> CounterSetIndices(
    absl::string_view generation, absl::string_view set);

// The TensorCore counters of the per-kernel layout (TC_COMPUTATION and TC_MEMORY), and the
// sampling used when a capture sets the runtime's periodic switch without TensorCore sampling
// options (XProf's default interval).
trace::SamplingOptions DefaultTcSampling();

// Reads the request from a profile's options. INVALID_ARGUMENT naming the key when a value has
// the wrong type, a sampling option does not parse or a counter set is unknown, as the runtime
// rejects such a request.
absl::StatusOr<KernelProfilingRequest> KernelProfilingFromOptions(
    const tensorflow::ProfileOptions& options);

// What a TensorCore counter counts per clocked (not skipped) cycle while a kernel with `units`
// runs, by its register name (the part after `_COUNT_`, e.g. "MXU_BUSY_2"). The shares are
// chosen so that XProf's Utilization Viewer formulas give back the profile:
//   Avg MXU Busy    the two MXUs busy independently with probability m = units.mxu
//                   (MXU_BUSY_2 = m^2, MXU_BUSY_1 = 2m(1-m), MXU_BUSY_0 = (1-m)^2)
//   MXU0, MXU1      m: bf16 matmuls, 3/4 of the busy cycles LMR instructions (4 cycles each),
//                   1/4 VREG ones (8 cycles each); no f32 or f8
//   Scalar Unit     units.scalar; Vector ALUs and VPU Utilization: units.vpu (the VALU ops
//                   split FADD 25%, FMUL 25%, FMAC 30%, MISC 10%, INT 10%)
//   Avg XLU Busy    x = units.vpu / 4, as MXU busy; XLU0/XLU1 instructions x per
//                   `xlu_cycles_per_instruction` cycles (transposes 50%, rotates and permutes
//                   20%, their set variants 10%, packed 20%)
//   Vmem Stores/Loads, MXU matpush: fixed mixes of units.vpu and m.
// Counters the model does not know count 0.
double TcCounterShare(absl::string_view counter, const UnitProfile& units,
                      int xlu_cycles_per_instruction);

// The most sample lines (sample instants, or kernel executions in the per-kernel layout) one
// chip records in a session; later ones are dropped, with a warning in the XSpace
// (SessionWindow::max_samples_per_chip). The lines are streamed to the file, so this bounds
// the file and the time to read it, not memory: with TC_COMPUTATION and TC_MEMORY on both dies
// and the power manager's counters (116 events of about 35 bytes) a line is about 4 kB, so a
// chip's lines stay under about 1.1 GB.
inline constexpr int64_t kMaxSamplesPerChip = int64_t{1} << 18;

// One chip's kernel-profiling data, written in two passes over the chip's kernels in time
// order (every kernel of every step, also those outside the window, which advance the
// counters): OnRun puts the counters' metadata and the intra-kernel lines into the device
// plane; SampleRun then streams the sample lines after the plane's other fields.
class KernelProfileWriter {
 public:
  // `plane` must have declared `stats` (which must include the performance counter stats).
  // At most `max_samples` sample lines are written.
  KernelProfileWriter(const PodModel& model, const Timebase& time, int chip,
                      const KernelProfilingRequest& request, const exporter::PlaneStats& stats,
                      tensorflow::profiler::XPlane* plane,
                      int64_t max_samples = kMaxSamplesPerChip);

  // First pass. Kernel `run` starting at true instant `start_ps`; `in_window` when its XLA Ops
  // event is written (it starts inside the window).
  void OnRun(const OpRun& run, int64_t start_ps, bool in_window);
  // Second pass, over the same runs in the same order: advances the counters and appends the
  // run's sample lines to `out`, inside the plane's field.
  void SampleRun(const OpRun& run, int64_t start_ps, bool in_window, XSpaceStream& out);

  // The counters every line carries, in event order.
  const std::vector<uint64_t>& counter_ids() const { return ids_; }
  int64_t samples() const { return samples_; }
  // Sample lines past max_samples, and the true instant (ps) of the first of them.
  int64_t dropped_samples() const { return dropped_; }
  int64_t first_dropped_ps() const { return first_dropped_ps_; }

 private:
  struct Counter {
    uint64_t id;
    int64_t metadata_id;
  };
  void AddCounters(const KernelProfilingRequest& request);
  void AddCounter(uint64_t id);
  void AddRates();
  void AdvanceTo(int64_t true_ps);
  void SamplePeriodically(const OpTemplate& op, int64_t start_ps, int64_t end_ps,
                          XSpaceStream& out);
  bool TakeSample(int64_t true_ps);
  void Sample(int64_t true_ps, const std::string& kernel, XSpaceStream& out);
  void KernelLine(const OpTemplate& op, int64_t start_ps, int64_t duration_ps, XSpaceStream& out);
  void AppendEvent(size_t counter, uint64_t offset_ps, uint64_t duration_ps, uint64_t value);
  void AddIntraKernelLines(const OpTemplate& op, int64_t start_ps, int64_t duration_ps);
  int64_t Meta(absl::string_view name);
  void AddSpan(tensorflow::profiler::XLine* line, absl::string_view name, int64_t start_ps,
               int64_t end_ps);

  const PodModel& model_;
  const Timebase& time_;
  const int chip_;
  const bool per_kernel_;
  const trace::SamplingOptions schedule_;
  const exporter::PlaneStats& stats_;
  tensorflow::profiler::XPlane* const plane_;
  const uint64_t mask_;
  const int64_t max_samples_;
  // The stat metadata ids a sample's events carry.
  const int64_t counter_id_stat_, counter_value_stat_;
  std::vector<Counter> counters_;
  std::vector<uint64_t> ids_;
  // Per counter: its increments per true ps, while each op runs (index = op) and while the
  // chip idles (index = ops().size()), HBM traffic aside; and its increments per byte the chip
  // moves to or from HBM (the HBM counters' beats). Counters stay exact over hours: doubles
  // hold integers to 2^53, a day of 2 GHz cycles is under 2^48.
  std::vector<std::vector<double>> rates_;
  std::vector<double> beats_per_byte_;
  std::vector<double> totals_;
  const std::vector<double>* rate_ = nullptr;
  // HBM bytes per true ps of the kernel running now (0 when idle).
  double hbm_bytes_per_ps_ = 0;
  int64_t totals_at_ps_ = 0;
  int64_t samples_ = 0;
  int64_t dropped_ = 0;
  int64_t first_dropped_ps_ = 0;
  // Scratch: the counts at an execution's start; the wire format of one line, its events and
  // their stats.
  std::vector<uint64_t> counts_at_start_;
  std::string line_, event_, stat_;
  tensorflow::profiler::XLine* primitives_ = nullptr;
  tensorflow::profiler::XLine* source_lines_ = nullptr;
  tensorflow::profiler::XLine* llo_ = nullptr;
  tensorflow::profiler::XLine* sync_flag_ = nullptr;
  absl::flat_hash_map<std::string, int64_t> metadata_ids_;
};

}  // namespace podprof::sim

#endif  // PODPROF_SIM_KERNEL_PROFILING_H_
