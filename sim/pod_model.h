// The model of a TPU pod running a training job, shared by every simulated host.
//
// Every simhost of one pod (same pod seed, host count, generation and chips) computes the same
// schedule independently: a step begins on every chip at the same true instant (a multiple of
// the step period since the Unix epoch); each chip runs the step's kernels with roofline
// durations and seeded noise; at every collective the chips wait for the slowest arrival in the
// whole pod, and the collective ends at the same true instant on all of them. Nothing depends on
// when a capture is taken, so two processes agree on every kernel without talking.
//
// A multi-slice job (`slices` > 1, docs/MEGASCALE.md "podprof's multi-slice layout"): the
// hosts split evenly into slices (host index = slice x hosts per slice + worker); ICI
// collectives wait for the slowest chip of the slice only, and end per slice; after the
// backward pass the gradients cross the slices over DCN in a ring, two rendezvous of four
// host-transfer ops each (send, recv, send-done, recv-done), every chip sending to the chip of
// its worker and ordinal in the next slice. A receiver waits for its source chip in another
// slice, so the pod-wide part of a step (StepSchedule) carries each chip's data arrivals.
// Immutable after construction; safe to share between threads.
#ifndef PODPROF_SIM_POD_MODEL_H_
#define PODPROF_SIM_POD_MODEL_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trace/chip_catalog.h"

namespace podprof::sim {

// A chip that runs slow: its compute kernels take `factor` times as long, in the steps that
// start at or after true time `from_ns` (INT64_MIN: always; `--slowdown-at` sets a time).
struct Straggler {
  int host = 0;
  int chip = 0;
  double factor = 1;
  int64_t from_ns = INT64_MIN;
};

// The job stops issuing steps from true time `from_ns` until `until_ns` (a host-side hang: a
// deadlocked input pipeline or host thread): no step starts then, and every chip idles.
struct Stall {
  int64_t from_ns = 0;
  int64_t until_ns = INT64_MAX;
};

// From true time `from_ns` on, `fraction` of the steps are not issued (the input pipeline
// starves the chips, pod-wide): each chip's duty cycle falls by about that share.
struct StepSkip {
  int64_t from_ns = 0;
  double fraction = 0;  // 0 <= fraction < 1
};

// A chip whose power manager skips `fraction` of its TensorCore clocks (thermal or power
// throttling): its compute kernels take 1/(1 - fraction) as long, and under kernel profiling
// its CYCLES counters count (1 - fraction) of the nominal clock while the power manager's
// CLOCKS_SKIPPED counts the rest (v7x). An injected cause the tests know.
struct Throttle {
  int host = 0;
  int chip = 0;
  double fraction = 0;  // 0 <= fraction < 1
};

// From true time `from_ns` on (INT64_MIN: always), the DCN data slice `slice` sends arrives
// `extra_ns` late at its receivers (a slow or congested link out of that slice).
struct DcnDelay {
  int slice = 0;
  int64_t extra_ns = 0;
  int64_t from_ns = INT64_MIN;
};

// Every chip of slice `slice` runs its compute kernels `factor` times as long in the steps
// that start at or after true time `from_ns` (INT64_MIN: always), so the slice reaches the DCN
// phase late and its receivers in the next slice wait for it (a late producer).
struct SlowSlice {
  int slice = 0;
  double factor = 1;
  int64_t from_ns = INT64_MIN;
};

struct PodConfig {
  std::string generation = "v6e";
  // Chips per host; 0 = the generation's usual count.
  int chips = 0;
  int hosts = 1;
  int host_index = 0;
  uint64_t pod_seed = 1;
  std::vector<Straggler> stragglers;
  std::vector<Throttle> throttles;
  std::vector<Stall> stalls;
  std::vector<StepSkip> skips;
  // Slices of a multi-slice job; `hosts` must be a multiple. 1: one slice, no DCN phase (and
  // everything exactly as before slices existed).
  int slices = 1;
  std::vector<DcnDelay> dcn_delays;
  std::vector<SlowSlice> slow_slices;
  // Step period, ns; 0 = derived from the step's roofline time with headroom.
  int64_t step_period_ns = 0;
};

// What a kernel keeps each unit of the chip doing while it runs, as its hardware counters
// show it: busy fractions of the matrix, vector and scalar units and the DMA engines, and the
// fractions of time stalled on HBM and on DMA (all 0..1).
struct UnitProfile {
  double mxu = 0, vpu = 0, scalar = 0, dma = 0;
  double stall_hbm = 0, stall_dma = 0;
};

// One primitive of a Pallas kernel, as kernel profiling shows it inside the kernel (the
// `Pallas Primitives`, `Source Lines`, `LLO Instructions` and `Tensor Core Sync Flag` lines).
struct KernelPrimitive {
  std::string name;        // "dma_start", "dma_wait", "matmul", "softmax", "store"
  double share = 0;        // of the kernel's time; a kernel's primitives add up to 1
  int source_line = 0;     // line of the kernel's source file (`<kernel>.py`) that issued it
  bool sync_wait = false;  // the TensorCore waits on a sync flag (a DMA) meanwhile
};

// Which host-transfer op of a DCN rendezvous a kernel is (kNone: any other kernel).
enum class DcnRole : uint8_t { kNone, kSend, kRecv, kSendDone, kRecvDone };

// One kernel of the training step, the same on every chip.
struct OpTemplate {
  std::string name;      // short op name, e.g. "fusion.3"
  std::string hlo_text;  // the full HLO instruction
  std::string category;  // hlo_category, e.g. "convolution fusion", "all-reduce"
  int64_t flops = 0;     // per execution
  int64_t bytes = 0;     // HBM bytes accessed per execution
  bool collective = false;
  // Fraction of the roofline the kernel reaches (compute) or of the link bandwidth (collectives).
  double efficiency = 1;
  std::string source;  // model source line
  std::string tf_op;   // framework op path
  std::string source_stack;
  std::string mlir;  // Pallas kernels: the lowered Mosaic MLIR
  // Pallas kernels: named scopes inside the kernel, in order, with their share of its time.
  std::vector<std::pair<std::string, double>> scopes;
  // Pallas kernels: the primitives inside, in order (only written under kernel profiling).
  std::vector<KernelPrimitive> primitives;
  UnitProfile units;
  // The verdict this kernel's model makes (insight::BoundName), for tests.
  std::string expected_bound;
  // Host-transfer ops (slices > 1 only): the role, the rendezvous' index (0, 1), its name
  // ("dcn_grads.0") and channel, and the bytes the rendezvous moves per chip.
  DcnRole dcn = DcnRole::kNone;
  int rendezvous = -1;
  std::string rendezvous_name;
  int64_t channel_id = 0;
  int64_t dcn_bytes = 0;
};

// The rendezvous each step runs over DCN in a multi-slice job.
inline constexpr int kDcnRendezvous = 2;

// One kernel execution on one chip, in true time.
struct OpRun {
  int op = 0;            // index into PodModel::ops()
  int64_t start_ps = 0;  // relative to the step's start
  int64_t duration_ps = 0;
  uint64_t collective_id = 0;  // all_reduce_unique_id; 0 for compute kernels
};

// The pod-wide part of one step: what every host needs of the other hosts' chips to compute
// its own. The same for every host of the pod; a few hundred bytes for one slice, 16 bytes
// per chip of the pod more with several.
struct StepSchedule {
  int collectives = 0;  // ICI collectives per step
  // When each ICI collective ends, ps after the step's start: [slice * collectives + k] for
  // the k-th collective of the step in slice `slice`.
  std::vector<int64_t> collective_ends;
  // When the DCN data a chip receives in rendezvous r arrives at it, ps after the step's
  // start: [global chip id * kDcnRendezvous + r]. Empty with one slice.
  std::vector<int64_t> dcn_arrivals;

