#include "sim/xspace_builder.h"

#include <algorithm>
#include <memory>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "export/plane_stats.h"
#include "sim/dcn_program.h"
#include "sim/kernel_profiling.h"
#include "sim/megascale_trace.h"
#include "sim/timebase.h"
#include "sim/xspace_stream.h"
#include "trace/varint.h"
#include "trace/xspace_schema.h"

namespace podprof::sim {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using trace::xspace::Stat;

// The stats of a device plane, as the real profiler names them, in the order of their metadata
// ids (1, 2, ...): the chip's, its events' (shared with the exporter) and the op's source.
constexpr Stat kChipStats[] = {Stat::kCoreDetails,    Stat::kDeviceTypeString, Stat::kPeakTeraflops,
                               Stat::kPeakHbmBw,      Stat::kHasMegacore,      Stat::kRunId,
                               Stat::kDeviceOffsetPs, Stat::kDeviceDurationPs};
constexpr Stat kOpSourceStats[] = {Stat::kTfOp, Stat::kSourceStack, Stat::kMosaicMlir};
// Generations with kernel profiling (v7x) also name the plane's pod-wide chip and the
// performance counters; appended, so the ids of the others stay what older captures have.
constexpr Stat kKernelProfilingStats[] = {
    Stat::kGlobalChipId,
    Stat::kPerformanceCounterId,
    Stat::kPerformanceCounterDescription,
    Stat::kPerformanceCounterSets,
};
constexpr exporter::PlaneStats kDevice(kChipStats, exporter::kDeviceEventStats, kOpSourceStats);
constexpr exporter::PlaneStats kKernelProfilingDevice(kChipStats, exporter::kDeviceEventStats,
                                                      kOpSourceStats, kKernelProfilingStats);
// A multi-slice job's sends also say who sends to whom; appended, so a single-slice plane is
// what it was.
constexpr Stat kDcnStats[] = {Stat::kDcnCollectiveInfo};
constexpr Stat kKernelProfilingDcnStats[] = {
    Stat::kGlobalChipId,
    Stat::kPerformanceCounterId,
    Stat::kPerformanceCounterDescription,
    Stat::kPerformanceCounterSets,
    Stat::kDcnCollectiveInfo,
};
constexpr exporter::PlaneStats kDcnDevice(kChipStats, exporter::kDeviceEventStats, kOpSourceStats,
                                          kDcnStats);
constexpr exporter::PlaneStats kKernelProfilingDcnDevice(kChipStats, exporter::kDeviceEventStats,
                                                         kOpSourceStats, kKernelProfilingDcnStats);
// The `/host:metadata` plane of a multi-slice job: the program's HloProto and id.
constexpr Stat kHostMetadataStats[] = {Stat::kHloProto, Stat::kProgramId};
constexpr exporter::PlaneStats kHostMetadata(kHostMetadataStats);

const exporter::PlaneStats& DevicePlaneStats(const PodModel& model) {
  const bool dcn = model.slices() > 1;
  if (model.generation().kernel_profiling)
    return dcn ? kKernelProfilingDcnDevice : kKernelProfilingDevice;
  return dcn ? kDcnDevice : kDevice;
}

// The hardware counters a simulated chip reports: unit busy and stall fractions (gauges, each
// sample holding until the next) and core and HBM energy (running totals, nJ).
const char* const kCounterNames[] = {"mxu_busy",           "vpu_busy",     "scalar_busy",
                                     "dma_busy",           "stall_hbm",    "stall_dma",
                                     "vdd_core_energy_nj", "hbm_energy_nj"};
constexpr int kCounterKinds = 8;
constexpr int kGaugeKinds = 6;
// Power, W: idle, and what full use of each unit adds.
constexpr double kCoreIdleW = 40, kCoreMxuW = 120, kCoreVpuW = 40;
constexpr double kHbmIdleW = 8, kHbmDmaW = 30;

// The CoreDetails message the profiler stores as bytes: its global chip and core ids (varints).
std::string CoreDetails(int64_t global_chip) {
  using trace::xspace::CoreDetailsField;
  std::string out;
  trace::PutVarint(CoreDetailsField::kGlobalChipId << 3, &out);
  trace::PutVarint(static_cast<uint64_t>(global_chip), &out);
  trace::PutVarint(CoreDetailsField::kGlobalCoreId << 3, &out);
  trace::PutVarint(static_cast<uint64_t>(global_chip), &out);
  return out;
}

// One chip's device plane: its stats and metadata, its lines, and then its steps one by one.
class ChipPlane {
 public:
  // `dcn_info`: the sends' dcn_collective_info of a multi-slice job ("" otherwise).
  ChipPlane(const PodModel& model, const Timebase& time, int chip, int64_t first_step,
            const SessionWindow& window, const std::string& dcn_info, XPlane* plane)
      : model_(model),
        time_(time),
        stats_(DevicePlaneStats(model)),
        plane_(plane),
        metas_(*plane->mutable_event_metadata()),
        module_meta_(static_cast<int64_t>(model.ops().size()) + 1),
        first_counter_meta_(module_meta_ + 1),
        first_step_meta_(first_counter_meta_ + kCounterKinds),
        first_step_(first_step) {
    plane->set_id(chip + 1);
    plane->set_name(absl::StrCat(trace::xspace::kTpuPlanePrefix, chip));
    AddPlaneStats(chip);
    AddOpMetadata(dcn_info);
    AddLines(window.counters);
    if (window.kernel_profiling.requested && model.generation().kernel_profiling) {
      kernel_profile_ = std::make_unique<KernelProfileWriter>(
          model, time, chip, window.kernel_profiling, stats_, plane, window.max_samples_per_chip);
    }
  }

