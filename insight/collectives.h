// Who made whom wait at the pod's collectives.
//
// On the aggregator's clock every chip taking part in one collective (one
// `all_reduce_unique_id`) finishes it at the same instant, so the chips that arrived early
// spent the time until the last arrival waiting. For each instance: the last chip to arrive is
// its straggler, every other chip's wait is (last arrival - its arrival), and the straggler's
// lateness is how much later it came than the next-to-last chip (what the others would have
// saved had it been on time).
#ifndef PODPROF_INSIGHT_COLLECTIVES_H_
#define PODPROF_INSIGHT_COLLECTIVES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "trace/analysis_rows.h"
#include "trace/model.h"

namespace podprof::insight {

// One chip's part in one collective instance. A host's runs live only until they are added to
// a PodCollectives; names are numbers here (CollectiveNames spells them).
struct CollectiveRun {
  uint64_t id = 0;  // all_reduce_unique_id
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  int64_t step = -1;       // the `Steps` event holding the start on this chip; -1 when none
  int64_t chip_key = 0;    // the caller's id for the chip (the store's chip row)
  int64_t kernel_key = 0;  // the caller's id for the kernel (the store's kernel row)
  int32_t host = 0;        // the caller's number for the host (CollectiveNames::hosts)
  int32_t chip_ordinal = 0;
  // The run's end in ns, rounded from its ps as the clock alignment reads it, less
  // start_ns + duration_ns (each truncated on its own): at most a ns either way. Kept so that a
  // host's collective ends can be rebuilt from its runs (analysis/host_summary.h) exactly.
  int32_t end_carry = 0;
};

// The names behind runs' numbers, for the rows a report keeps.
struct CollectiveNames {
  std::vector<std::string> hosts;                     // by CollectiveRun::host
  absl::flat_hash_map<int64_t, std::string> kernels;  // by CollectiveRun::kernel_key

  std::string Host(int32_t host) const;
  std::string Kernel(int64_t key) const;
  // Adds `other`'s names (a host's, to a pod's).
  void Merge(const CollectiveNames& other);
};

// A chip's steps from its `Steps` line: (start ns, end ns, number), in time order; the number
// is the step event's name when that is a number, else its order on the line.
using ChipSteps = std::vector<std::tuple<int64_t, int64_t, int64_t>>;
// Every chip's of `capture` (by chip index).
std::vector<ChipSteps> StepsByChip(const trace::HostCapture& capture);
// The number of the step of `steps` whose span holds `ns`; -1 when none does.
int64_t StepAt(const ChipSteps& steps, int64_t ns);

// The collective executions of one host's capture, that host numbered `host`. `chip_keys` and
// `kernel_keys` map the capture's chip and kernel indices to the caller's ids. Steps come from
// the chip's `Steps` line (the step event's name when it is a number, else its order). The
// host's name and its collective kernels' names go into `names`.
std::vector<CollectiveRun> CollectiveRuns(const trace::HostCapture& capture, int32_t host,
                                          const std::vector<int64_t>& chip_keys,
                                          const std::vector<int64_t>& kernel_keys,
                                          CollectiveNames* names);

struct Wait {
  int64_t wait_ps = 0;  // waiting for later arrivals
  int64_t instances = 0;
  // The chip most often last in these instances ("host chip N"), and how often; empty when
  // no chip was last significantly more often than chance (StragglerTest).
  std::string straggler;
  int64_t straggler_times = 0;
};

using StragglerRow = trace::StragglerRow;
using InstanceRow = trace::InstanceRow;

struct CollectiveReport {
  // (chip key, kernel key) -> the waiting of that kernel on that chip.
  std::map<std::pair<int64_t, int64_t>, Wait> waits;
  // Chips that were last at least once, most waiting caused first.
  std::vector<StragglerRow> stragglers;
  // The instances that made the pod wait longest, worst first (up to `max_instances`).
  std::vector<InstanceRow> worst;
  int64_t instances = 0;
  // Instances left out because their arrivals cannot be one collective: a chip arrived after
  // another had already finished it (longer than any of that chip's runs of it). Real TPUs
  // number `all_reduce_unique_id` per chip, so one id can join different executions.
  int64_t left_out = 0;
  std::string left_out_example;  // the first such: its kernel and id, for the warning
};

// A pod's collective arrivals, gathered host by host as each is analysed (from several
// threads) and analysed once every host's clock correction is known. A pod's second holds
// millions of arrivals: each is kept as 12 bytes under its instance (its start as ns after the
// instance's first arrival), and the chips and kernels they name once.
//
// Instances seen on a single chip teach nothing and are skipped. With `within_host`, the chips
// of different hosts are not compared (hosts on their own clocks, as in an import): an instance
// is its id on one host.
class PodCollectives {
 public:
  explicit PodCollectives(bool within_host = false) : within_host_(within_host) {}