  int64_t CollectiveEnd(int slice, int k) const {
    return collective_ends[static_cast<size_t>(slice) * collectives + k];
  }
};

// One DCN rendezvous on one chip as its runtime sees it (slices > 1): what the Megascale
// runtime's action graph records of it (sim/megascale_trace.h). Instants are ps after the
// step's start, true time.
struct DcnTransfer {
  int rendezvous = 0;         // 0 .. kDcnRendezvous - 1
  int64_t send_start_ps = 0;  // the chip's send begins
  // The buffer starts to leave when the send has issued, and has left at `left_ps` (the
  // send-done ends then, unless it began later: a long overlapped kernel).
  int64_t send_end_ps = 0;
  int64_t left_ps = 0;
  int64_t arrival_ps = 0;        // the data from its source chip reached this chip
  int64_t transit_ps = 0;        // from the source's buffer leaving to that arrival
  int64_t recv_done_end_ps = 0;  // the received buffer is copied
  int64_t overlap_ps = 0;        // the compute kernel overlapped with the transfer (0: none)
  int64_t bytes = 0;             // the buffer, per chip
};

// One step on one chip.
struct ChipStep {
  int64_t step = 0;
  int64_t start_ns = 0;     // true time, ns since the epoch
  int64_t busy_end_ps = 0;  // end of the step's last kernel, relative to start_ns
  std::vector<OpRun> runs;
  // The step's DCN rendezvous on this chip, in order (empty with one slice or unissued).
  std::vector<DcnTransfer> dcn;
};

class PodModel {
 public:
  // Validates the configuration (known generation, indices in range, positive factors).
  static absl::StatusOr<PodModel> Create(const PodConfig& config);

