// The rows the store takes and gives: a capture to write (analysed beforehand by ingest/), and
// what its queries answer. Plain data.
#ifndef PODPROF_STORAGE_ROWS_H_
#define PODPROF_STORAGE_ROWS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "trace/analysis_rows.h"
#include "trace/clock_correction.h"
#include "trace/ddsketch.h"
#include "trace/kernel_stats.h"
#include "trace/model.h"

namespace podprof::storage {

// The states a capture, a host's part in it and a capture's origin are in, with the one table
// of their names: the names are what the store keeps (captures.status, capture_hosts.status,
// captures.source) and what the metrics, the HTTP API and the fleet store show.

// A capture's state.
enum class CaptureState { kRunning, kComplete, kPartial, kFailed, kCancelled, kInterrupted };
inline constexpr CaptureState kCaptureStates[] = {
    CaptureState::kRunning, CaptureState::kComplete,  CaptureState::kPartial,
    CaptureState::kFailed,  CaptureState::kCancelled, CaptureState::kInterrupted};
// "running", "complete", "partial", "failed", "cancelled", "interrupted".
const char* CaptureStateName(CaptureState s);
// The state of that name; none for any other text.
std::optional<CaptureState> CaptureStateNamed(std::string_view name);

// How a host's part of a capture ended.
enum class HostOutcome { kComplete, kFailed };
// "complete", "failed".
const char* HostOutcomeName(HostOutcome o);
std::optional<HostOutcome> HostOutcomeNamed(std::string_view name);

// Where a capture's data came from: a capture of live agents, XSpace files imported (hosts
// on their own clocks), or a snapshot of the agents' flight recorders (the window before it).
enum class CaptureSource { kCapture, kImport, kSnapshot };
// "capture", "import", "snapshot".
const char* CaptureSourceName(CaptureSource s);
std::optional<CaptureSource> CaptureSourceNamed(std::string_view name);

// ---- Writing: a capture's rows, computed before the write transaction.

// One timeline as stored: a chip's line, its events encoded by EncodeTimeline with the host's
// kernel numbers (trace::HostKernelNumbers), as its agent sent it or as encoded on ingest.
struct EncodedBlock {
  int chip = 0;  // index into HostWrite::chips
  std::string line;
  int64_t base_ns = 0;  // aggregator clock
  int64_t events = 0;
  std::string data;
};

// One counter series as stored, encoded by EncodeCounters.
struct EncodedSeries {
  int chip = 0;  // index into HostWrite::chips
  std::string name;
  int64_t samples = 0;
  std::string data;
};

// One chip's statistics of one kernel as stored. The sketch is serialized at once: a few dozen
// bytes, where the DDSketch it came from keeps a bin per 2% of its range (a kilobyte or more),
// and a pod's hosts wait for the pod in this form.
struct StatWrite {
  int chip = 0;         // index into HostWrite::chips
  uint32_t kernel = 0;  // index into HostWrite::kernel_ids
  int64_t count = 0;
  int64_t total_ps = 0, min_ps = 0, max_ps = 0;
  std::string sketch;  // DDSketch::Serialize
};

// One host's part of a capture, analysed and encoded before the write: the writer only inserts
// these rows (the ingest pipeline, ingest/, makes them).
struct HostWrite {
  std::string host;
  // The slice of a multi-slice job the host was in when captured (its agent's HostInfo.slice);
  // -1: its agent knew none.
  int slice = -1;
  HostOutcome status = HostOutcome::kComplete;
  std::string error;
  int64_t clock_offset_ns = 0;
  int64_t clock_uncertainty_ns = 0;
  // With `host_clock`, the timelines and counters below are on the host's own clock and
  // readers put them on the aggregator's with (clock_offset_ns, clock_drift_ppb about
  // clock_mid_ns); without it they are on the aggregator's clock already.
  bool host_clock = false;
  double clock_drift_ppb = 0;
  int64_t clock_mid_ns = 0;
  uint64_t bytes = 0;
  int64_t events = 0;
  // "agent" or "aggregator": where the host's capture was analysed; empty when it delivered
  // nothing.
  std::string analysed_by;
  // What the host's agent (or the reader of an imported file) warned of: a snapshot's runtime
  // status, a window shorter than asked, ...
  std::vector<std::string> warnings;
  std::vector<trace::Chip> chips;
  // The capture's kernel index -> kernels.id, from ResolveKernels; stored as the host's kernel
  // map, which its timelines (kernels numbered index + 1, trace::HostKernelNumbers) are read
  // through.
  std::vector<int64_t> kernel_ids;
  // Per chip and kernel (indices into `chips` and `kernel_ids`).
  std::vector<StatWrite> stats;
  std::vector<trace::KernelCounter> attributions;
  // Time in named scopes inside kernels (insight::AttributeScopes).
  std::vector<trace::KernelScope> scopes;
  std::vector<EncodedBlock> timelines;
  std::vector<EncodedSeries> counters;
  // The chips' rows when CaptureWriter::WriteHostData inserted the chips, timelines, counters and
  // attributions ahead of the capture (by chip index); empty when they are inserted with it.
  std::vector<int64_t> chip_rows;
};

// The waiting of one kernel (kernels.id) on one chip (`chip` of hosts[host]) at collectives.
struct WaitWrite {
  size_t host = 0;
  int chip = 0;
  int64_t kernel_id = 0;
  int64_t wait_ps = 0, instances = 0;
  std::string straggler;
};

// Pod-wide roll-ups of one kernel (kernels.id).
struct KernelRollupWrite {
  int64_t kernel_id = 0;
  trace::KernelStats stats;  // merged over every chip
  int64_t chips = 0;
  // The chips' peaks, each weighted by the time the kernel ran there (summed peak x ps): the
  // row's peak is what its chips offered while it ran, whatever other chips the capture has.
  double peak_tflops_ps = 0, peak_hbm_gbps_ps = 0;
};
struct CounterRollupWrite {
  int64_t kernel_id = 0;
  std::string name;
  bool cumulative = false;
  double integral = 0;
  int64_t covered_ps = 0;
};
struct WaitRollupWrite {
  int64_t kernel_id = 0;
  int64_t wait_ps = 0, instances = 0;
  std::string straggler;
};

struct CaptureWrite {
  std::string id;
  int64_t start_ns = 0;  // aggregator clock
  int64_t end_ns = 0;
  CaptureState state = CaptureState::kComplete;
  std::map<std::string, std::string> labels;
  std::string options_json = "{}";
  CaptureSource source = CaptureSource::kCapture;
  int64_t created_ns = 0;
  std::vector<HostWrite> hosts;
  std::vector<KernelRollupWrite> rollups;
  // Collective instances whose arrivals could not be one execution, left out of the waits.
  int64_t collectives_left_out = 0;
  std::string collectives_left_out_example;
  std::vector<CounterRollupWrite> counter_rollups;
  std::vector<WaitWrite> waits;
  std::vector<WaitRollupWrite> wait_rollups;
  std::vector<trace::StragglerRow> stragglers;
  std::vector<trace::InstanceRow> worst;  // worst first
};

// ---- Reading: what queries answer, and what they are asked.

struct HostRow {
  std::string host, error;
  HostOutcome status = HostOutcome::kComplete;
  int64_t clock_offset_ns = 0, clock_uncertainty_ns = 0, events = 0;
  // Whether the host's timelines and counters are stored on its own clock (see HostWrite),
  // and the correction readers apply to them.
  bool host_clock = false;
  trace::ClockCorrection correction;
  std::string analysed_by;            // HostWrite::analysed_by
  std::vector<std::string> warnings;  // HostWrite::warnings
  int slice = -1;                     // HostWrite::slice
};

struct CaptureRow {
  std::vector<HostRow> host_rows;
  std::string id;
  int64_t start_ns = 0, end_ns = 0, created_ns = 0;
  CaptureState status = CaptureState::kComplete;
  CaptureSource source = CaptureSource::kCapture;
  std::map<std::string, std::string> labels;
  // The options the capture was started with, as stored (captures.options): a JSON object.
  std::string options_json = "{}";
  int64_t hosts = 0, chips = 0, kernels = 0, events = 0;
};

// One host of a stored capture as exports need it: its outcome and correction, and its capture
// rebuilt from the database (chips, the kernel definitions its events use, timelines and
// counters), with times on the aggregator's clock (unless HostSelection::own_clock). Failed
// hosts have no chips.
struct StoredHost {
  HostRow row;
  trace::HostCapture capture;
};

// Which hosts and chips of a capture CaptureQueries::ForEachHost reads.
struct HostSelection {
  std::set<std::string> hosts;  // by name; empty for every host
  std::set<int> chip_ordinals;  // empty for every chip
  // Timelines of these kinds only; empty for every line. The others are not read at all.
  std::set<trace::LineKind> line_kinds;
  // False: no timeline at all (what reads only counters).
  bool timelines = true;
  // When set, only these counter series come with their samples; the rest are listed by name
  // with none (not read past their row).
  std::optional<std::set<std::string>> counter_samples;
  // And the series whose names start with one of these, whatever counter_samples says (a view
  // that needs a family of series, `megascale/...`, whose names it cannot know beforehand).
  std::vector<std::string> counter_sample_prefixes;
  // With the kernels' HLO text (KernelDef::hlo_text), which what parses instructions needs
  // (insight/dcn.h); exports leave it out.
  bool kernel_texts = false;
  // Leaves a host stored on its own clock (HostRow::host_clock) there, for what must see the
  // host's own times (XProf's per-host figures) and applies HostRow::correction itself; hosts
  // stored on the aggregator's clock stay on it.
  bool own_clock = false;
};

// How much one chip of a stored capture holds.
struct ChipVolume {
  std::string host;
  int ordinal = 0;
  int64_t events = 0;  // timeline events on every line
  int64_t counter_samples = 0;
};

struct CaptureQuery {
  int64_t since_ns = 0;
  int64_t until_ns = INT64_MAX;
  std::optional<CaptureState> status;  // none = any
  std::map<std::string, std::string> labels;
  std::string id;  // empty = any
  int limit = 100;
  std::string page_token;
};

enum class Grouping { kKernel, kChip, kHost, kCategory };
enum class Order { kTotal, kMean, kP99, kCount };

struct KernelKey {
  int64_t id = 0;
  std::string module, op_name, category, source;
  uint64_t program_id = 0, hlo_hash = 0;
  int64_t flops = 0, bytes_accessed = 0;
};

struct StatsQuery {
  std::string capture_id;
  Grouping group_by = Grouping::kKernel;
  std::string op_regex;  // RE2 (common/pattern.h), partial match; empty = all
  std::string category;
  std::string host;
  std::optional<int> chip;
  Order order = Order::kTotal;
  int top = 0;  // 0 = all
};

struct StatRow {
  std::string host;  // empty when merged over hosts
  int chip = -1;     // -1 when merged over chips
  KernelKey kernel;  // for kCategory only `category` is set
  int64_t count = 0, total_ps = 0, min_ps = 0, max_ps = 0;
  trace::DDSketch sketch;
  int64_t chips = 0;
  double peak_tflops = 0, peak_hbm_gbps = 0;  // mean over the rows' chips
};

// What a capture's counters and collectives say of one kernel, on one chip or over the pod.
struct KernelInsightRow {
  std::string host;  // empty when merged over the pod
  int chip = -1;     // -1 when merged over chips
  int64_t kernel_id = 0;
  // Gauges (busy and stall fractions): each one's level integrated over the kernel's
  // executions (level x ps) and the ps it covered, as stored; their means are insight's
  // (insight::GaugeMeans).
  std::map<std::string, std::pair<double, int64_t>> gauge_integrals;
  // Running totals: the increase over its executions (energy in nJ, cycles, bytes).
  std::map<std::string, double> totals;
  int64_t covered_ps = 0;  // the kernel's time the counters covered (the widest series)
  int64_t wait_ps = 0;     // waiting in collectives for later chips
  int64_t wait_instances = 0;
  std::string straggler;  // who it waited for most often
  // The chip's generation ("v7x"; over the pod, the capture's first chip's), and the time the
  // kernel's cores spent in SyncWait scopes inside it, ps.
  std::string generation;
  int64_t sync_wait_ps = 0;
};

// The time a kernel spent in one named scope inside it (kernel_scopes), summed over the pod.
struct KernelScopeRow {
  std::string line, name;
  int64_t count = 0;
  int64_t total_ps = 0;
};

// Which scopes a query asks for: kernel_scopes rows on timeline line `line` named `name`.
struct ScopeName {
  std::string line, name;
};

// A kernel's identity as stored, with its texts.
struct KernelIdentity {
  KernelKey key;
  std::string hlo_text, tf_op, source_stack, mlir;
};

// Who made the others wait at a capture's collectives, as insight/ found it when the capture
// was stored.
struct StragglerReport {
  std::vector<trace::StragglerRow> chips;     // most waiting caused first
  std::vector<trace::InstanceRow> instances;  // worst first
  // Instances left out as not one collective (insight::CollectiveReport::left_out).
  int64_t left_out = 0;
  std::string left_out_example;
};

struct HistoryQuery {
  std::string module;  // empty = any
  std::string op_regex;
  int64_t since_ns = 0;
  int64_t until_ns = INT64_MAX;
  int max_kernels = 20;
};

struct HistoryPoint {
  std::string capture_id;
  int64_t start_ns = 0;
  int64_t count = 0, total_ps = 0, chips = 0;
  trace::DDSketch sketch;
  // Each kernel row's flops per execution times its executions, summed over the rows the point
  // merges (insight::AchievedTflops turns it into a rate over total_ps).
  double flops_executed = 0;
  // Kernel profiling: each `perf/...` counter's increase over the kernel summed over the pod,
  // the time those counters covered, and the capture's chip generation (empty without them).
  std::map<std::string, double> perf_totals;
  int64_t perf_covered_ps = 0;
  std::string generation;
  // The runtime's busy gauges (`mxu_busy`, ...): each one's integral over the kernel's
  // executions (level x ps) and the ps it covered, summed over the pod (as
  // KernelInsightRow::gauge_integrals); empty where no counters covered the kernel.
  std::map<std::string, std::pair<double, int64_t>> busy_gauges;
};

// One kernel identity across recompiles: (module, op name).
struct HistorySeries {
  std::string module, op_name, category;
  std::vector<HistoryPoint> points;
};

// One kernel (module, op) in two captures; a side it did not run on is empty.
struct KernelPair {
  std::string module, op_name, category;
  std::optional<StatRow> baseline, candidate;
};

// The fleet outbox at a glance.
struct FleetBacklog {
  int64_t pending = 0;
  int64_t oldest_queued_ns = 0;  // 0 when none is pending
  int64_t rejected = 0;
  // The newest rejected captures (up to 10) and why ClickHouse refused them.
  std::vector<std::pair<std::string, std::string>> rejections;
  // Captures committed while the backlog was full, not queued (since the store was opened).
  int64_t not_queued = 0;
};

struct RetentionPolicy {
  int64_t max_age_ns = 0;         // 0 = keep forever
  int64_t max_bytes = 0;          // 0 = no size cap
  int64_t keep_timelines_ns = 0;  // 0 = as long as the capture
  int batch = 50;                 // captures deleted per transaction
};

struct RetentionResult {
  int64_t captures_deleted = 0;
  int64_t timelines_dropped = 0;
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_ROWS_H_
