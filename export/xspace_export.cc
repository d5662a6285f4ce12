#include "export/xspace_export.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "export/megascale_planes.h"
#include "export/nesting.h"
#include "export/plane_stats.h"
#include "trace/perf_counters.h"
#include "trace/xspace_schema.h"

namespace podprof::exporter {
namespace {

namespace xp = tensorflow::profiler;
using trace::xspace::Stat;

// The stats of every device plane written, in the order of their metadata ids (1, 2, ...):
// the chip's, its events' (shared with the simulated host) and the kernel-profiling ones.
constexpr Stat kChipStats[] = {Stat::kDeviceTypeString, Stat::kPeakTeraflops, Stat::kPeakHbmBw};
constexpr Stat kProfilingStats[] = {Stat::kPerformanceCounterId, Stat::kGlobalChipId,
                                    Stat::kSymbolId};
constexpr PlaneStats kDevice(kChipStats, kDeviceEventStats, kProfilingStats);
// A capture with host-transfer ops also says, on its sends, who sends to whom; appended, so the
// ids of the others are what they are without.
constexpr Stat kDcnStats[] = {Stat::kDcnCollectiveInfo};
constexpr PlaneStats kDcnDevice(kChipStats, kDeviceEventStats, kProfilingStats, kDcnStats);

// A line's start as the file stores it. XProf's loaders turn a line's start into ps (ns x 1000)
// in an int64, which ns since the epoch overflow; so, as the profiler's own post-processing
// does, line starts are relative to the profile start the Task Environment plane gives
// (INTEROP.md, "XProf session export"). A capture without a profile start keeps its own clock.
int64_t LineStart(int64_t ns, int64_t origin) { return origin > 0 ? ns - origin : ns; }

// The name of the lines holding performance counter samples, one line per sample (XProf's
// Perf Counters tool shows it as the sample's "Kernel"; podprof's reader takes any line name).
constexpr char kPerfSamplesLine[] = "Performance Counters";

// The register id of a perf series of `chip` (trace/perf_counters.h), written as XProf's
// kernel-profiling samples; nullopt for other series, and for perf series whose id the
// chip's generation does not give (they go on `_counters_` like any counter).
std::optional<uint64_t> PerfIdOf(const trace::Chip& chip, const trace::CounterSeries& s) {
  if (!trace::IsPerfSeries(s.name)) return std::nullopt;
  return trace::PerfSeriesId(chip.generation, s.name);
}

// One event of a line being written: its span in ps from the line's start, and its source.
struct LineEvent {
  int64_t begin, end;
  const trace::EventBlock* block;
  size_t index;
};

// Metadata for the kernels a chip ran: id = index into capture.kernels + 1, made on first use.
class KernelMetadata {
 public:
  KernelMetadata(const trace::HostCapture& capture, const PlaneStats& stats, xp::XPlane* plane)
      : capture_(capture), stats_(stats), metas_(*plane->mutable_event_metadata()) {}