  const PodConfig& config() const { return config_; }
  const trace::ChipGeneration& generation() const { return *generation_; }
  int chips() const { return chips_; }
  int64_t step_period_ns() const { return step_period_ns_; }
  const std::vector<OpTemplate>& ops() const { return ops_; }
  // The XLA program id of the training step (the same on every host of the pod).
  uint64_t program_id() const { return program_id_; }
  const std::string& module_name() const { return module_name_; }
  // Pod-wide id of chip `chip` of this host.
  int64_t GlobalChipId(int chip) const { return int64_t{config_.host_index} * chips_ + chip; }
  // Slices of the job, hosts and chips in each, and a host's slice (this host's: slice()).
  int slices() const { return config_.slices; }
  int hosts_per_slice() const { return hosts_per_slice_; }
  int64_t chips_per_slice() const { return int64_t{hosts_per_slice_} * chips_; }
  int SliceOf(int host) const { return host / hosts_per_slice_; }
  int slice() const { return SliceOf(config_.host_index); }
  // The DCN ring: the chip `global_chip` sends to (same worker and ordinal, next slice) and the
  // one it receives from (previous slice).
  int64_t DcnDestination(int64_t global_chip) const;
  int64_t DcnSource(int64_t global_chip) const;
  // The fraction of clocks skipped on chip `chip` of host `host` (0 when not throttled).
  double ThrottleFraction(int host, int chip) const;
  // HBM in use on `chip`, bytes: the job's working set, fixed per chip.
  int64_t HbmUsageBytes(int chip) const;

  // The step with index `step` on every chip of this host (index = chip).
  std::vector<ChipStep> Step(int64_t step) const;
  // The pod-wide part of step `step`: when each collective ends in each slice, and when each
  // chip's DCN data arrives. It depends on every chip of the pod, and is the same for every
  // host, so a process emulating many hosts computes it once per step instead of once per
  // host.
  StepSchedule Schedule(int64_t step) const;
  // Step(step), given `schedule` = Schedule(step) (of any host's model of the same pod): only
  // this host's chips are computed.
  std::vector<ChipStep> Step(int64_t step, const StepSchedule& schedule) const;
  // The network transit of the DCN data chip `global_chip` receives in rendezvous `rendezvous`
  // (0 .. kDcnRendezvous - 1) of step `step`, ps: from the moment its source chip's buffer has
  // left (the source's send-done) to its arrival (StepSchedule::dcn_arrivals): the network's
  // latency plus any DcnDelay on the source slice's link. A producer's lateness is not in it.
  // 0 with one slice. What the runtime's `megascale.dcn_transfer_latencies` counts
  // (sim/dcn_metric.h); cheap: it needs no schedule.
  int64_t DcnTransitPs(int64_t step, int64_t global_chip, int rendezvous) const;
  // The transfer phase of collective `op` in step `step` in slice `slice`, ps: the part of the
  // collective after the slowest chip of the slice arrived, the same on its every chip.
  int64_t CollectiveTransferPs(int64_t step, int op, int slice = 0) const;
  // Index of the step running (or last started) at true time `true_ns`.
  int64_t StepAt(int64_t true_ns) const;
  // Whether the job issues step `step` (false in a stall or a skipped step: Step() then has
  // no kernels on any chip).
  bool Issued(int64_t step) const;

 private:
  PodModel() = default;
  // Duration of compute op `op` on (host, chip) in `step`, ps.
  int64_t ComputeDurationPs(int host, int chip, int64_t step, int op) const;
  // The ops of one rendezvous on one chip (DCN ops at `op`..`op` + 3, or + 4 with a compute
  // kernel overlapped after the recv), from its start
  // `t_ps`; the recv-done's end needs the data's arrival (FinishDcn).
  struct DcnRun;
  DcnRun StartDcn(int host, int chip, int64_t step, int op, int64_t t_ps) const;
  // The network's latency from chip `chip` of `host` to its receiver in the rendezvous whose
  // send is op `op`, ps (before any injected delay).
  int64_t DcnLatencyPs(int host, int chip, int64_t step, int op) const;
  // The DCN extra delay of data sent by `slice` in `step`, ps.
  int64_t DcnDelayPs(int slice, int64_t step) const;
  // The step period when the configuration leaves it to the model: the step's busy time with
  // headroom.
  int64_t NominalStepPeriodNs() const;
  double StragglerFactor(int host, int chip, int64_t step) const;

  PodConfig config_;
  int hosts_per_slice_ = 1;
  const trace::ChipGeneration* generation_ = nullptr;
  int chips_ = 0;
  int64_t step_period_ns_ = 0;
  uint64_t program_id_ = 0;
  std::string module_name_;
  std::vector<OpTemplate> ops_;
};

// Deterministic hash of a few integers (SplitMix64 finalizer chain); the source of all noise.
uint64_t MixHash(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0, uint64_t e = 0);

}  // namespace podprof::sim

#endif  // PODPROF_SIM_POD_MODEL_H_
