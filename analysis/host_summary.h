// What a host's capture says on its own, before the pod is put on one clock: its kernel
// statistics with their sketches, its counters and scopes attributed to kernels, and its
// chips' arrivals at collectives. One analysis, run where the capture is read: by the agent
// for a live capture (sent beside the timelines, analysis/summary_proto.h), by the aggregator
// for an import or an agent too old to analyse. The aggregator then only merges summaries
// (ingest/capture_ingest.h), whoever made them.
//
// Everything is keyed by the capture's own indices (its chips, its kernels) and on its own
// clock; the pod's clock and the store's kernel ids are the merger's business.
#ifndef PODPROF_ANALYSIS_HOST_SUMMARY_H_
#define PODPROF_ANALYSIS_HOST_SUMMARY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "insight/collectives.h"
#include "trace/analysis_rows.h"
#include "trace/kernel_stats.h"
#include "trace/model.h"

namespace podprof::analysis {

// The version of the analysis below, as agents and aggregators negotiate it
// (CaptureRequest.analysis_version, HostInfo.analysis_version): a change to what a summary
// holds or how a figure in it is computed is a new version, and an agent never sends a
// summary of another version than the one asked for.
inline constexpr uint32_t kAnalysisVersion = 1;

struct HostSummary {
  // Per chip and kernel (trace::ComputeKernelStats: chip and kernel are the capture's
  // indices), longest total first.
  std::vector<trace::KernelStats> stats;
  // insight::AttributeCounters and insight::AttributeScopes.
  std::vector<trace::KernelCounter> attributions;
  std::vector<trace::KernelScope> scopes;
  // insight::CollectiveRuns with chip_key the chip's index, kernel_key the kernel's index and
  // host 0: the merger renumbers them.
  std::vector<insight::CollectiveRun> arrivals;
};

// The summary of a whole capture. The series of `also` (sampled beside it: an agent's
// runtime metrics) are attributed as if they followed the capture's own.
HostSummary SummariseHost(const trace::HostCapture& capture,
                          const std::vector<trace::CounterSeries>& also = {});

// Puts rows that came apart (a chip at a time, or over the wire) in SummariseHost's order:
// statistics by SortByTotal, attributions and scopes by chip (each chip's own in the order
// they came). Arrivals keep theirs.
void OrderSummary(HostSummary* summary);

// A host analysed as the agent reads its capture: a device plane (a chip) at a time, each
// forgotten once analysed, so that memory is one plane's data however long the capture. The
// result equals SummariseHost's over the whole capture as long as each chip's data comes in one
// piece; a chip seen in a second piece (a SparseCore plane read apart from its chip's, or a
// plane past the reader's ReadOptions::max_piece_bytes) makes Finish() refuse, and the whole
// capture is analysed where it is merged instead.
class HostAnalyser {
 public:
  // `chips` are the host's (ReadXSpaceInPieces' OnHost); `also` the series sampled beside the
  // capture, by chip ordinal in `chip` (each goes with its chip's piece; a series of no chip of
  // the host has no kernels to be attributed to and is left out).
  HostAnalyser(const std::vector<trace::Chip>& chips, std::vector<trace::CounterSeries> also);

  // One piece: its blocks and counters, the kernels defined so far.
  void Add(const trace::HostCapture& piece);
  // The summary of every piece added; FailedPrecondition when a chip came in two pieces.
  absl::StatusOr<HostSummary> Finish();

 private:
  std::vector<trace::Chip> chips_;
  std::vector<std::vector<trace::CounterSeries>> also_;  // by chip index
  std::vector<bool> seen_;                               // by chip index
  std::string split_;  // why the summary is not the whole capture's; empty while it is
  HostSummary summary_;
};

// Each collective's end on this host, (id, the median over its chips' ends), by id: what the
// clock alignment pins hosts with. Chips that are CPU devices pin nothing (their collectives end
// when the OS schedules a thread) and are left out. `chips` are the capture's.
std::vector<std::pair<uint64_t, int64_t>> CollectiveEnds(const HostSummary& summary,
                                                         const std::vector<trace::Chip>& chips);

// What a summary must hold to be merged for a capture of `chips` chips and `kernels` kernels:
// every chip and kernel index in range, statistics that add up (count > 0, min <= max, no
// execution longer than `max_duration_ps`, a total between count x min and count x max, a
// sketch that counts what the row counts within min and max, the host's totals within 64
// bits), finite attributions and scopes of non-negative time. InvalidArgument naming the
// first row that fails. The default duration bound is an int64's; a live capture passes its
// window's.
inline constexpr int64_t kAnyDurationPs = INT64_MAX;
absl::Status CheckSummary(const HostSummary& summary, size_t chips, size_t kernels,
                          int64_t max_duration_ps = kAnyDurationPs);

// What a receiver counts of a stream as it reads it, to hold the sender's summary to: per chip
// index, its kernel lines' executions, and of the blocks it decoded, those per kernel index
// and its collective runs. Blocks kept encoded (stored undecoded) count their executions only.
struct StreamTally {
  std::vector<int64_t> chip_events;                 // [chip]
  std::vector<std::vector<int64_t>> kernel_events;  // [chip][kernel], decoded blocks
  std::vector<int64_t> collectives;                 // [chip], decoded blocks
  bool all_decoded = true;                          // no kernel-line block came encoded

  void Count(int chip, const std::vector<uint32_t>& kernels,
             const std::vector<uint64_t>& collective_ids);
  void CountEncoded(int chip, int64_t events);
};

// Holds a summary to the stream it came with: each chip's statistics count the executions its
// kernel lines hold; when every block was decoded, also each kernel's on each chip (none that
// ran missing) and each chip's collective runs. InvalidArgument naming the first chip or
// kernel that disagrees. Run after CheckSummary (which keeps its indices in range).
absl::Status VerifySummary(const HostSummary& summary, const StreamTally& tally);

}  // namespace podprof::analysis

#endif  // PODPROF_ANALYSIS_HOST_SUMMARY_H_
