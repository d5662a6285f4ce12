#include "sim/xspace_builder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace podprof::sim {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using tensorflow::profiler::XStat;

// Stat metadata ids of a device plane, named as the real profiler names them.
enum StatId : int64_t {
  kCoreDetails = 1,
  kDeviceTypeString,
  kPeakTeraflops,
  kPeakHbmBw,
  kHasMegacore,
  kRunId,
  kDeviceOffsetPs,
  kDeviceDurationPs,
  kHloCategory,
  kFlops,
  kBytesAccessed,
  kSource,
  kProgramId,
  kAllReduceUniqueId,
  kCounterValue,
  kStatCount,
};
const char* const kStatNames[] = {
    "",
    "core_details",
    "device_type_string",
    "peak_teraflops_per_second",
    "peak_hbm_bw_gigabytes_per_second",
    "has_megacore",
    "run_id",
    "device_offset_ps",
    "device_duration_ps",
    "hlo_category",
    "flops",
    "bytes_accessed",
    "source",
    "program_id",
    "all_reduce_unique_id",
    "counter_value",
};

const char* const kCounterNames[] = {"mxu_busy_percent", "vpu_busy_percent", "hbm_read_bytes",
                                     "hbm_write_bytes", "stall_cycles"};
constexpr int kCounterKinds = 5;

XStat* AddStat(google::protobuf::RepeatedPtrField<XStat>* stats, int64_t id) {
  XStat* s = stats->Add();
  s->set_metadata_id(id);
  return s;
}

void AddVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// The CoreDetails message the profiler stores as bytes: 5 = global chip id, 6 = global core id.
std::string CoreDetails(int64_t global_chip) {
  std::string out;
  AddVarint(&out, (5 << 3) | 0);
  AddVarint(&out, static_cast<uint64_t>(global_chip));
  AddVarint(&out, (6 << 3) | 0);
  AddVarint(&out, static_cast<uint64_t>(global_chip));
  return out;
}

}  // namespace