  // The plane as a `planes` field of the XSpace: what AddStep built, then the counter samples,
  // generated in a second pass over the same steps (`steps[i][chip]`) straight into `out`.
  absl::Status WriteTo(const std::vector<std::vector<ChipStep>>& steps, int chip,
                       XSpaceStream& out) {
    out.BeginField(trace::xspace::XSpaceField::kPlanes);
    out.Append(plane_->SerializeAsString());
    if (kernel_profile_ != nullptr) {
      for (const auto& pod_step : steps) {
        const ChipStep& cs = pod_step[chip];
        for (const OpRun& run : cs.runs) {
          const int64_t t = cs.start_ns * 1000 + run.start_ps;
          kernel_profile_->SampleRun(run, t, time_.Inside(t), out);
        }
      }
    }
    return out.EndField();
  }

  const KernelProfileWriter* kernel_profile() const { return kernel_profile_.get(); }

  // The step's module and step events (when it starts in the window), and its kernels.
  void AddStep(const ChipStep& cs) {
    if (cs.runs.empty()) return;  // a step the job did not issue (a stall, a skipped step)
    const int64_t step_ps = cs.start_ns * 1000;
    if (time_.Inside(step_ps)) {
      const int64_t off = time_.DeviceOffsetPs(step_ps);
      const int64_t dur = time_.clock.HostIntervalPs(cs.busy_end_ps);
      XEvent* mev = modules_->add_events();
      mev->set_metadata_id(module_meta_);
      mev->set_offset_ps(off);
      mev->set_duration_ps(dur);
      stats_.Add(mev->mutable_stats(), Stat::kRunId)->set_int64_value(cs.step);
      const int64_t step_meta = first_step_meta_ + (cs.step - first_step_);
      auto& sm = metas_[step_meta];
      sm.set_id(step_meta);
      sm.set_name(absl::StrCat(cs.step));
      XEvent* sev = steps_->add_events();
      sev->set_metadata_id(step_meta);
      sev->set_offset_ps(off);
      sev->set_duration_ps(dur);
    }
    for (size_t ri = 0; ri < cs.runs.size(); ++ri) {
      const int64_t t = step_ps + cs.runs[ri].start_ps;
      const bool inside = time_.Inside(t);
      // The counters run whether or not the kernel is written: every kernel advances them.
      if (kernel_profile_ != nullptr) kernel_profile_->OnRun(cs.runs[ri], t, inside);
      if (!inside) continue;
      AddRun(cs.runs[ri], t);
      if (counters_ != nullptr) AddSamples(cs, ri, t);
    }
  }

  int64_t kernel_events() const { return kernel_events_; }

 private:
  void AddPlaneStats(int chip) {
    const auto& gen = model_.generation();
    stats_.Declare(plane_);
    stats_.Add(plane_->mutable_stats(), Stat::kCoreDetails)
        ->set_bytes_value(CoreDetails(model_.GlobalChipId(chip)));
    stats_.Add(plane_->mutable_stats(), Stat::kDeviceTypeString)->set_str_value(gen.device_type);
    stats_.Add(plane_->mutable_stats(), Stat::kPeakTeraflops)->set_double_value(gen.peak_tflops);
    stats_.Add(plane_->mutable_stats(), Stat::kPeakHbmBw)->set_double_value(gen.peak_hbm_gbps);
    stats_.Add(plane_->mutable_stats(), Stat::kHasMegacore)->set_int64_value(0);
    if (gen.kernel_profiling) {
      stats_.Add(plane_->mutable_stats(), Stat::kGlobalChipId)
          ->set_int64_value(model_.GlobalChipId(chip));
    }
  }

