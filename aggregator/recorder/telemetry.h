// The aggregator's side of always-on telemetry: takes the agents' per-chip samples (every
// `[telemetry] interval` on each host, agent/telemetry.h), moves them onto the aggregator's
// clock, keeps the pod's recent seconds in memory for the flight recorder's triggers
// (triggers.h), and rolls each chip up over `store_interval` into the store (storage/
// telemetry_table.h), whose rows outlive a restart and go after `retention`.
//
// Memory is bounded by what the triggers look at, not by the pod's history: one point per
// second for the pod as a whole (median step time, mean duty cycle, steps) over `pod_history`,
// each chip's last `chip_history` of samples, and each host's DCN latencies (multi-slice jobs),
// a point a second over `pod_history`. Thread-safe.
#ifndef PODPROF_AGGREGATOR_RECORDER_TELEMETRY_H_
#define PODPROF_AGGREGATOR_RECORDER_TELEMETRY_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/counted_mean.h"
#include "proto/podprof_aggregator.pb.h"
#include "storage/telemetry_table.h"

namespace podprof::aggregator {

struct TelemetryOptions {
  // Each chip's samples are rolled up over this long into one stored row.
  int64_t store_interval_ns = 10'000'000'000;
  // Stored rows older than this are deleted.
  int64_t retention_ns = int64_t{24} * 3600 * 1'000'000'000;
  // The pod's one-second points kept in memory (the triggers' baselines), and each chip's
  // samples (the straggler trigger's recent window).
  int64_t pod_history_ns = int64_t{600} * 1'000'000'000;
  int64_t chip_history_ns = 30'000'000'000;
  // A second of the pod is closed (its point computed) this long after it ended, so that the
  // hosts' reports for it have arrived.
  int64_t settle_ns = 1'500'000'000;
};

// The pod over one second: the median of its chips' mean step times (of the chips that ended
// a step), their mean duty cycle, and how many steps ended on how many chips reporting.
struct PodPoint {
  int64_t second = 0;  // aggregator time / 1 s
  double step_us = 0;  // 0 when no chip ended a step
  double duty_percent = -1;
  int64_t steps = 0;
  int chips = 0;
};

// One chip's sample on the aggregator's clock.
struct ChipPoint {
  int64_t time_ns = 0;
  podprof::v1::ChipTelemetry values;
};

// One host's DCN transfers over one sample (multi-slice jobs): how many arrived and their
// latency's p50 and p99, us, as its agent read them (agent/dcn_latency.h).
struct DcnPoint {
  int64_t time_ns = 0;
  int64_t transfers = 0;
  double p50_us = 0, p99_us = 0;
};

// A host's recent DCN points, oldest first, and its slice (-1: not known).
struct HostDcn {
  int slice = -1;
  std::vector<DcnPoint> points;
};

// The most samples one report may carry: an agent sends every second, and one that could
// not reach the aggregator for a while sends what its buffer kept (agent/telemetry.h).
inline constexpr int kMaxSamplesPerReport = 3600;
// How far a sample's end may lie after the report was sent (the agent's clock read twice),
// and before it (a report delayed by an outage).
inline constexpr int64_t kTelemetryFutureSlackNs = 5'000'000'000;
inline constexpr int64_t kTelemetryMaxAgeNs = int64_t{3600} * 1'000'000'000;

// What an agent's report must hold to be taken, checked before any of it is: at most
// kMaxSamplesPerReport samples, each naming only `chips` (the ordinals the host registered),
// each at most once, with finite values in their ranges (counts and times >= 0; -1 where a
// field means "not reported"), and ends within [sent - kTelemetryMaxAgeNs, sent +
// kTelemetryFutureSlackNs]. Chips that do not exist would hold memory and move the triggers
// (eight invented chips fired the straggler trigger); a NaN failed every host's flush; a
// future-dated sample never expired. InvalidArgument naming the host, the sample and the
// field.
absl::Status CheckTelemetryReport(const podprof::v1::ReportTelemetryRequest& report,
                                  const std::vector<int32_t>& chips);

class TelemetryHub {
 public:
  // `table` null keeps nothing (a store opened for reading only); it must outlive the hub.
  TelemetryHub(storage::TelemetryTable* table, TelemetryOptions options)
      : table_(table), options_(options) {}

  // Takes one agent's report, received at `received_ns` (aggregator clock), from a host of
  // slice `slice` (-1: not known).
  void Ingest(const podprof::v1::ReportTelemetryRequest& report, int64_t received_ns,
              int slice = -1) ABSL_LOCKS_EXCLUDED(mu_);
  // Closes the pod's settled seconds, stores the chips' roll-ups whose interval ended (all of
  // them with `all`, at shutdown) and applies the retention.
  absl::Status Flush(int64_t now_ns, bool all = false) ABSL_LOCKS_EXCLUDED(mu_);

  // The pod's closed seconds, oldest first.
  std::vector<PodPoint> PodHistory() const ABSL_LOCKS_EXCLUDED(mu_);
  // Each chip's samples since `since_ns`, keyed by (host, chip).
  std::map<std::pair<std::string, int>, std::vector<ChipPoint>> ChipHistory(int64_t since_ns) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Each host's DCN points since `since_ns` (the hosts that reported transfers then), by host.
  // At most pod_history's worth of points per host are kept (one a second).
  std::map<std::string, HostDcn> DcnHistory(int64_t since_ns) const ABSL_LOCKS_EXCLUDED(mu_);
  // Samples taken in and rows stored since start.
  int64_t samples() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t rows_stored() const ABSL_LOCKS_EXCLUDED(mu_);

  const TelemetryOptions& options() const { return options_; }

 private:
  // A chip's samples within one store interval, summed.
  struct Rollup {
    int64_t bucket = -1;  // time / store_interval
    int64_t steps = 0;
    double step_sum_us = 0, step_max_us = 0;
    double duty_sum = 0;
    int duty_n = 0;
    int64_t hbm = -1, queued = -1;
    CountedMean collectives;  // the host's, us
    // The host's DCN transfers, their p50s weighted by transfers, and the largest p99.
    int64_t dcn_transfers = 0;
    double dcn_p50_weighted = 0, dcn_p99_max = -1;
    void Add(const podprof::v1::ChipTelemetry& t);
  };
  // The chips' samples falling in one second of the pod, until it is closed.
  struct OpenSecond {
    std::vector<double> step_means;
    double duty_sum = 0;
    int duty_n = 0;
    int64_t steps = 0;
    int chips = 0;
  };
  void Add(const std::string& host, int64_t time_ns, const podprof::v1::ChipTelemetry& t)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddDcn(const std::string& host, int slice, const DcnPoint& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  storage::TelemetryRecord RowOf(const std::string& host, int chip, const Rollup& r) const;

  storage::TelemetryTable* const table_;
  const TelemetryOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, int>, Rollup> rollups_ ABSL_GUARDED_BY(mu_);
  std::vector<storage::TelemetryRecord> ready_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, OpenSecond> open_ ABSL_GUARDED_BY(mu_);
  std::deque<PodPoint> pod_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, int>, std::deque<ChipPoint>> chips_ ABSL_GUARDED_BY(mu_);
  struct HostDcnQueue {
    int slice = -1;
    std::deque<DcnPoint> points;
  };
  std::map<std::string, HostDcnQueue> dcn_ ABSL_GUARDED_BY(mu_);
  int64_t samples_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t rows_stored_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_retention_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_RECORDER_TELEMETRY_H_
