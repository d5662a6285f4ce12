#include "sim/xspace_builder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "trace/xspace_schema.h"

namespace podprof::sim {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XStat;

using trace::xspace::Stat;

// The stats of a device plane, as the real profiler names them, in the order of their metadata
// ids (1, 2, ...).
constexpr Stat kDeviceStats[] = {
    Stat::kCoreDetails,    Stat::kDeviceTypeString,  Stat::kPeakTeraflops,
    Stat::kPeakHbmBw,      Stat::kHasMegacore,       Stat::kRunId,
    Stat::kDeviceOffsetPs, Stat::kDeviceDurationPs,  Stat::kHloCategory,
    Stat::kFlops,          Stat::kBytesAccessed,     Stat::kSource,
    Stat::kProgramId,      Stat::kAllReduceUniqueId, Stat::kCounterValue,
    Stat::kTfOp,           Stat::kSourceStack,       Stat::kMosaicMlir,
};
// The stats of the Task Environment plane, likewise.
constexpr Stat kEnvironmentStats[] = {Stat::kProfileStartTime, Stat::kProfileStopTime};

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

XStat* AddStat(google::protobuf::RepeatedPtrField<XStat>* stats, int64_t id) {
  XStat* s = stats->Add();
  s->set_metadata_id(id);
  return s;
}

// A stat of a device plane, of its event metadata or of its events.
XStat* AddStat(google::protobuf::RepeatedPtrField<XStat>* stats, Stat stat) {
  return AddStat(stats, trace::xspace::StatIdIn(kDeviceStats, stat));
}

// Declares `stats` as the plane's stat metadata, ids 1..N in order.
template <size_t N>
void AddStatMetadata(const Stat (&stats)[N], XPlane* plane) {
  for (size_t i = 0; i < N; ++i) {
    const int64_t id = static_cast<int64_t>(i) + 1;
    auto& sm = (*plane->mutable_stat_metadata())[id];
    sm.set_id(id);
    sm.set_name(std::string(trace::xspace::StatName(stats[i])));
  }
}

void AddVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// The CoreDetails message the profiler stores as bytes: its global chip and core ids (varints).
std::string CoreDetails(int64_t global_chip) {
  using trace::xspace::CoreDetailsField;
  std::string out;
  AddVarint(&out, CoreDetailsField::kGlobalChipId << 3);
  AddVarint(&out, static_cast<uint64_t>(global_chip));
  AddVarint(&out, CoreDetailsField::kGlobalCoreId << 3);
  AddVarint(&out, static_cast<uint64_t>(global_chip));
  return out;
}

}  // namespace

BuildResult BuildXSpace(const PodModel& model, const SkewedClock& clock,
                        const SessionWindow& window) {
  return BuildXSpace(model, clock, window, [&model](int64_t s) { return model.Step(s); });
}