  int64_t Of(uint32_t k) {
    const int64_t id = static_cast<int64_t>(k) + 1;
    auto [it, fresh] = metas_.try_emplace(id);
    if (!fresh) return id;
    auto& m = it->second;
    m.set_id(id);
    const trace::KernelDef* d = k < capture_.kernels.size() ? &capture_.kernels[k] : nullptr;
    if (d == nullptr) return id;
    m.set_name(d->name);
    // A host-transfer op as the profiler names it: its HLO text, shown by its instruction name
    // (what XProf's DCN analysis looks the instruction up by, and the rendezvous its Megascale
    // viewer reads from the text).
    if (IsHostTransferKernel(*d) && !d->hlo_text.empty()) {
      m.set_name(d->hlo_text);
      m.set_display_name(d->name);
      const std::string info = DcnCollectiveInfoOf(*d);
      if (!info.empty())
        stats_.Add(m.mutable_stats(), Stat::kDcnCollectiveInfo)->set_bytes_value(info);
    }
    if (!d->category.empty() && d->category != "xla module") {
      stats_.Add(m.mutable_stats(), Stat::kHloCategory)->set_str_value(d->category);
    }
    if (d->flops > 0) stats_.Add(m.mutable_stats(), Stat::kFlops)->set_int64_value(d->flops);
    if (d->bytes_accessed > 0) {
      stats_.Add(m.mutable_stats(), Stat::kBytesAccessed)->set_int64_value(d->bytes_accessed);
    }
    if (d->program_id != 0) {
      stats_.Add(m.mutable_stats(), Stat::kProgramId)->set_uint64_value(d->program_id);
      // XProf's op statistics (HLO Op Stats, Op Profile, Overview) count an op only with a
      // symbol id beside its program id, and key it by the two; without it they list no op at
      // all. The profiler's own ids are not kept, so each kernel's metadata id stands in: unique
      // in the capture, never 0 (the program's root, which XProf skips). Module runs carry no
      // op of their own.
      if (d->category != "xla module") {
        stats_.Add(m.mutable_stats(), Stat::kSymbolId)->set_uint64_value(static_cast<uint64_t>(id));
      }
    }
    if (!d->source.empty()) stats_.Add(m.mutable_stats(), Stat::kSource)->set_str_value(d->source);
    return id;
  }

