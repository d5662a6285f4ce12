// The analyse-and-write end of the ingest pipeline: from hosts' captures to one capture in the
// store.
//
// Each host is analysed on its own, as soon as it has delivered and outside any transaction:
// its kernel ids resolved (the store keeps them; hosts of one pod share nearly all kernels, so
// after the first host this is a look-up in memory), kernel statistics, counter attribution
// and collective arrivals computed, and its timelines and counters encoded as they are, on the
// host's own clock. What is left of a host is its rows, a few bytes per event. When the pod's
// clock alignment is known, each host gets its correction as parameters (readers apply it);
// only its collective arrivals are corrected, for the pod's collective analysis. Then the
// store's writer inserts the rows it is handed in one transaction.
#ifndef PODPROF_INGEST_CAPTURE_INGEST_H_
#define PODPROF_INGEST_CAPTURE_INGEST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "analysis/host_summary.h"
#include "insight/collectives.h"
#include "storage/capture_writer.h"
#include "trace/clock_correction.h"
#include "trace/model.h"

namespace podprof::ingest {

// The pod-wide part of a capture, added to host by host as each is analysed (from the ingest
// threads): roll-ups of kernel statistics and counter attributions, and collective arrivals.
// What a host leaves waiting for the pod is then its rows, with sketches serialized.
class PodAnalysis {
 public:
  // `within_host`: hosts on their own clocks (an import); collectives are compared within each.
  explicit PodAnalysis(bool within_host = false) : collectives_(within_host) {}

  // The number of hosts the capture asked, for sizing the pod's collective instances.
  void ExpectHosts(size_t hosts) { collectives_.ExpectHosts(hosts); }
  // `chips` are the host's (their peaks weight the roll-ups'), by the stats' chip index.
  void Add(const std::vector<int64_t>& kernel_ids, const std::vector<trace::Chip>& chips,
           const std::vector<trace::KernelStats>& stats,
           const std::vector<trace::KernelCounter>& counters,
           const std::vector<insight::CollectiveRun>& runs, const insight::CollectiveNames& names);
  // Moves the roll-ups (by kernel id, then counter name) and the collective analysis, each
  // host's arrivals put on the pod's clock as `hosts` say (by index), into `w`, and lets go
  // of the arrivals: a finished capture stays listed for its watchers, without its data.
  void Finish(const std::vector<storage::HostWrite>& hosts, storage::CaptureWrite* w);
  size_t arrivals() const { return collectives_.arrivals(); }
  size_t arrival_bytes() const { return collectives_.arrival_bytes(); }

 private:
  absl::Mutex mu_;
  std::map<int64_t, storage::KernelRollupWrite> stats_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int64_t, std::string>, storage::CounterRollupWrite> counters_
      ABSL_GUARDED_BY(mu_);
  insight::CollectiveNames names_ ABSL_GUARDED_BY(mu_);
  insight::PodCollectives collectives_;
};

// One host analysed: the rows to insert.
struct AnalysedHost {
  storage::HostWrite write;
};

// Merges host `index` of a capture (its place in the capture's host list, which keys its
// collective arrivals), given its summary (analysis::SummariseHost's, by the agent or here,
// checked with analysis::CheckSummary against `capture`): kernel ids resolved, the summary's
// rows renumbered to them and to the pod's chips, its timelines and counters encoded on the
// capture's own clock (blocks and series that came encoded are moved out of `capture`, not
// copied). Fills the write's chips, rows and event count; the caller fills the host's name,
// outcome, clock and who analysed it. Errors are the store's (ResolveKernels). Its roll-ups
// and collective arrivals go to `pod`.
absl::StatusOr<AnalysedHost> MergeHost(storage::CaptureWriter& writer, size_t index,
                                       trace::HostCapture& capture, analysis::HostSummary summary,
                                       PodAnalysis* pod);

// MergeHost with the summary computed here, from `capture` (imports, agents too old to
// analyse, tests); the write says the aggregator analysed it.
absl::StatusOr<AnalysedHost> AnalyseHost(storage::CaptureWriter& writer, size_t index,
                                         trace::HostCapture& capture, PodAnalysis* pod);

// Records that the host's timelines, counters and collective arrivals are on its own clock, to
// be put on the aggregator's by `c` when read and when the pod's collectives are analysed.
void SetHostClock(const trace::ClockCorrection& c, AnalysedHost* host);

// The pod-wide part and the write: `pod`'s roll-ups and collectives, one transaction. `hosts`
// are in the order of the indices given to AnalyseHost; `header.hosts` is ignored.
absl::Status WriteAnalysed(storage::CaptureWriter& writer, storage::CaptureWrite header,
                           std::vector<AnalysedHost> hosts, PodAnalysis* pod);

// One host's part of a capture on its way to the store, for StoreCapture.
struct HostInput {
  std::string host;
  storage::HostOutcome status = storage::HostOutcome::kComplete;
  std::string error;
  int64_t clock_offset_ns = 0;
  int64_t clock_uncertainty_ns = 0;
  uint64_t bytes = 0;
  int slice = -1;                             // storage::HostWrite::slice
  std::optional<trace::HostCapture> capture;  // absent when the host delivered nothing
};

struct CaptureInput {
  std::string id;
  int64_t start_ns = 0;  // aggregator clock
  int64_t end_ns = 0;
  storage::CaptureState state = storage::CaptureState::kComplete;
  std::map<std::string, std::string> labels;
  std::string options_json = "{}";
  storage::CaptureSource source = storage::CaptureSource::kCapture;
  int64_t created_ns = 0;
  std::vector<HostInput> hosts;
};

// AnalyseHost for each host in turn (each capture freed once analysed), then WriteAnalysed:
// for imports and tests, whose captures are already as they should be stored.
absl::Status StoreCapture(storage::CaptureWriter& writer, CaptureInput input);

}  // namespace podprof::ingest

#endif  // PODPROF_INGEST_CAPTURE_INGEST_H_
