// Counter samples: the events of a device plane's counter lines. A sample that names a
// performance counter goes to the plane's perf/ series (trace/perf_samples.h), those of a
// `counters_<kernel>` line to that kernel's execution; an older-style sample (counter_value
// alone) to a series of its line and event.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "trace/perf_counters.h"
#include "trace/perf_samples.h"
#include "trace/xspace_reader_internal.h"
#include "trace/xspace_schema.h"

namespace podprof::trace::xspace_internal {
namespace {

// Each kernel a `counters_<kernel>` line of the plane names: its executions on the plane's
// kernel lines (blocks from `blocks_from`), absolute ns, in time order.
absl::flat_hash_map<std::string, std::vector<std::pair<int64_t, int64_t>>> KernelRuns(
    const ReaderState& r, const PlaneState& state, size_t blocks_from) {
  absl::flat_hash_map<std::string, std::vector<std::pair<int64_t, int64_t>>> runs;
  const absl::flat_hash_set<std::string> wanted = state.perf.ExecutionKernels();
  if (wanted.empty()) return runs;
  for (size_t b = blocks_from; b < r.capture.blocks.size(); ++b) {
    const EventBlock& block = r.capture.blocks[b];
    if (block.chip != state.chip || !IsKernelLine(block.kind)) continue;
    const int64_t base_ns = r.Absolute(block.base_ns);  // still the line's own time here
    for (size_t i = 0; i < block.size(); ++i) {
      const std::string& name = r.capture.kernels[block.kernel[i]].name;
      if (!wanted.contains(name)) continue;
      // Whole ns inside the execution.
      const int64_t begin_ps = block.start_ps[i], end_ps = begin_ps + block.duration_ps[i];
      runs[name].push_back({base_ns + (begin_ps + 999) / 1000, base_ns + end_ps / 1000});
    }
  }
  for (auto& [name, r] : runs) std::sort(r.begin(), r.end());
  return runs;
}

// A counter sample (counter_value, no performance_counter_id): series `<line>/<event>`,
// or `<event>` on `_counters_`.
void AddLineCounterSample(ReaderState& r, PlaneState* plane, const LineContext& ctx,
                          const EventFields& f) {
  // Series on `_counters_` are named by their event; elsewhere by line and event, since a
  // utilization line may name its samples after the unit only by the line.
  const bool own_line = plane->line_name == xspace::kCountersLine;
  size_t index = r.capture.counters.size();
  bool inserted;
  if (own_line) {
    auto [it, fresh] = plane->counter_of.try_emplace(f.metadata_id, index);
    index = it->second;
    inserted = fresh;
  } else {
    auto [it, fresh] = plane->line_counter_of.try_emplace({plane->line_name, f.metadata_id}, index);
    index = it->second;
    inserted = fresh;
  }
  if (inserted) {
    CounterSeries series;
    series.chip = plane->chip;
    auto meta = plane->metas.find(f.metadata_id);
    series.name =
        meta == plane->metas.end() ? absl::StrCat("counter_", f.metadata_id) : meta->second.name;
    if (!own_line) series.name = absl::StrCat(plane->line_name, "/", series.name);
    r.capture.counters.push_back(std::move(series));
    r.counter_line_ns.push_back(ctx.timestamp_ns);
  }
  CounterSeries& series = r.capture.counters[index];
  series.time_ns.push_back(f.offset_ps / 1000);  // Line start added in EndPlane().
  series.value.push_back(f.counter);
}

}  // namespace

void NoteDroppedTraces(ReaderState& r, const PlaneState& plane, int64_t n) {
  r.notes[r.capture.host.chips[plane.chip].ordinal].dropped_traces += n;
}

bool TakeCounterSample(ReaderState& r, PlaneState* plane, LineContext* ctx, EventFields* f) {
  // As XProf's tools read a counter: its id and value from the event, else from its metadata;
  // without an id, the metadata's id when that is a register of the chip's table.
  const EventMeta* meta = nullptr;
  if ((!f->has_perf_id || !f->has_counter) && plane->any_meta_perf_id) {
    auto it = plane->metas.find(f->metadata_id);
    if (it != plane->metas.end()) meta = &it->second;
  }
  if (!f->has_perf_id && meta != nullptr && meta->has_perf_id) {
    f->has_perf_id = true;
    f->perf_id = meta->perf_id;
  }
  if (!f->has_counter && meta != nullptr && meta->has_counter) {
    f->has_counter = true;
    f->counter = meta->counter;
  }
  const std::string& generation = r.capture.host.chips[plane->chip].generation;
  if (!f->has_perf_id && f->has_counter && f->metadata_id > 0 &&
      PerfCounterName(generation, static_cast<uint64_t>(f->metadata_id))) {
    f->has_perf_id = true;
    f->perf_id = static_cast<uint64_t>(f->metadata_id);
  }
  // An id of 0 is no register: XProf takes the metadata's id then too.
  if (f->has_perf_id && f->perf_id == 0) f->perf_id = static_cast<uint64_t>(f->metadata_id);
  if (f->has_perf_id) {
    if (!f->has_counter) {
      ++r.notes[r.capture.host.chips[plane->chip].ordinal].missing_values;
    } else if (ctx->execution) {
      const int64_t begin = ctx->absolute_ns + f->offset_ps / 1000;
      const int64_t end = ctx->absolute_ns + (f->offset_ps + f->duration_ps) / 1000;
      ExecutionCounts& e = ctx->counts;
      if (e.counts.empty() || begin < e.begin_ns) e.begin_ns = begin;
      if (e.counts.empty() || end > e.end_ns) e.end_ns = end;
      e.counts[f->perf_id] = f->counter;
    } else {
      plane->perf.Add(f->perf_id, ctx->absolute_ns + f->offset_ps / 1000, f->counter);
    }
    return true;
  }
  if (!f->has_counter) return false;
  AddLineCounterSample(r, plane, *ctx, *f);
  return true;
}

void FinishPerfSamples(ReaderState& r, PlaneState* state, size_t blocks_before) {
  if (state->perf.empty()) return;
  // A plane in pieces has handed its earlier kernels on: its `counters_<kernel>` lines keep
  // their own times then.
  if (!state->split) state->perf.PlaceExecutions(KernelRuns(r, *state, blocks_before));
  // Perf samples come from many lines and already hold absolute times: after the others'.
  const Chip& chip = r.capture.host.chips[state->chip];
  const size_t perf_from = r.capture.counters.size();
  state->perf.Finish(state->chip, chip.generation, r.options.perf_counter_scaling,
                     &r.capture.counters, &r.notes[chip.ordinal]);
  r.counter_line_ns.resize(r.capture.counters.size(), 0);
  for (size_t i = perf_from; i < r.counter_line_ns.size(); ++i) r.counter_line_ns[i] = kAbsolute;
}

}  // namespace podprof::trace::xspace_internal
