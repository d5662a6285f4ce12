#include "kernelprof/capture_check.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "kernelprof/options.h"
#include "trace/chip_catalog.h"
#include "trace/perf_counters.h"

namespace podprof::kernelprof {
namespace {

// Index i of a component is its statistics block's first register + 8 x i
// (trace::ComponentCounterId); an id the tables do not name counts for a block up to this index.
constexpr uint64_t kCounterStride = 8;
constexpr uint64_t kMaxUnnamedIndex = 1024;
// The dies a chip may have (v7x: two).
constexpr int kMaxDies = 2;

// The register-name prefix of a statistics block: its counter 0's name up to "_COUNTERS_"
// ("VF_CHIP_DIE0_SC_0_SCS_SC_STATS_COUNTERS_"); empty when the table does not name it.
std::string BlockPrefix(absl::string_view generation, uint64_t first) {
  std::optional<absl::string_view> name = trace::PerfCounterName(generation, first);
  if (!name) return "";
  constexpr absl::string_view kCounters = "_COUNTERS_";
  const size_t at = name->find(kCounters);
  return at == absl::string_view::npos ? "" : std::string(name->substr(0, at + kCounters.size()));
}

// A statistics block of `component` on `generation`, both dies: the series names of the
// registers the table gives it, and the ids of its counters 0.
struct ComponentSeries {
  std::set<std::string> names;
  std::vector<uint64_t> firsts;
};

ComponentSeries SeriesOfComponent(absl::string_view generation, absl::string_view component) {
  ComponentSeries out;
  for (int die = 0; die < kMaxDies; ++die) {
    const std::optional<uint64_t> first = trace::ComponentCounterId(generation, component, die, 0);
    if (!first) continue;
    out.firsts.push_back(*first);
    const std::string prefix = BlockPrefix(generation, *first);
    if (prefix.empty()) continue;
    for (const trace::PerfCounterId& c : trace::PerfCounterTable(generation)) {
      // The table lists v7x's die 1 only in part: its twin of each die-0 register too.
      for (uint64_t id : {c.id, c.id + trace::kV7xDieStride}) {
        if (id != c.id && generation != "v7x") continue;
        std::optional<absl::string_view> name = trace::PerfCounterName(generation, id);
        if (name && absl::StartsWith(*name, prefix)) {
          out.names.insert(trace::PerfSeriesName(generation, id));
        }
      }
    }
  }
  return out;
}

// Whether one of `series` counts a register of `component`: a name of its block, or an id the
// table does not name ("perf/id_N") at a counter's place in it.
bool InComponent(const ComponentSeries& component, const std::set<std::string>& series) {
  for (const std::string& name : series) {
    if (component.names.count(name) > 0) return true;
    absl::string_view rest = name;
    uint64_t id;
    if (!absl::ConsumePrefix(&rest, trace::kPerfSeriesPrefix) ||
        !absl::ConsumePrefix(&rest, "id_") || !absl::SimpleAtoi(rest, &id)) {
      continue;
    }
    for (uint64_t first : component.firsts) {
      if (id >= first && (id - first) % kCounterStride == 0 &&
          (id - first) / kCounterStride < kMaxUnnamedIndex) {
        return true;
      }
    }
  }
  return false;
}

std::string Generation(const CaptureHolds& holds, int chip) {
  return chip >= 0 && chip < static_cast<int>(holds.chips.size()) ? holds.chips[chip].generation
                                                                  : "";
}

// Kernel profiling asked, no counter at all: a chip that cannot sample them says why, else the
// workload sent none.
std::string NoCounters(const CaptureHolds& holds) {
  for (const trace::Chip& chip : holds.chips) {
    const trace::ChipGeneration* g = trace::FindGenerationByName(chip.generation);
    if (g == nullptr || !g->kernel_profiling) {
      return absl::StrCat(
          "asked for kernel profiling; the capture holds no performance counter samples: chip ",
          chip.ordinal, " is ",
          chip.device_type.empty() ? "of an unknown generation" : chip.device_type,
          ", and counters are sampled inside kernels on TPU7x and later only");
    }
  }
  return "asked for kernel profiling; the capture holds no performance counter samples (the "
         "workload's profiler sent none: is its runtime new enough to sample them?)";
}

bool SetPresent(absl::string_view set, const CaptureHolds& holds) {
  for (const std::string& component : CounterSetComponents(set)) {
    std::map<std::string, ComponentSeries> by_generation;  // chips share their generation
    for (const auto& [chip, series] : holds.perf_series) {
      const std::string generation = Generation(holds, chip);
      auto it = by_generation.find(generation);
      if (it == by_generation.end()) {
        it = by_generation.emplace(generation, SeriesOfComponent(generation, component)).first;
      }
      if (InComponent(it->second, series)) return true;
    }
  }
  return false;
}

bool IndexPresent(absl::string_view component, uint32_t index, const CaptureHolds& holds) {
  for (const auto& [chip, series] : holds.perf_series) {
    const std::string generation = Generation(holds, chip);
    for (int die = 0; die < kMaxDies; ++die) {
      const std::optional<uint64_t> id =
          trace::ComponentCounterId(generation, component, die, static_cast<int>(index));
      if (id && series.count(trace::PerfSeriesName(generation, *id)) > 0) return true;
    }
  }
  return false;
}

// "asked for tc counters 10, 11, 56; the capture holds 10, 11, not 56"; empty when all are held.
std::string MissingIndices(const v1::CaptureOptions::ComponentCounters& asked,
                           const CaptureHolds& holds) {
  std::vector<uint32_t> held, missing;
  for (uint32_t i : asked.indices()) {
    (IndexPresent(asked.component(), i, holds) ? held : missing).push_back(i);
  }
  if (missing.empty()) return "";
  const std::string head = absl::StrCat("asked for ", asked.component(), " counters ",
                                        absl::StrJoin(asked.indices(), ", "), "; the capture ");
  if (held.empty()) return absl::StrCat(head, "holds none of them");
  return absl::StrCat(head, "holds ", absl::StrJoin(held, ", "), ", not ",
                      absl::StrJoin(missing, ", "));
}

void CheckCounters(const v1::CaptureOptions& asked, const CaptureHolds& holds,
                   std::vector<std::string>* out) {
  if (!asked.kernel_profiling()) return;
  if (holds.perf_series.empty()) {
    out->push_back(NoCounters(holds));
    return;
  }
  for (const std::string& set : asked.counter_sets()) {
    if (!SetPresent(set, holds)) {
      out->push_back(absl::StrCat("asked for ", set, " counters; the capture holds none"));
    }
  }
  for (const auto& c : asked.counters()) {
    if (std::string w = MissingIndices(c, holds); !w.empty()) out->push_back(std::move(w));
  }
}

void CheckDevice(const v1::CaptureOptions& asked, const CaptureHolds& holds,
                 std::vector<std::string>* out) {
  if (!asked.has_device_tracer_level() || asked.device_tracer_level() == 0) return;
  const int planes = static_cast<int>(
      std::count_if(holds.chips.begin(), holds.chips.end(),
                    [](const trace::Chip& c) { return c.kind != trace::DeviceKind::kCpu; }));
  const std::string head = absl::StrCat("asked for device tracing (device tracer level ",
                                        asked.device_tracer_level(), "); the capture ");
  if (planes == 0) {
    out->push_back(absl::StrCat(head, "holds no TPU or GPU plane"));
  } else if (holds.device_events == 0) {
    out->push_back(absl::StrCat(head, "holds no device event (", planes, " device planes)"));
  }
}

void CheckHost(const v1::CaptureOptions& asked, const CaptureHolds& holds,
               std::vector<std::string>* out) {
  if (!holds.host_planes) return;
  const trace::HostPlanes& host = *holds.host_planes;
  if (asked.host_tracer_level() > 0 && !host.thread_events) {
    out->push_back(absl::StrCat("asked for host tracing (host tracer level ",
                                asked.host_tracer_level(), "); the capture holds ",
                                host.host_plane ? "no host-thread event" : "no /host:CPU plane"));
  }
  if (asked.python_tracer_level() > 0 && !host.python_events) {
    out->push_back(absl::StrCat("asked for Python tracing (python tracer level ",
                                asked.python_tracer_level(),
                                "); the capture holds no Python event"));
  }
}

}  // namespace

std::vector<std::string> MissingFromCapture(absl::string_view host, const v1::CaptureOptions& asked,
                                            const CaptureHolds& holds) {
  std::vector<std::string> out;
  CheckDevice(asked, holds, &out);
  CheckHost(asked, holds, &out);
  CheckCounters(asked, holds, &out);
  for (std::string& w : out) w = absl::StrCat(host, ": ", w);
  return out;
}

}  // namespace podprof::kernelprof
