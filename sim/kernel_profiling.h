// Kernel profiling in the simulated host: what a capture asks for (ProfileOptions'
// advanced_configuration) and what a chip then writes into its device plane, in the layout of
// docs/INTEROP.md "Kernel profiling data (TPU7x)".
//
// Asked for and on a generation that has it (v7x), each chip samples its TensorCores'
// performance counters while a compute kernel runs (not collectives, not idle): a line per
// sample instant (line id = sample number, timestamp = the instant), one event per counter and
// die carrying `performance_counter_id` and `counter_value`. Values are running totals since
// the session's start, shifted right by the sampling's scaling and cut to its packed width, so
// they wrap as the hardware's do. On v7x the power manager's CYCLE_COUNT and CLOCKS_SKIPPED of
// each die come with every sample, so a throttled chip shows directly. Pallas kernels also get
// their `Pallas Primitives`, `Source Lines`, `LLO Instructions` and `Tensor Core Sync Flag`
// lines. Not asked for, nothing of this is written, as with the real runtime.
#ifndef PODPROF_SIM_KERNEL_PROFILING_H_
#define PODPROF_SIM_KERNEL_PROFILING_H_

#include <cstdint>
#include <optional>
#include <string>
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

struct KernelProfilingRequest {
  // The capture asked for kernel profiling (either switch set to true).
  bool requested = false;
  // What to sample on the TensorCores.
  trace::SamplingOptions tc;
  // Other components asked for (`tpu_<c>_perf_counter_sampling_options`): the model has no
  // SparseCore, so they are only validated.
  std::vector<std::string> ignored_components;
};

// The TensorCore sampling used when a capture switches kernel profiling on without
// `tpu_tc_perf_counter_sampling_options`: a sample at each kernel's start and end of the cycle
// counter and the counters XProf's Utilization Viewer reads (scalar and vector ALUs, vector
// loads and stores, MXU and XLU busy).
trace::SamplingOptions DefaultTcSampling();

// Reads the request from a profile's options. INVALID_ARGUMENT naming the key when a value has
// the wrong type or a sampling option does not parse, as the runtime rejects such a request.
absl::StatusOr<KernelProfilingRequest> KernelProfilingFromOptions(
    const tensorflow::ProfileOptions& options);

// What a TensorCore counter counts per active (not throttled) clock cycle while a kernel with
// `units` runs, by its register name (the part after `_COUNT_`, e.g. "MXU_BUSY_2"). The shares
// are chosen so that XProf's Utilization Viewer formulas give back the profile: the two MXUs
// busy independently with probability units.mxu (MXU_BUSY_2 = m^2, MXU_BUSY_1 = 2m(1-m),
// MXU_BUSY_0 = (1-m)^2, so Avg MXU Busy = m); Scalar Unit = units.scalar; Vector ALUs =
// units.vpu; XLU busy = units.vpu / 4. Counters the model does not know count 0.
double TcCounterShare(absl::string_view counter, const UnitProfile& units,
                      int xlu_cycles_per_instruction);

// The most sample instants one chip records in a session; later ones are dropped, with a
// warning in the XSpace (SessionWindow::max_samples_per_chip). The samples are streamed to the
// file, so this bounds the file and the time to read it, not memory: at 10 us and 36 counters a
// sample line is about 1.3 kB, so a chip's samples stay under about 350 MB, and the demo's 2 s
// window (about 100k samples per v7x chip) fits with room.
inline constexpr int64_t kMaxSamplesPerChip = int64_t{1} << 18;

// One chip's kernel-profiling data, written in two passes over the chip's kernels in time
// order (every kernel of every step, also those outside the window, which advance the
// counters): OnRun puts the counters' metadata and the intra-kernel lines into the device
// plane; SampleRun then streams the sample lines after the plane's other fields.
class KernelProfileWriter {
 public:
  // `plane` must have declared `stats` (which must include the performance counter stats).
  // At most `max_samples` sample instants are written.
  KernelProfileWriter(const PodModel& model, const Timebase& time, int chip,
                      const trace::SamplingOptions& tc, const exporter::PlaneStats& stats,
                      tensorflow::profiler::XPlane* plane,
                      int64_t max_samples = kMaxSamplesPerChip);

  // First pass. Kernel `run` starting at true instant `start_ps`; `in_window` when its XLA Ops
  // event is written (it starts inside the window).
  void OnRun(const OpRun& run, int64_t start_ps, bool in_window);
  // Second pass, over the same runs in the same order: advances the counters and appends the
  // run's sample lines to `out`, inside the plane's field.
  void SampleRun(const OpRun& run, int64_t start_ps, bool in_window, XSpaceStream& out);

  int64_t samples() const { return samples_; }
  // Sample instants past max_samples, and the true instant (ps) of the first of them.
  int64_t dropped_samples() const { return dropped_; }
  int64_t first_dropped_ps() const { return first_dropped_ps_; }

 private:
  struct Counter {
    uint64_t id;
    int64_t metadata_id;
  };
  void AddCounter(uint64_t id);
  void AddRates();
  void AdvanceTo(int64_t true_ps);
  void Sample(int64_t true_ps, const std::string& kernel, XSpaceStream& out);
  void AddIntraKernelLines(const OpTemplate& op, int64_t start_ps, int64_t duration_ps);
  int64_t Meta(absl::string_view name);
  void AddSpan(tensorflow::profiler::XLine* line, absl::string_view name, int64_t start_ps,
               int64_t end_ps);

  const PodModel& model_;
  const Timebase& time_;
  const int chip_;
  const trace::SamplingOptions tc_;
  const exporter::PlaneStats& stats_;
  tensorflow::profiler::XPlane* const plane_;
  const uint64_t mask_;
  const int64_t max_samples_;
  // The stat metadata ids a sample's events carry.
  const int64_t counter_id_stat_, counter_value_stat_;
  std::vector<Counter> counters_;
  // Per counter: its increments per true ps, while each op runs (index = op) and while the
  // chip idles (index = ops().size()). Counters stay exact over hours: doubles hold integers
  // to 2^53, a day of 2 GHz cycles is under 2^48.
  std::vector<std::vector<double>> rates_;
  std::vector<double> totals_;
  const std::vector<double>* rate_ = nullptr;
  int64_t totals_at_ps_ = 0;
  int64_t samples_ = 0;
  int64_t dropped_ = 0;
  int64_t first_dropped_ps_ = 0;
  // Scratch for the wire format of one sample line, its events and their stats.
  std::string line_, event_, stat_;
  tensorflow::profiler::XLine* primitives_ = nullptr;
  tensorflow::profiler::XLine* source_lines_ = nullptr;
  tensorflow::profiler::XLine* llo_ = nullptr;
  tensorflow::profiler::XLine* sync_flag_ = nullptr;
  absl::flat_hash_map<std::string, int64_t> metadata_ids_;
};

}  // namespace podprof::sim

#endif  // PODPROF_SIM_KERNEL_PROFILING_H_