  void AddOpMetadata(const std::string& dcn_info) {
    const auto& ops = model_.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      auto& m = metas_[static_cast<int64_t>(i) + 1];
      m.set_id(static_cast<int64_t>(i) + 1);
      m.set_name(ops[i].hlo_text);
      m.set_display_name(ops[i].name);
      stats_.Add(m.mutable_stats(), Stat::kHloCategory)->set_str_value(ops[i].category);
      stats_.Add(m.mutable_stats(), Stat::kProgramId)->set_uint64_value(model_.program_id());
      stats_.Add(m.mutable_stats(), Stat::kFlops)->set_int64_value(ops[i].flops);
      stats_.Add(m.mutable_stats(), Stat::kBytesAccessed)->set_int64_value(ops[i].bytes);
      stats_.Add(m.mutable_stats(), Stat::kSource)->set_str_value(ops[i].source);
      stats_.Add(m.mutable_stats(), Stat::kTfOp)->set_str_value(ops[i].tf_op);
      if (!ops[i].source_stack.empty()) {
        stats_.Add(m.mutable_stats(), Stat::kSourceStack)->set_str_value(ops[i].source_stack);
      }
      if (!ops[i].mlir.empty()) {
        stats_.Add(m.mutable_stats(), Stat::kMosaicMlir)->set_str_value(ops[i].mlir);
      }
      if (ops[i].dcn == DcnRole::kSend) {
        stats_.Add(m.mutable_stats(), Stat::kDcnCollectiveInfo)->set_bytes_value(dcn_info);
      }
    }
    auto& module = metas_[module_meta_];
    module.set_id(module_meta_);
    module.set_name(absl::StrCat(model_.module_name(), "(", model_.program_id(), ")"));
  }

  XLine* AddLine(int64_t id, absl::string_view name) {
    XLine* line = plane_->add_lines();
    line->set_id(id);
    line->set_name(std::string(name));
    return line;
  }

  void AddLines(bool counters) {
    modules_ = AddLine(1, trace::xspace::kXlaModulesLine);
    xla_ops_ = AddLine(2, trace::xspace::kXlaOpsLine);
    steps_ = AddLine(3, trace::xspace::kStepsLine);
    // Named scopes inside kernels (Pallas trace points), with metadata ids of their own.
    constexpr int64_t kFirstScopeMeta = int64_t{1} << 40;
    const auto& ops = model_.ops();
    scope_meta_.resize(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      for (const auto& scope : ops[i].scopes) {
        if (scopes_ == nullptr) scopes_ = AddLine(5, trace::xspace::kXlaTraceMeLine);
        const int64_t id = kFirstScopeMeta + static_cast<int64_t>(i) * 64 +
                           static_cast<int64_t>(scope_meta_[i].size());
        metas_[id].set_id(id);
        metas_[id].set_name(scope.first);
        scope_meta_[i].push_back(id);
      }
    }
    if (!counters) return;
    counters_ = AddLine(4, trace::xspace::kCountersLine);
    for (int k = 0; k < kCounterKinds; ++k) {
      auto& m = metas_[first_counter_meta_ + k];
      m.set_id(first_counter_meta_ + k);
      m.set_name(kCounterNames[k]);
    }
  }