BuildResult BuildXSpace(const PodModel& model, const SkewedClock& clock,
                        const SessionWindow& window) {
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
  for (int64_t s = first_step; s <= last_step; ++s) steps.push_back(model.Step(s));

  const auto& ops = model.ops();
  const int64_t module_meta = static_cast<int64_t>(ops.size()) + 1;
  const int64_t first_counter_meta = module_meta + 1;
  const int64_t first_step_meta = first_counter_meta + kCounterKinds;
  const auto& gen = model.generation();

  for (int chip = 0; chip < model.chips(); ++chip) {
    XPlane* plane = space.add_planes();
    plane->set_id(chip + 1);
    plane->set_name(absl::StrCat("/device:TPU:", chip));
    for (int64_t id = 1; id < kStatCount; ++id) {
      auto& sm = (*plane->mutable_stat_metadata())[id];
      sm.set_id(id);
      sm.set_name(kStatNames[id]);
    }
    AddStat(plane->mutable_stats(), kCoreDetails)
        ->set_bytes_value(CoreDetails(model.GlobalChipId(chip)));
    AddStat(plane->mutable_stats(), kDeviceTypeString)->set_str_value(gen.device_type);
    AddStat(plane->mutable_stats(), kPeakTeraflops)->set_double_value(gen.peak_tflops);
    AddStat(plane->mutable_stats(), kPeakHbmBw)->set_double_value(gen.peak_hbm_gbps);
    AddStat(plane->mutable_stats(), kHasMegacore)->set_int64_value(0);

    auto& metas = *plane->mutable_event_metadata();
    for (size_t i = 0; i < ops.size(); ++i) {
      auto& m = metas[static_cast<int64_t>(i) + 1];
      m.set_id(static_cast<int64_t>(i) + 1);
      m.set_name(ops[i].hlo_text);
      m.set_display_name(ops[i].name);
      AddStat(m.mutable_stats(), kHloCategory)->set_str_value(ops[i].category);
      AddStat(m.mutable_stats(), kProgramId)->set_uint64_value(model.program_id());
      AddStat(m.mutable_stats(), kFlops)->set_int64_value(ops[i].flops);
      AddStat(m.mutable_stats(), kBytesAccessed)->set_int64_value(ops[i].bytes);
      AddStat(m.mutable_stats(), kSource)->set_str_value(ops[i].source);
    }
    auto& module = metas[module_meta];
    module.set_id(module_meta);
    module.set_name(absl::StrCat(model.module_name(), "(", model.program_id(), ")"));

    XLine* modules = plane->add_lines();
    modules->set_id(1);
    modules->set_name("XLA Modules");
    XLine* xla_ops = plane->add_lines();
    xla_ops->set_id(2);
    xla_ops->set_name("XLA Ops");
    XLine* step_line = plane->add_lines();
    step_line->set_id(3);
    step_line->set_name("Steps");
    XLine* counters = nullptr;
    if (window.counters) {
      counters = plane->add_lines();
      counters->set_id(4);
      counters->set_name("_counters_");
      for (int k = 0; k < kCounterKinds; ++k) {
        auto& m = metas[first_counter_meta + k];
        m.set_id(first_counter_meta + k);
        m.set_name(kCounterNames[k]);
      }
    }

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
        AddStat(mev->mutable_stats(), kRunId)->set_int64_value(cs.step);
        const int64_t step_meta = first_step_meta + (cs.step - first_step);
        auto& sm = metas[step_meta];
        sm.set_id(step_meta);
        sm.set_name(absl::StrCat(cs.step));
        XEvent* sev = step_line->add_events();
        sev->set_metadata_id(step_meta);
        sev->set_offset_ps(off);
        sev->set_duration_ps(dur);
      }
      for (const OpRun& run : cs.runs) {
        const int64_t t = step_ps + run.start_ps;
        if (t < true_start_ps || t >= true_end_ps) continue;
        const int64_t off = host_offset_ps(t) + device_shift_ps;
        const int64_t dur = clock.HostIntervalPs(run.duration_ps);
        XEvent* ev = xla_ops->add_events();
        ev->set_metadata_id(run.op + 1);
        ev->set_offset_ps(off);
        ev->set_duration_ps(dur);
        AddStat(ev->mutable_stats(), kDeviceOffsetPs)->set_uint64_value(static_cast<uint64_t>(off));
        // The device measures its own time: the true duration, free of host clock drift.
        AddStat(ev->mutable_stats(), kDeviceDurationPs)
            ->set_uint64_value(static_cast<uint64_t>(run.duration_ps));
        if (run.collective_id != 0) {
          AddStat(ev->mutable_stats(), kAllReduceUniqueId)->set_uint64_value(run.collective_id);
        }
        ++result.kernel_events;
        if (counters != nullptr) {
          const OpTemplate& op = ops[run.op];
          const double secs = static_cast<double>(run.duration_ps) * 1e-12;
          const double flop_share =
              secs > 0
                  ? std::min(1.0, static_cast<double>(op.flops) / (gen.peak_tflops * 1e12) / secs)
                  : 0;
          const double values[kCounterKinds] = {
              100 * flop_share, op.collective ? 5.0 : 100 * (1 - flop_share) * 0.6,
              static_cast<double>(op.bytes) * 0.6, static_cast<double>(op.bytes) * 0.4,
              std::max(0.0, secs * 1e9 * (1 - flop_share))};
          for (int k = 0; k < kCounterKinds; ++k) {
            XEvent* cev = counters->add_events();
            cev->set_metadata_id(first_counter_meta + k);
            cev->set_offset_ps(off);
            AddStat(cev->mutable_stats(), kCounterValue)->set_double_value(values[k]);
          }
        }
      }
    }
  }

  // The host's own view: the launch of every step on its Python thread, on the host clock.
  XPlane* host = space.add_planes();
  host->set_id(model.chips() + 1);
  host->set_name("/host:CPU");
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
  env->set_name("Task Environment");
  (*env->mutable_stat_metadata())[1].set_id(1);
  (*env->mutable_stat_metadata())[1].set_name("profile_start_time");
  (*env->mutable_stat_metadata())[2].set_id(2);
  (*env->mutable_stat_metadata())[2].set_name("profile_stop_time");
  AddStat(env->mutable_stats(), 1)->set_uint64_value(static_cast<uint64_t>(host_start_ns));
  AddStat(env->mutable_stats(), 2)
      ->set_uint64_value(static_cast<uint64_t>(clock.ToHost(window.true_end_ns)));
  return result;
}

}  // namespace podprof::sim
