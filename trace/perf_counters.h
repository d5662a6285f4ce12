// TPU performance counters as the kernel-profiling captures of TPU7x (and the Perf Counters
// tool's end-of-profile snapshots) carry them: ids, names, and the series podprof keeps of them.
//
// A counter is identified by its `performance_counter_id`, the address of its register; the
// tables of v6e and v7x (trace/perf_counter_ids_*.inc, generated from XProf's published
// headers by scripts/gen-perf-counter-ids.py) give each id its register name. v7x's second die
// repeats the first's registers 0x20000000 higher; where the table lacks a die-1 name it is
// the die-0 twin's with DIE0 read DIE1. A sampled counter becomes one CounterSeries per
// (chip, counter), named kPerfSeriesPrefix plus the short name: the register name with its
// common infixes dropped, lower case
// ("VF_CHIP_DIE0_TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_UNPRIVILEGED_COUNT_MXU_BUSY_2" is
// "perf/die0_tc_mxu_busy_2"). Such a series is a running total (CounterKind::kCumulative):
// the reader undoes the packed width's wrap-around and the sampling's scaling.
//
// Sampling is requested per component (`tpu_<component>_perf_counter_sampling_options`) by
// counter index: the id is the component's first register plus 8 x index (ComponentCounterId).
#ifndef PODPROF_TRACE_PERF_COUNTERS_H_
#define PODPROF_TRACE_PERF_COUNTERS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace podprof::trace {

// v7x's second die repeats the first die's registers this much higher.
inline constexpr uint64_t kV7xDieStride = 0x20000000;

struct PerfCounterId {
  uint64_t id;
  const char* name;  // the register name, upper case, as in the published tables
};

// Series names of sampled performance counters start with this.
inline constexpr absl::string_view kPerfSeriesPrefix = "perf/";

// True for the name of a performance counter series.
bool IsPerfSeries(absl::string_view series_name);

// The counter table of a generation ("v6e", "v7x") as XProf publishes it, sorted by id (900
// and 2933 entries); empty for the others.
absl::Span<const PerfCounterId> PerfCounterTable(absl::string_view generation);

// The register name of `id` on `generation`: the table's, or on v7x, for a die-1 id the table
// lacks, its die-0 twin's (id - 0x20000000) with "_DIE0_" read "_DIE1_". nullopt when neither
// names it. The view stays valid for the life of the program.
std::optional<absl::string_view> PerfCounterName(absl::string_view generation, uint64_t id);

// "die0_tc_mxu_busy_2" for the register name above: "VF_CHIP_" and the statistics-block
// infixes dropped, lower case. Names of other shapes are only lower-cased.
std::string ShortPerfCounterName(absl::string_view register_name);

// The series name of counter `id` of `generation`: kPerfSeriesPrefix + its short name, or
// kPerfSeriesPrefix + "id_<id>" when the table lacks it.
std::string PerfSeriesName(absl::string_view generation, uint64_t id);

// The inverse of PerfSeriesName: the id of a perf series of `generation`; nullopt for other
// names.
std::optional<uint64_t> PerfSeriesId(absl::string_view generation, absl::string_view series_name);

// The components that sample counters (`tpu_<name>_perf_counter_sampling_options`).
inline constexpr absl::string_view kPerfComponents[] = {"tc", "scs", "sctc", "sctd", "cmn", "icr"};

// The id of counter `index` of `component` on die `die` of `generation`: the first register
// of the component's statistics block + 8 x index. The blocks are those XProf's
// docs/kernel-profiling.md names for each component ("Determining Counter Indices"), and a
// block's first register is the lowest id the table gives it (its counter 0):
//
//   tc    VF_CHIP_DIE0_TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_*  (v6e: VF_CHIP_TC_TCS_...)
//   scs   VF_CHIP_DIE0_SC_0_SCS_SC_STATS_COUNTERS_*                  (v6e: VF_CHIP_SC_0_SCS_...)
//   sctc  VF_CHIP_DIE0_SC_0_SCTC_0_SC_STATS_COUNTERS_*               (v7x only)
//   sctd  VF_CHIP_DIE0_SC_0_SCTD_0_SC_STATS_COUNTERS_*               (v7x only)
//   cmn   VF_CHIP_DIE0_CMN_CMNUR_0_CMN_STATS_DEBUG_FIXED_STATS_COUNTERS_*  (v7x only)
//   icr   VF_CHIP_CHIPLET_ICR_ICR_DATA_0_DEBUG_DOMAIN_ICR_DATA_STATS_PACKET_COUNTERS_*
//         (v7x only; the chiplet's, so die 0 only)
//
// Die 1 (v7x) is die 0's block + 0x20000000. The index is not bounded by what the table
// lists: a block may hold registers the best-effort table lacks. nullopt for a component the
// generation lacks, a die it does not have, a negative index, and generations before v6e.
std::optional<uint64_t> ComponentCounterId(absl::string_view generation,
                                           absl::string_view component, int die, int index);

// One component's sampling request: the value of `tpu_<component>_perf_counter_sampling_options`,
// a text-format message of space-separated `key:value` fields ("interval_us:1 scaling:0
// counter_size_bits:1 indices:10 indices:11").
struct SamplingOptions {
  // Sampling interval, us (>= 1); ignored with an external trigger.
  int64_t interval_us = 10000;
  // Sample when the runtime triggers it (custom calls, marked instructions), not on a timer.
  bool external_trigger = false;
  // Values are shifted right by this many bits (0-63) to fit the packed width.
  int scaling = 0;
  // Packed width of a value: 2^(counter_size_bits + 3) bits (0-3: 8, 16, 32 or 64).
  int counter_size_bits = 3;
  // Counter indices within the component.
  std::vector<int> indices;
};

// Parses the option's value; INVALID_ARGUMENT naming the field for an unknown key, a value
// out of range or malformed text.
absl::StatusOr<SamplingOptions> ParseSamplingOptions(absl::string_view text);
// The option's value, spelled as XProf documents it: `interval_us:N` (or
// `is_external_trigger:true`; neither when interval_us <= 0, leaving the workload's default),
// `scaling:S`, `counter_size_bits:B`, then `indices:I` per index.
std::string FormatSamplingOptions(const SamplingOptions& options);

// Undoes a sampled counter's packing: `raw` samples of a running total, each the low bits of
// the register shifted right by `scaling` bits, become the running total (as doubles, first
// sample as it is). The packed width is the narrowest of 8, 16, 32 and 64 bits that holds
// every raw sample: a decrease is a wrap at that width. (A counter that wrapped more than once
// between two samples cannot be told apart; the sampling interval has to prevent that.)
void UnwrapCounterSamples(int scaling, double* values, size_t n);

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_PERF_COUNTERS_H_