  // A kernel execution starting at true instant `t`, and the scopes inside it.
  void AddRun(const OpRun& run, int64_t t) {
    const int64_t off = time_.DeviceOffsetPs(t);
    XEvent* ev = xla_ops_->add_events();
    ev->set_metadata_id(run.op + 1);
    ev->set_offset_ps(off);
    ev->set_duration_ps(time_.clock.HostIntervalPs(run.duration_ps));
    stats_.Add(ev->mutable_stats(), Stat::kDeviceOffsetPs)
        ->set_uint64_value(static_cast<uint64_t>(off));
    // The device measures its own time: the true duration, free of host clock drift.
    stats_.Add(ev->mutable_stats(), Stat::kDeviceDurationPs)
        ->set_uint64_value(static_cast<uint64_t>(run.duration_ps));
    if (run.collective_id != 0) {
      stats_.Add(ev->mutable_stats(), Stat::kAllReduceUniqueId)
          ->set_uint64_value(run.collective_id);
    }
    ++kernel_events_;
    int64_t scope_at_ps = 0;
    for (size_t k = 0; k < scope_meta_[run.op].size(); ++k) {
      const int64_t len = std::llround(static_cast<double>(run.duration_ps) *
                                       model_.ops()[run.op].scopes[k].second);
      XEvent* sc = scopes_->add_events();
      sc->set_metadata_id(scope_meta_[run.op][k]);
      sc->set_offset_ps(time_.DeviceOffsetPs(t + scope_at_ps));
      sc->set_duration_ps(std::min(len, run.duration_ps - scope_at_ps));
      scope_at_ps += len;
    }
  }

  // Samples where a level changes, as a sampler sees it at its resolution: at a kernel's start
  // the gauges that differ from what they were, and the energy totals; at its end, when the
  // chip then idles (the step's last kernel), everything again. Between back-to-back kernels
  // the launch gap keeps the earlier kernel's levels.
  void AddSamples(const ChipStep& cs, size_t ri, int64_t t) {
    const OpRun& run = cs.runs[ri];
    const UnitProfile& u = model_.ops()[run.op].units;
    const double levels[kGaugeKinds] = {u.mxu, u.vpu, u.scalar, u.dma, u.stall_hbm, u.stall_dma};
    const double core_w = kCoreIdleW + kCoreMxuW * u.mxu + kCoreVpuW * u.vpu;
    const double hbm_w = kHbmIdleW + kHbmDmaW * u.dma;
    const int64_t end = t + run.duration_ps;
    const bool idles_after =
        ri + 1 == cs.runs.size() ||
        cs.runs[ri + 1].start_ps - (run.start_ps + run.duration_ps) > 1'000'000;
    if (energy_at_ps_ < 0) energy_at_ps_ = t;
    // Idle since the last kernel ended (nJ = W x ps / 1000).
    core_nj_ += kCoreIdleW * static_cast<double>(t - energy_at_ps_) * 1e-3;
    hbm_nj_ += kHbmIdleW * static_cast<double>(t - energy_at_ps_) * 1e-3;
    static const double kIdle[kGaugeKinds] = {0, 0, 0, 0, 0, 0};
    Sample(t, levels, first_sample_);
    first_sample_ = false;
    core_nj_ += core_w * static_cast<double>(run.duration_ps) * 1e-3;
    hbm_nj_ += hbm_w * static_cast<double>(run.duration_ps) * 1e-3;
    energy_at_ps_ = end;
    if (idles_after) Sample(end, kIdle, true);
  }

  // Every counter at true instant `at_true_ps`: the gauges that changed (all of them with
  // `all`) and the energy totals.
  void Sample(int64_t at_true_ps, const double* gauges, bool all) {
    const int64_t at = time_.DeviceOffsetPs(at_true_ps);
    for (int k = 0; k < kCounterKinds; ++k) {
      const double v = k < kGaugeKinds ? gauges[k] : k == kGaugeKinds ? core_nj_ : hbm_nj_;
      if (k < kGaugeKinds && !all && last_level_[k] == v) continue;
      if (k < kGaugeKinds) last_level_[k] = v;
      XEvent* cev = counters_->add_events();
      cev->set_metadata_id(first_counter_meta_ + k);
      cev->set_offset_ps(at);
      stats_.Add(cev->mutable_stats(), Stat::kCounterValue)->set_double_value(v);
    }
  }

  const PodModel& model_;
  const Timebase& time_;
  const exporter::PlaneStats& stats_;
  XPlane* const plane_;
  google::protobuf::Map<int64_t, tensorflow::profiler::XEventMetadata>& metas_;
  const int64_t module_meta_, first_counter_meta_, first_step_meta_, first_step_;
  XLine* modules_ = nullptr;
  XLine* xla_ops_ = nullptr;
  XLine* steps_ = nullptr;
  XLine* scopes_ = nullptr;
  XLine* counters_ = nullptr;
  std::unique_ptr<KernelProfileWriter> kernel_profile_;
  std::vector<std::vector<int64_t>> scope_meta_;  // by op
  int64_t kernel_events_ = 0;
  // The energy counters' running totals, and the true instant they were last advanced to.
  double core_nj_ = 0, hbm_nj_ = 0;
  int64_t energy_at_ps_ = -1;
  double last_level_[kGaugeKinds] = {};
  bool first_sample_ = true;
};