 private:
  const trace::HostCapture& capture_;
  const PlaneStats& stats_;
  google::protobuf::Map<int64_t, xp::XEventMetadata>& metas_;
};

// One XLine from the blocks of one line name: starting at the earliest block's start, events in
// the order XProf sorts them (start, then longer first) and nested, the line's duration running
// to its last event's end.
void WriteLine(const std::string& name, const std::vector<const trace::EventBlock*>& blocks,
               int64_t origin, KernelMetadata* metadata, xp::XLine* line) {
  line->set_name(name);
  int64_t base = INT64_MAX;
  for (const trace::EventBlock* b : blocks) base = std::min(base, b->base_ns);
  std::vector<LineEvent> events;
  for (const trace::EventBlock* b : blocks) {
    const int64_t shift_ps = (b->base_ns - base) * 1000;
    for (size_t i = 0; i < b->size(); ++i) {
      const int64_t begin = shift_ps + b->start_ps[i];
      events.push_back({begin, begin + std::max<int64_t>(b->duration_ps[i], 0), b, i});
    }
  }
  std::stable_sort(events.begin(), events.end(), [](const LineEvent& a, const LineEvent& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  // Nested up to a ns of trimming; events that really overlap (an async copy running past the
  // next op) stay on the line whole, in start order, as the profiler writes concurrent events
  // itself ("Async XLA Ops").
  std::vector<LineEvent> overlapping = NestSpans(&events, kMaxTrimNs * 1000);
  if (!overlapping.empty()) {
    events.insert(events.end(), overlapping.begin(), overlapping.end());
    std::stable_sort(events.begin(), events.end(), [](const LineEvent& a, const LineEvent& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
    });
    // An event beside a concurrent one may still overrun it by a rounding step: trim that too.
    size_t latest = 0;  // the event seen so far that ends last
    for (size_t i = 1; i < events.size(); ++i) {
      LineEvent& prev = events[latest];
      const LineEvent& e = events[i];
      if (prev.end > e.begin && prev.end < e.end && prev.end - e.begin <= kMaxTrimNs * 1000) {
        prev.end = e.begin;
      }
      if (events[i].end > events[latest].end) latest = i;
    }
  }
  line->set_timestamp_ns(LineStart(base, origin));
  int64_t last_end = 0;
  for (const LineEvent& e : events) {
    xp::XEvent* ev = line->add_events();
    ev->set_metadata_id(metadata->Of(e.block->kernel[e.index]));
    ev->set_offset_ps(e.begin);
    ev->set_duration_ps(e.end - e.begin);
    if (e.block->collective[e.index] != 0) {
      kDevice.Add(ev->mutable_stats(), Stat::kAllReduceUniqueId)
          ->set_uint64_value(e.block->collective[e.index]);
    }
    last_end = std::max(last_end, e.end);
  }
  line->set_duration_ps(last_end);
}

// The chip's counters as one `_counters_` line, an event per sample named after its counter,
// starting at the first sample and lasting to the last.
void WriteCounters(const trace::HostCapture& capture, int chip, int64_t origin, int64_t first_meta,
                   xp::XPlane* plane, int64_t* line_id) {
  struct Sample {
    int64_t time_ns;
    int64_t meta;
    double value;
  };
  std::vector<Sample> samples;
  std::map<std::string, int64_t> meta_of;
  auto& metas = *plane->mutable_event_metadata();
  for (const trace::CounterSeries& s : capture.counters) {
    if (s.chip != chip || s.time_ns.empty()) continue;
    if (PerfIdOf(capture.host.chips[chip], s)) continue;  // WritePerfSamples' series
    auto [it, fresh] =
        meta_of.try_emplace(s.name, first_meta + static_cast<int64_t>(meta_of.size()));
    if (fresh) {
      metas[it->second].set_id(it->second);
      metas[it->second].set_name(s.name);
    }
    for (size_t i = 0; i < s.value.size(); ++i)
      samples.push_back({s.time_ns[i], it->second, s.value[i]});
  }
  if (samples.empty()) return;
  // In time order, as XProf's post-processing leaves every line; each counter's samples keep
  // theirs.
  std::stable_sort(samples.begin(), samples.end(),
                   [](const Sample& a, const Sample& b) { return a.time_ns < b.time_ns; });
  const int64_t start = samples.front().time_ns;
  xp::XLine* line = plane->add_lines();
  line->set_id(++*line_id);
  line->set_name(std::string(trace::xspace::kCountersLine));
  line->set_timestamp_ns(LineStart(start, origin));
  line->set_duration_ps((samples.back().time_ns - start) * 1000);
  for (const Sample& s : samples) {
    xp::XEvent* ev = line->add_events();
    ev->set_metadata_id(s.meta);
    ev->set_offset_ps((s.time_ns - start) * 1000);
    kDevice.Add(ev->mutable_stats(), Stat::kCounterValue)->set_double_value(s.value);
  }
}

// The chip's perf series as XProf's kernel-profiling captures hold them, so that its Perf
// Counters tool and Utilization Viewer read them: a line per sample instant (its id the sample
// number, 0 up), an event per counter sampled then, named by the register's lower-case name
// ("id_<id>" for one the table lacks), with `performance_counter_id` and `counter_value`
// (uint64: the unwrapped running total). Event metadata ids from `first_meta`. Returns the
// number of sample lines.
int64_t WritePerfSamples(const trace::HostCapture& capture, int chip, int64_t origin,
                         int64_t first_meta, xp::XPlane* plane) {
  struct Sample {
    int64_t meta;
    uint64_t id;
    double value;
  };
  std::map<int64_t, std::vector<Sample>> at;  // sample instant (ns) -> its counters
  auto& metas = *plane->mutable_event_metadata();
  const trace::Chip& c = capture.host.chips[chip];
  int64_t next_meta = first_meta;
  for (const trace::CounterSeries& s : capture.counters) {
    if (s.chip != chip) continue;
    const std::optional<uint64_t> id = PerfIdOf(c, s);
    if (!id || s.time_ns.empty()) continue;
    const int64_t meta = next_meta++;
    metas[meta].set_id(meta);
    const std::optional<absl::string_view> reg = trace::PerfCounterName(c.generation, *id);
    metas[meta].set_name(reg ? absl::AsciiStrToLower(*reg) : absl::StrCat("id_", *id));
    for (size_t i = 0; i < s.value.size(); ++i) at[s.time_ns[i]].push_back({meta, *id, s.value[i]});
  }
  int64_t sample = 0;
  for (const auto& [time_ns, samples] : at) {
    xp::XLine* line = plane->add_lines();
    line->set_id(sample++);
    line->set_name(kPerfSamplesLine);
    line->set_timestamp_ns(LineStart(time_ns, origin));
    for (const Sample& s : samples) {
      xp::XEvent* ev = line->add_events();
      ev->set_metadata_id(s.meta);
      ev->set_offset_ps(0);
      kDevice.Add(ev->mutable_stats(), Stat::kPerformanceCounterId)->set_uint64_value(s.id);
      kDevice.Add(ev->mutable_stats(), Stat::kCounterValue)
          ->set_uint64_value(s.value > 0 ? static_cast<uint64_t>(std::llround(s.value)) : 0);
    }
  }
  return sample;
}

// A chip's plane: its identity and peaks as plane stats, its lines, its counters. `stats`:
// kDevice, or kDcnDevice for a capture with host-transfer ops (the stats kDevice lists have the
// same ids in both, so the line writers add them through kDevice).
void WriteChipPlane(const trace::HostCapture& capture, int ci, bool gpu, const PlaneStats& stats,
                    xp::XPlane* plane) {
  const trace::Chip& chip = capture.host.chips[ci];
  const int64_t origin = capture.host.profile_start_ns;
  plane->set_id(static_cast<int64_t>(ci) + 1);
  // The CPU device of JAX on CPU is known by its device type, which travels with the chip.
  const absl::string_view prefix = chip.device_type == trace::kCpuDeviceType
                                       ? trace::xspace::kCpuPlanePrefix
                                   : gpu ? trace::xspace::kGpuPlanePrefix
                                         : trace::xspace::kTpuPlanePrefix;
  plane->set_name(absl::StrCat(prefix, chip.ordinal));
  stats.Declare(plane);
  if (!chip.device_type.empty()) {
    kDevice.Add(plane->mutable_stats(), Stat::kDeviceTypeString)->set_str_value(chip.device_type);
  }
  if (chip.peak_tflops > 0) {
    kDevice.Add(plane->mutable_stats(), Stat::kPeakTeraflops)->set_double_value(chip.peak_tflops);
  }
  if (chip.peak_hbm_gbps > 0) {
    kDevice.Add(plane->mutable_stats(), Stat::kPeakHbmBw)->set_double_value(chip.peak_hbm_gbps);
  }
  // XProf's Perf Counters tool names the chip by it (and skips a plane without it).
  if (chip.global_id >= 0) {
    kDevice.Add(plane->mutable_stats(), Stat::kGlobalChipId)
        ->set_uint64_value(static_cast<uint64_t>(chip.global_id));
  }
  // Sample lines first: their ids are the sample numbers, the other lines' ids follow.
  const int64_t kernels_meta = static_cast<int64_t>(capture.kernels.size()) + 1;
  const int64_t counters_meta = kernels_meta + static_cast<int64_t>(capture.counters.size());
  int64_t line_id = WritePerfSamples(capture, ci, origin, counters_meta, plane);
  KernelMetadata metadata(capture, stats, plane);
  // One XLine per line name.
  std::map<std::string, std::vector<const trace::EventBlock*>> lines;
  for (const trace::EventBlock& b : capture.blocks) {
    if (b.chip == ci) lines[b.line].push_back(&b);
  }
  for (const auto& [name, blocks] : lines) {
    xp::XLine* line = plane->add_lines();
    line->set_id(++line_id);
    WriteLine(name, blocks, origin, &metadata, line);
  }
  WriteCounters(capture, ci, origin, kernels_meta, plane, &line_id);
}

}  // namespace

std::string XprofRunName(int64_t start_ns) {
  return absl::FormatTime("%Y_%m_%d_%H_%M_%S", absl::FromUnixNanos(start_ns), absl::UTCTimeZone());
}

void ForEachXPlane(const trace::HostCapture& capture,
                   const std::function<bool(tensorflow::profiler::XPlane*)>& visit) {
  bool gpu = false;
  for (const trace::EventBlock& b : capture.blocks) gpu |= b.kind == trace::LineKind::kGpuStream;
  const bool dcn = HasHostTransferKernels(capture);
  const int chips = static_cast<int>(capture.host.chips.size());
  for (int ci = 0; ci < chips; ++ci) {
    xp::XPlane plane;
    WriteChipPlane(capture, ci, gpu, dcn ? kDcnDevice : kDevice, &plane);
    if (!visit(&plane)) return;
  }
  xp::XPlane env;
  env.set_id(static_cast<int64_t>(chips) + 1);
  env.set_name(std::string(trace::xspace::kTaskEnvironmentPlane));
  kTaskEnvironment.Declare(&env);
  kTaskEnvironment.Add(env.mutable_stats(), Stat::kProfileStartTime)
      ->set_uint64_value(static_cast<uint64_t>(capture.host.profile_start_ns));
  kTaskEnvironment.Add(env.mutable_stats(), Stat::kProfileStopTime)
      ->set_uint64_value(static_cast<uint64_t>(capture.host.profile_stop_ns));
  if (!visit(&env) || !dcn) return;
  // What XProf's megascale_stats reads of a host beside its TPU:0 plane (megascale_planes.h).
  xp::XPlane metadata;
  if (!WriteHostMetadataPlane(capture, static_cast<int64_t>(chips) + 3, &metadata)) return;
  xp::XPlane host;
  WriteMegaScaleHostPlane(static_cast<int64_t>(chips) + 2, &host);
  if (!visit(&host)) return;
  visit(&metadata);
}

tensorflow::profiler::XSpace ToXSpace(const trace::HostCapture& capture) {
  tensorflow::profiler::XSpace space;
  space.add_hostnames(capture.host.name);
  ForEachXPlane(capture, [&](xp::XPlane* plane) {
    space.add_planes()->Swap(plane);
    return true;
  });
  return space;
}

uint64_t XSpaceByteSize(const trace::HostCapture& capture) {
  using google::protobuf::internal::WireFormatLite;
  uint64_t bytes = 0;
  ForEachXPlane(capture, [&](xp::XPlane* plane) {
    bytes += WireFormatLite::TagSize(1, WireFormatLite::TYPE_MESSAGE) +
             WireFormatLite::LengthDelimitedSize(plane->ByteSizeLong());
    return true;
  });
  return bytes + WireFormatLite::TagSize(4, WireFormatLite::TYPE_STRING) +
         WireFormatLite::StringSize(capture.host.name);
}

bool WriteXSpace(const trace::HostCapture& capture, std::ostream* out) {
  using google::protobuf::internal::WireFormatLite;
  bool ok = true;
  {
    google::protobuf::io::OstreamOutputStream raw(out);
    google::protobuf::io::CodedOutputStream coded(&raw);
    // XSpace.planes (field 1), one length-delimited record per plane, as SerializeToOstream
    // writes them; only this plane is in memory.
    ForEachXPlane(capture, [&](xp::XPlane* plane) {
      const size_t size = plane->ByteSizeLong();  // caches the sizes SerializeWithCachedSizes uses
      if (size > static_cast<size_t>(INT_MAX)) return ok = false;  // beyond protobuf's 2 GiB
      WireFormatLite::WriteTag(1, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, &coded);
      coded.WriteVarint32(static_cast<uint32_t>(size));
      plane->SerializeWithCachedSizes(&coded);
      return ok = !coded.HadError();
    });
    // XSpace.hostnames (field 4) after the planes, in field order as protobuf writes them.
    if (ok) WireFormatLite::WriteString(4, capture.host.name, &coded);
    ok = ok && !coded.HadError();
  }  // the coded and raw streams flush into `out` here
  return ok && out->good();
}

}  // namespace podprof::exporter
