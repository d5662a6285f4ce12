#include "export/xspace_export.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "export/plane_stats.h"
#include "trace/xspace_schema.h"

namespace podprof::exporter {
namespace {

namespace xp = tensorflow::profiler;
using trace::xspace::Stat;

// The stats of every device plane written, in the order of their metadata ids (1, 2, ...).
constexpr Stat kDeviceStats[] = {
    Stat::kDeviceTypeString, Stat::kPeakTeraflops, Stat::kPeakHbmBw,
    Stat::kHloCategory,      Stat::kFlops,         Stat::kBytesAccessed,
    Stat::kSource,           Stat::kProgramId,     Stat::kAllReduceUniqueId,
    Stat::kCounterValue,
};
// The stats of the Task Environment plane, likewise.
constexpr Stat kEnvironmentStats[] = {Stat::kProfileStartTime, Stat::kProfileStopTime};

constexpr exporter::PlaneStats kDevice(kDeviceStats);
constexpr exporter::PlaneStats kEnvironment(kEnvironmentStats);

}  // namespace

std::string XprofRunName(int64_t start_ns) {
  return absl::FormatTime("%Y_%m_%d_%H_%M_%S", absl::FromUnixNanos(start_ns), absl::UTCTimeZone());
}

tensorflow::profiler::XSpace ToXSpace(const trace::HostCapture& capture) {
  tensorflow::profiler::XSpace space;
  space.add_hostnames(capture.host.name);
  const int64_t origin = capture.host.profile_start_ns;
  bool gpu = false;
  for (const trace::EventBlock& b : capture.blocks) gpu |= b.kind == trace::LineKind::kGpuStream;
  const size_t chips = capture.host.chips.size();
  for (size_t ci = 0; ci < chips; ++ci) {
    const trace::Chip& chip = capture.host.chips[ci];
    xp::XPlane* plane = space.add_planes();
    plane->set_id(static_cast<int64_t>(ci) + 1);
    plane->set_name(absl::StrCat(
        gpu ? trace::xspace::kGpuPlanePrefix : trace::xspace::kTpuPlanePrefix, chip.ordinal));
    kDevice.Declare(plane);
    if (!chip.device_type.empty()) {
      kDevice.Add(plane->mutable_stats(), Stat::kDeviceTypeString)->set_str_value(chip.device_type);
    }
    if (chip.peak_tflops > 0) {
      kDevice.Add(plane->mutable_stats(), Stat::kPeakTeraflops)->set_double_value(chip.peak_tflops);
    }
    if (chip.peak_hbm_gbps > 0) {
      kDevice.Add(plane->mutable_stats(), Stat::kPeakHbmBw)->set_double_value(chip.peak_hbm_gbps);
    }
    // Metadata for the kernels this chip ran: id = index into capture.kernels + 1.
    auto& metas = *plane->mutable_event_metadata();
    auto kernel_meta = [&](uint32_t k) {
      const int64_t id = static_cast<int64_t>(k) + 1;
      auto [it, fresh] = metas.try_emplace(id);
      if (!fresh) return id;
      auto& m = it->second;
      m.set_id(id);
      const trace::KernelDef* d = k < capture.kernels.size() ? &capture.kernels[k] : nullptr;
      if (d == nullptr) return id;
      m.set_name(d->name);
      if (!d->category.empty() && d->category != "xla module") {
        kDevice.Add(m.mutable_stats(), Stat::kHloCategory)->set_str_value(d->category);
      }
      if (d->flops > 0) kDevice.Add(m.mutable_stats(), Stat::kFlops)->set_int64_value(d->flops);
      if (d->bytes_accessed > 0) {
        kDevice.Add(m.mutable_stats(), Stat::kBytesAccessed)->set_int64_value(d->bytes_accessed);
      }
      if (d->program_id != 0)
        kDevice.Add(m.mutable_stats(), Stat::kProgramId)->set_uint64_value(d->program_id);
      if (!d->source.empty())
        kDevice.Add(m.mutable_stats(), Stat::kSource)->set_str_value(d->source);
      return id;
    };
    // One xp::XLine per line name, its time the earliest of its blocks.
    std::map<std::string, std::vector<const trace::EventBlock*>> lines;
    for (const trace::EventBlock& b : capture.blocks) {
      if (b.chip == static_cast<int>(ci)) lines[b.line].push_back(&b);
    }
    int64_t line_id = 0;
    for (const auto& [name, blocks] : lines) {
      xp::XLine* line = plane->add_lines();
      line->set_id(++line_id);
      line->set_name(name);
      int64_t base = INT64_MAX;
      for (const trace::EventBlock* b : blocks) base = std::min(base, b->base_ns);
      line->set_timestamp_ns(origin > 0 ? base - origin : base);
      for (const trace::EventBlock* b : blocks) {
        const int64_t shift_ps = (b->base_ns - base) * 1000;
        for (size_t i = 0; i < b->size(); ++i) {
          xp::XEvent* ev = line->add_events();
          ev->set_metadata_id(kernel_meta(b->kernel[i]));
          ev->set_offset_ps(shift_ps + b->start_ps[i]);
          ev->set_duration_ps(b->duration_ps[i]);
          if (b->collective[i] != 0) {
            kDevice.Add(ev->mutable_stats(), Stat::kAllReduceUniqueId)
                ->set_uint64_value(b->collective[i]);
          }
        }
      }
    }
    // Counters: one `_counters_` line, an event per sample named after its counter.
    xp::XLine* counters = nullptr;
    int64_t counter_meta = static_cast<int64_t>(capture.kernels.size()) + 1;
    std::map<std::string, int64_t> counter_ids;
    for (const trace::CounterSeries& s : capture.counters) {
      if (s.chip != static_cast<int>(ci) || s.time_ns.empty()) continue;
      if (counters == nullptr) {
        counters = plane->add_lines();
        counters->set_id(++line_id);
        counters->set_name(std::string(trace::xspace::kCountersLine));
        counters->set_timestamp_ns(origin > 0 ? 0 : s.time_ns.front());
      }
      auto [it, fresh] = counter_ids.try_emplace(s.name, counter_meta);
      if (fresh) {
        auto& m = metas[counter_meta];
        m.set_id(counter_meta);
        m.set_name(s.name);
        ++counter_meta;
      }
      const int64_t line_ns = origin > 0 ? origin : counters->timestamp_ns();
      for (size_t i = 0; i < s.value.size(); ++i) {
        xp::XEvent* ev = counters->add_events();
        ev->set_metadata_id(it->second);
        ev->set_offset_ps((s.time_ns[i] - line_ns) * 1000);
        kDevice.Add(ev->mutable_stats(), Stat::kCounterValue)->set_double_value(s.value[i]);
      }
    }
  }
  xp::XPlane* env = space.add_planes();
  env->set_id(static_cast<int64_t>(chips) + 1);
  env->set_name(std::string(trace::xspace::kTaskEnvironmentPlane));
  kEnvironment.Declare(env);
  kEnvironment.Add(env->mutable_stats(), Stat::kProfileStartTime)
      ->set_uint64_value(static_cast<uint64_t>(origin));
  kEnvironment.Add(env->mutable_stats(), Stat::kProfileStopTime)
      ->set_uint64_value(static_cast<uint64_t>(capture.host.profile_stop_ns));
  return space;
}

}  // namespace podprof::exporter