// The host's own view: the launch of every step on its Python thread, on the host clock.
void AddHostPlane(const PodModel& model, const Timebase& time, int64_t first_step,
                  int64_t last_step, tensorflow::profiler::XSpace& space) {
  XPlane* host = space.add_planes();
  host->set_id(model.chips() + 1);
  host->set_name(std::string(trace::xspace::kHostCpuPlane));
  (*host->mutable_event_metadata())[1].set_id(1);
  (*host->mutable_event_metadata())[1].set_name(
      absl::StrCat("PjitFunction(", model.module_name(), ")"));
  if (model.slices() > 1) {
    // The runtime's DCN transport traces on a multi-slice host: XProf's megascale_stats reads
    // a host only when one of these names is there (no event need use it).
    (*host->mutable_event_metadata())[2].set_id(2);
    (*host->mutable_event_metadata())[2].set_name(std::string(trace::xspace::kMegaScaleSendEvent));
  }
  XLine* thread = host->add_lines();
  thread->set_id(1);
  thread->set_name("python/1");
  for (int64_t s = first_step; s <= last_step; ++s) {
    const int64_t step_ps = s * model.step_period_ns() * 1000;
    if (!time.Inside(step_ps)) continue;
    XEvent* ev = thread->add_events();
    ev->set_metadata_id(1);
    ev->set_offset_ps(time.HostOffsetPs(step_ps));
    ev->set_duration_ps(time.clock.HostIntervalPs(50'000'000));
  }
}

// The programs' HLO, as the profiler stores each program it ran (multi-slice jobs only: the
// DCN analysis reads the host-transfer ops' channels, rendezvous and shapes from it).
void AddHostMetadataPlane(const PodModel& model, tensorflow::profiler::XSpace& space) {
  XPlane* plane = space.add_planes();
  plane->set_id(model.chips() + 3);
  plane->set_name(std::string(trace::xspace::kHostMetadataPlane));
  kHostMetadata.Declare(plane);
  auto& m = (*plane->mutable_event_metadata())[1];
  m.set_id(1);
  m.set_name(model.module_name());
  kHostMetadata.Add(m.mutable_stats(), Stat::kHloProto)
      ->set_bytes_value(DcnHloProto(model.module_name(), 1, model.ops()));
  kHostMetadata.Add(m.mutable_stats(), Stat::kProgramId)->set_uint64_value(model.program_id());
}

// What the capture asked of kernel profiling that this host does not write, as the runtime
// reports a tracer it could not start: a warning of the XSpace.
void AddKernelProfilingWarnings(const PodModel& model, const KernelProfilingRequest& request,
                                tensorflow::profiler::XSpace& space) {
  if (!request.requested) return;
  const trace::ChipGeneration& gen = model.generation();
  if (!gen.kernel_profiling) {
    space.add_warnings(absl::StrCat("kernel profiling is not supported on ", gen.device_type,
                                    ": no performance counters were sampled (TPU7x and later)"));
    return;
  }
  for (const std::string& component : request.ignored_components) {
    space.add_warnings(absl::StrCat("tpu_", component,
                                    "_perf_counter_sampling_options: this host has no such "
                                    "component to sample; only TensorCore, power manager, CMN "
                                    "and HBM controller counters were sampled"));
  }
  for (const std::string& set : request.ignored_sets) {
    space.add_warnings(absl::StrCat(kCounterSetsKey, ": ", set,
                                    " counts SparseCore counters and this host has no "
                                    "SparseCore; the set was not sampled"));
  }
}

// What a chip's sample buffer overflowing cost, as the runtime reports a tracer's trouble.
std::string DroppedSamplesWarning(int chip, const KernelProfileWriter& kp, const Timebase& time) {
  return absl::StrCat("kernel profiling: chip ", chip, " kept its first ", kp.samples(),
                      " counter samples; ", kp.dropped_samples(), " more from ",
                      (kp.first_dropped_ps() - time.true_start_ps) / 1'000'000'000,
                      " ms into the window on were dropped, so later kernels have no counters "
                      "(ask for a longer counter interval or a shorter window)");
}