BuildResult BuildXSpace(const PodModel& model, const SkewedClock& clock,
                        const SessionWindow& window,
                        const std::function<std::vector<ChipStep>(int64_t)>& step_of) {
  BuildResult result;
  auto& space = result.space;
  space.add_hostnames(window.host_name);
  const int64_t host_start_ns = clock.ToHost(window.true_start_ns);
  const int64_t true_start_ps = window.true_start_ns * 1000;
  const int64_t true_end_ps = window.true_end_ns * 1000;
  // File offsets are host-clock ps since the profile start; device planes add the device shift.
  auto host_offset_ps = [&](int64_t true_ps) {
    return clock.HostIntervalPs(true_ps - true_start_ps);
  };
  const int64_t device_shift_ps = window.device_offset_ns * 1000;

  const int64_t first_step = model.StepAt(window.true_start_ns);
  const int64_t last_step = model.StepAt(window.true_end_ns);
  std::vector<std::vector<ChipStep>> steps;
  for (int64_t s = first_step; s <= last_step; ++s) steps.push_back(step_of(s));

  const auto& ops = model.ops();
  const int64_t module_meta = static_cast<int64_t>(ops.size()) + 1;
  const int64_t first_counter_meta = module_meta + 1;
  const int64_t first_step_meta = first_counter_meta + kCounterKinds;
  const auto& gen = model.generation();

  for (int chip = 0; chip < model.chips(); ++chip) {
    XPlane* plane = space.add_planes();
    plane->set_id(chip + 1);
    plane->set_name(absl::StrCat(trace::xspace::kTpuPlanePrefix, chip));
    AddStatMetadata(kDeviceStats, plane);
    AddStat(plane->mutable_stats(), Stat::kCoreDetails)
        ->set_bytes_value(CoreDetails(model.GlobalChipId(chip)));
    AddStat(plane->mutable_stats(), Stat::kDeviceTypeString)->set_str_value(gen.device_type);
    AddStat(plane->mutable_stats(), Stat::kPeakTeraflops)->set_double_value(gen.peak_tflops);
    AddStat(plane->mutable_stats(), Stat::kPeakHbmBw)->set_double_value(gen.peak_hbm_gbps);
    AddStat(plane->mutable_stats(), Stat::kHasMegacore)->set_int64_value(0);

    auto& metas = *plane->mutable_event_metadata();
    for (size_t i = 0; i < ops.size(); ++i) {
      auto& m = metas[static_cast<int64_t>(i) + 1];
      m.set_id(static_cast<int64_t>(i) + 1);
      m.set_name(ops[i].hlo_text);
      m.set_display_name(ops[i].name);
      AddStat(m.mutable_stats(), Stat::kHloCategory)->set_str_value(ops[i].category);
      AddStat(m.mutable_stats(), Stat::kProgramId)->set_uint64_value(model.program_id());
      AddStat(m.mutable_stats(), Stat::kFlops)->set_int64_value(ops[i].flops);
      AddStat(m.mutable_stats(), Stat::kBytesAccessed)->set_int64_value(ops[i].bytes);
      AddStat(m.mutable_stats(), Stat::kSource)->set_str_value(ops[i].source);
      AddStat(m.mutable_stats(), Stat::kTfOp)->set_str_value(ops[i].tf_op);
      if (!ops[i].source_stack.empty()) {
        AddStat(m.mutable_stats(), Stat::kSourceStack)->set_str_value(ops[i].source_stack);
      }
      if (!ops[i].mlir.empty()) {
        AddStat(m.mutable_stats(), Stat::kMosaicMlir)->set_str_value(ops[i].mlir);
      }
    }
    auto& module = metas[module_meta];
    module.set_id(module_meta);
    module.set_name(absl::StrCat(model.module_name(), "(", model.program_id(), ")"));

    XLine* modules = plane->add_lines();
    modules->set_id(1);
    modules->set_name(std::string(trace::xspace::kXlaModulesLine));
    XLine* xla_ops = plane->add_lines();
    xla_ops->set_id(2);
    xla_ops->set_name(std::string(trace::xspace::kXlaOpsLine));
    XLine* step_line = plane->add_lines();
    step_line->set_id(3);
    step_line->set_name(std::string(trace::xspace::kStepsLine));
    // Named scopes inside kernels (Pallas trace points), with metadata ids of their own.
    constexpr int64_t kFirstScopeMeta = int64_t{1} << 40;
    XLine* scopes = nullptr;
    std::vector<std::vector<int64_t>> scope_meta(ops.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      for (const auto& [name, share] : ops[i].scopes) {
        if (scopes == nullptr) {
          scopes = plane->add_lines();
          scopes->set_id(5);
          scopes->set_name(std::string(trace::xspace::kXlaTraceMeLine));
        }
        const int64_t id = kFirstScopeMeta + static_cast<int64_t>(i) * 64 +
                           static_cast<int64_t>(scope_meta[i].size());
        metas[id].set_id(id);
        metas[id].set_name(name);
        scope_meta[i].push_back(id);
      }
    }
    XLine* counters = nullptr;
    if (window.counters) {
      counters = plane->add_lines();
      counters->set_id(4);
      counters->set_name(std::string(trace::xspace::kCountersLine));
      for (int k = 0; k < kCounterKinds; ++k) {
        auto& m = metas[first_counter_meta + k];
        m.set_id(first_counter_meta + k);
        m.set_name(kCounterNames[k]);
      }
    }

    // The energy counters' running totals, and the true instant they were last advanced to.
    double core_nj = 0, hbm_nj = 0;
    int64_t energy_at_ps = -1;
    double last_level[kGaugeKinds] = {};
    bool first_sample = true;
    for (const auto& pod_step : steps) {
      const ChipStep& cs = pod_step[chip];
      const int64_t step_ps = cs.start_ns * 1000;
      if (step_ps >= true_start_ps && step_ps < true_end_ps) {
        const int64_t off = host_offset_ps(step_ps) + device_shift_ps;
        const int64_t dur = clock.HostIntervalPs(cs.busy_end_ps);
        XEvent* mev = modules->add_events();
        mev->set_metadata_id(module_meta);
        mev->set_offset_ps(off);
        mev->set_duration_ps(dur);
        AddStat(mev->mutable_stats(), Stat::kRunId)->set_int64_value(cs.step);
        const int64_t step_meta = first_step_meta + (cs.step - first_step);
        auto& sm = metas[step_meta];
        sm.set_id(step_meta);
        sm.set_name(absl::StrCat(cs.step));
        XEvent* sev = step_line->add_events();
        sev->set_metadata_id(step_meta);
        sev->set_offset_ps(off);
        sev->set_duration_ps(dur);
      }
      for (size_t ri = 0; ri < cs.runs.size(); ++ri) {
        const OpRun& run = cs.runs[ri];
        const int64_t t = step_ps + run.start_ps;
        if (t < true_start_ps || t >= true_end_ps) continue;
        const int64_t off = host_offset_ps(t) + device_shift_ps;
        const int64_t dur = clock.HostIntervalPs(run.duration_ps);
        XEvent* ev = xla_ops->add_events();
        ev->set_metadata_id(run.op + 1);
        ev->set_offset_ps(off);
        ev->set_duration_ps(dur);
        AddStat(ev->mutable_stats(), Stat::kDeviceOffsetPs)
            ->set_uint64_value(static_cast<uint64_t>(off));
        // The device measures its own time: the true duration, free of host clock drift.
        AddStat(ev->mutable_stats(), Stat::kDeviceDurationPs)
            ->set_uint64_value(static_cast<uint64_t>(run.duration_ps));
        if (run.collective_id != 0) {
          AddStat(ev->mutable_stats(), Stat::kAllReduceUniqueId)
              ->set_uint64_value(run.collective_id);
        }
        ++result.kernel_events;
        int64_t scope_at_ps = 0;
        for (size_t k = 0; k < scope_meta[run.op].size(); ++k) {
          const int64_t len =
              std::llround(static_cast<double>(run.duration_ps) * ops[run.op].scopes[k].second);
          XEvent* sc = scopes->add_events();
          sc->set_metadata_id(scope_meta[run.op][k]);
          sc->set_offset_ps(host_offset_ps(t + scope_at_ps) + device_shift_ps);
          sc->set_duration_ps(std::min(len, run.duration_ps - scope_at_ps));
          scope_at_ps += len;
        }
        if (counters != nullptr) {
          // Samples where a level changes, as a sampler sees it at its resolution: at a
          // kernel's start the gauges that differ from what they were, and the energy totals;
          // at its end, when the chip then idles (the step's last kernel), everything again.
          // Between back-to-back kernels the launch gap keeps the earlier kernel's levels.
          const UnitProfile& u = ops[run.op].units;
          const double levels[kGaugeKinds] = {u.mxu, u.vpu,       u.scalar,
                                              u.dma, u.stall_hbm, u.stall_dma};
          const double core_w = kCoreIdleW + kCoreMxuW * u.mxu + kCoreVpuW * u.vpu;
          const double hbm_w = kHbmIdleW + kHbmDmaW * u.dma;
          const int64_t end = t + run.duration_ps;
          const bool idles_after =
              ri + 1 == cs.runs.size() ||
              cs.runs[ri + 1].start_ps - (run.start_ps + run.duration_ps) > 1'000'000;
          if (energy_at_ps < 0) energy_at_ps = t;
          // Idle since the last kernel ended (nJ = W x ps / 1000).
          core_nj += kCoreIdleW * static_cast<double>(t - energy_at_ps) * 1e-3;
          hbm_nj += kHbmIdleW * static_cast<double>(t - energy_at_ps) * 1e-3;
          auto sample = [&](int64_t at_true_ps, const double* gauges, bool all) {
            const int64_t at = host_offset_ps(at_true_ps) + device_shift_ps;
            for (int k = 0; k < kCounterKinds; ++k) {
              const double v = k < kGaugeKinds ? gauges[k] : k == kGaugeKinds ? core_nj : hbm_nj;
              if (k < kGaugeKinds && !all && last_level[k] == v) continue;
              if (k < kGaugeKinds) last_level[k] = v;
              XEvent* cev = counters->add_events();
              cev->set_metadata_id(first_counter_meta + k);
              cev->set_offset_ps(at);
              AddStat(cev->mutable_stats(), Stat::kCounterValue)->set_double_value(v);
            }
          };
          static const double kIdle[kGaugeKinds] = {0, 0, 0, 0, 0, 0};
          sample(t, levels, first_sample);
          first_sample = false;
          core_nj += core_w * static_cast<double>(run.duration_ps) * 1e-3;
          hbm_nj += hbm_w * static_cast<double>(run.duration_ps) * 1e-3;
          energy_at_ps = end;
          if (idles_after) sample(end, kIdle, true);
        }
      }
    }
  }

  // The host's own view: the launch of every step on its Python thread, on the host clock.
  XPlane* host = space.add_planes();
  host->set_id(model.chips() + 1);
  host->set_name(std::string(trace::xspace::kHostCpuPlane));
  (*host->mutable_event_metadata())[1].set_id(1);
  (*host->mutable_event_metadata())[1].set_name(
      absl::StrCat("PjitFunction(", model.module_name(), ")"));
  XLine* thread = host->add_lines();
  thread->set_id(1);
  thread->set_name("python/1");
  for (int64_t s = first_step; s <= last_step; ++s) {
    const int64_t step_ps = s * model.step_period_ns() * 1000;
    if (step_ps < true_start_ps || step_ps >= true_end_ps) continue;
    XEvent* ev = thread->add_events();
    ev->set_metadata_id(1);
    ev->set_offset_ps(host_offset_ps(step_ps));
    ev->set_duration_ps(clock.HostIntervalPs(50'000'000));
  }

  XPlane* env = space.add_planes();
  env->set_id(model.chips() + 2);
  env->set_name(std::string(trace::xspace::kTaskEnvironmentPlane));
  AddStatMetadata(kEnvironmentStats, env);
  AddStat(env->mutable_stats(), trace::xspace::StatIdIn(kEnvironmentStats, Stat::kProfileStartTime))
      ->set_uint64_value(static_cast<uint64_t>(host_start_ns));
  AddStat(env->mutable_stats(), trace::xspace::StatIdIn(kEnvironmentStats, Stat::kProfileStopTime))
      ->set_uint64_value(static_cast<uint64_t>(clock.ToHost(window.true_end_ns)));
  return result;
}

}  // namespace podprof::sim