  // How many hosts will add runs, when known: an instance's arrivals are then kept in room
  // for one per chip of the pod (as the first host's chips suggest), grown to it by doubling
  // but never past it. Grown by doubling alone, every pod-wide instance doubled at the same
  // host, and a 2,240-host pod's arrivals took 506 MB for 272.
  void ExpectHosts(size_t hosts);
  void Add(const std::vector<CollectiveRun>& runs);
  // Maps a host's instant (ns) to the pod's clock.
  using Correct = std::function<int64_t(int32_t host, int64_t ns)>;
  // Analyses the instances, every arrival put on the pod's clock by `correct`.
  CollectiveReport Analyze(const CollectiveNames& names, const Correct& correct,
                           size_t max_instances = 64) const;
  size_t arrivals() const;
  // The room the arrivals take, bytes (for logs and tests).
  size_t arrival_bytes() const;
  // Forgets every arrival, giving their memory back.
  void Clear();

 private:
  struct Member {
    // On its host's clock, ns after its instance's first arrival (bases_). One collective's
    // arrivals lie within a run of each other, but hosts' clocks may not agree before they
    // are corrected: an arrival more than 2 s away is kFar and its start is in far_starts_.
    int32_t start = 0;
    uint32_t pair = 0;  // index into pairs_
    int32_t step = -1;  // index into step_numbers_ (numbers may not fit 32 bits), -1: none
  };
  static constexpr int32_t kFar = INT32_MIN;
  struct Pair {  // a kernel on a chip
    int64_t kernel_key = 0;
    uint32_t chip = 0;  // index into chips_
    int32_t host = 0;   // the chip's, read for every arrival
    // Its longest run: no chip can wait longer than this for the others in a collective.
    int64_t max_duration_ns = 0;
  };
  struct Chip {
    int64_t key = 0;
    int32_t host = 0;
    int32_t ordinal = 0;
  };
  struct Walk;  // Analyze's state
  int64_t ChipKey(const Member& m) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Member `m` of instance `i`: its start on its host's clock.
  int64_t StartNs(size_t i, size_t m) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Instances [begin, end) into `w`. Runs on Analyze's threads while Analyze holds mu_.
  void WalkInstances(size_t begin, size_t end, const Correct& correct, Walk* w) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Whether instance `i`, its arrivals at `at` and the last at `last_ns`, can be one
  // collective: every chip's wait within its longest run of the kernel (plus 1 us of clock
  // uncertainty).
  bool OneExecution(const std::vector<Member>& members, const std::vector<int64_t>& at,
                    int64_t last_ns) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  CollectiveReport Report(const CollectiveNames& names, size_t max_instances, Walk* w) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const bool within_host_;
  mutable absl::Mutex mu_;
  size_t expected_hosts_ ABSL_GUARDED_BY(mu_) = 0;
  size_t pod_chips_ ABSL_GUARDED_BY(mu_) = 0;  // expected, once the first host added runs
  absl::flat_hash_map<std::pair<uint64_t, int32_t>, uint32_t> instance_of_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<Member>> members_ ABSL_GUARDED_BY(mu_);  // by instance
  std::vector<int64_t> bases_ ABSL_GUARDED_BY(mu_);  // by instance: its first arrival's start
  // (instance, member) -> start of the arrivals too far from their instance's base.
  absl::flat_hash_map<std::pair<uint32_t, uint32_t>, int64_t> far_starts_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<int64_t, int64_t>, uint32_t> pair_of_ ABSL_GUARDED_BY(mu_);
  std::vector<Pair> pairs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, uint32_t> chip_of_ ABSL_GUARDED_BY(mu_);
  std::vector<Chip> chips_ ABSL_GUARDED_BY(mu_);
  // Step numbers as the `Steps` lines name them, each once; arrivals hold an index into it.
  absl::flat_hash_map<int64_t, int32_t> step_index_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> step_numbers_ ABSL_GUARDED_BY(mu_);
};

// "N collective instances left out: ..." for `left_out` > 0 instances, the first `example`
// (CollectiveReport's, or as the store kept them).
std::string LeftOutWarning(int64_t left_out, const std::string& example);

// The same for runs all on one clock (or, with `within_host`, each host on its own).
CollectiveReport AnalyzeCollectives(const std::vector<CollectiveRun>& runs,
                                    const CollectiveNames& names, size_t max_instances = 64,
                                    bool within_host = false);

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_COLLECTIVES_H_