// The Task Environment plane: the profile's start and stop on the host clock.
void AddEnvironmentPlane(const PodModel& model, const SkewedClock& clock,
                         const SessionWindow& window, tensorflow::profiler::XSpace& space) {
  XPlane* env = space.add_planes();
  env->set_id(model.chips() + 2);
  env->set_name(std::string(trace::xspace::kTaskEnvironmentPlane));
  exporter::kTaskEnvironment.Declare(env);
  exporter::kTaskEnvironment.Add(env->mutable_stats(), Stat::kProfileStartTime)
      ->set_uint64_value(static_cast<uint64_t>(clock.ToHost(window.true_start_ns)));
  exporter::kTaskEnvironment.Add(env->mutable_stats(), Stat::kProfileStopTime)
      ->set_uint64_value(static_cast<uint64_t>(clock.ToHost(window.true_end_ns)));
}

}  // namespace

absl::StatusOr<WriteResult> WriteXSpace(
    const PodModel& model, const SkewedClock& clock, const SessionWindow& window, std::ostream& out,
    const std::function<bool()>& cancelled,
    const std::function<std::vector<ChipStep>(int64_t)>& step_of) {
  using trace::xspace::XSpaceField;
  WriteResult result;
  XSpaceStream stream(out);
  // Planes, warnings, host names: the order the generated classes write them in.
  tensorflow::profiler::XSpace tail;
  AddKernelProfilingWarnings(model, window.kernel_profiling, tail);
  const Timebase time{clock, window.true_start_ns * 1000, window.true_end_ns * 1000,
                      window.device_offset_ns * 1000};
  const int64_t first_step = model.StepAt(window.true_start_ns);
  const int64_t last_step = model.StepAt(window.true_end_ns);
  std::vector<std::vector<ChipStep>> steps;
  for (int64_t s = first_step; s <= last_step; ++s) {
    steps.push_back(step_of ? step_of(s) : model.Step(s));
  }
  const std::string dcn_info =
      model.slices() > 1 ? DcnCollectiveInfo(int64_t{model.config().hosts} * model.chips(),
                                             model.chips_per_slice())
                         : "";
  for (int chip = 0; chip < model.chips(); ++chip) {
    if (cancelled && cancelled()) return absl::CancelledError("the session's client went away");
    XPlane plane;
    ChipPlane chip_plane(model, time, chip, first_step, window, dcn_info, &plane);
    for (const auto& pod_step : steps) chip_plane.AddStep(pod_step[chip]);
    RETURN_IF_ERROR(chip_plane.WriteTo(steps, chip, stream));
    result.kernel_events += chip_plane.kernel_events();
    if (const KernelProfileWriter* kp = chip_plane.kernel_profile(); kp != nullptr) {
      result.samples += kp->samples();
      result.dropped_samples += kp->dropped_samples();
      if (kp->dropped_samples() > 0) tail.add_warnings(DroppedSamplesWarning(chip, *kp, time));
    }
  }
  AddHostPlane(model, time, first_step, last_step, tail);
  AddEnvironmentPlane(model, clock, window, tail);
  if (model.slices() > 1) {
    AddHostMetadataPlane(model, tail);
    AddMegascaleTracePlane(model, time, steps, model.chips() + 4, tail);
  }
  for (const XPlane& p : tail.planes())
    stream.AppendField(XSpaceField::kPlanes, p.SerializeAsString());
  for (const std::string& w : tail.warnings()) stream.AppendField(XSpaceField::kWarnings, w);
  stream.AppendField(XSpaceField::kHostnames, window.host_name);
  RETURN_IF_ERROR(stream.Flush());
  result.bytes = stream.size();
  return result;
}

BuildResult BuildXSpace(const PodModel& model, const SkewedClock& clock,
                        const SessionWindow& window) {
  return BuildXSpace(model, clock, window, nullptr);
}

BuildResult BuildXSpace(const PodModel& model, const SkewedClock& clock,
                        const SessionWindow& window,
                        const std::function<std::vector<ChipStep>(int64_t)>& step_of) {
  std::stringstream bytes;
  BuildResult result;
  absl::StatusOr<WriteResult> written = WriteXSpace(model, clock, window, bytes, nullptr, step_of);
  if (!written.ok()) {
    // Only a plane over 2 GiB fails in memory; say so where a reader of the space will look.
    result.space.add_errors(std::string(written.status().message()));
    return result;
  }
  result.space.ParseFromString(bytes.str());
  result.kernel_events = written->kernel_events;
  return result;
}

}  // namespace podprof::sim
