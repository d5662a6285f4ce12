// Always-on telemetry: every `[telemetry] interval` the agent reads the workload's runtime
// metrics (whether or not a capture runs) and reduces them to one ChipTelemetry per chip: the
// steps that ended in the interval with their mean and largest time, duty cycle, HBM in use and
// queued programs. The reporter sends them to the aggregator, which keeps them (aggregator/
// telemetry.h) and fires the flight recorder's triggers from them (aggregator/triggers.h).
//
// Reading the runtime metric service is a few small unary RPCs per interval and costs the
// workload nothing it would notice: unlike a capture, it takes no profiler session.
#ifndef PODPROF_AGENT_TELEMETRY_H_
#define PODPROF_AGENT_TELEMETRY_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/dcn_latency.h"
#include "agent/runtime_metrics.h"
#include "common/clock.h"
#include "common/counted_mean.h"
#include "common/periodic.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "proto/tpu_metric_service.grpc.pb.h"

namespace podprof::agent {

// The step times come from libtpu's cumulative distribution of program execution times
// (tpu_metrics::kProgramTimingUs), one observation per run of a compiled program (a jitted
// training step); the host's collectives from tpu_metrics::kCollectiveEndToEndUs, launch to
// result, by buffer-size class; a multi-slice host's DCN transfer latencies from
// tpu_metrics::kDcnTransferUs (agent/dcn_latency.h).

// Reads the runtime metric services and keeps what differencing a cumulative distribution
// needs between two reads. Not thread-safe: one reporter thread samples.
class TelemetrySampler {
 public:
  // `metrics` must outlive the sampler. `multi_slice`: the host is in a multi-slice job (it
  // knows its slice), so the DCN transfer latencies are read; a single slice has no DCN, and
  // what a runtime may serve under that name then is not DCN's (the simulator's ICI
  // stand-in).
  TelemetrySampler(const RuntimeMetrics& metrics, Clock& clock, bool multi_slice = false)
      : metrics_(metrics), clock_(clock), multi_slice_(multi_slice) {}

  // One interval's telemetry of every chip the services report, ending now (on the agent's
  // clock). The first sample after start (or after a workload restart reset the runtime's
  // counts) reports no steps: there is no earlier read to difference against.
  podprof::v1::TelemetrySample Sample();

 private:
  // The cumulative program timing of one chip as last read.
  struct Cumulative {
    int64_t count = 0;
    double sum_us = 0;
    int64_t start_s = 0;  // Metric.start_timestamp: a new one is a new runtime
    std::vector<int64_t> buckets;
  };
  // Service `service`'s gauge `metric` into each chip's field for it.
  void ReadGauges(size_t service, const char* metric,
                  std::map<int, podprof::v1::ChipTelemetry>& chips);
  void ReadTimings(size_t service, std::map<int, podprof::v1::ChipTelemetry>& chips);
  // Adds the host's collectives since the last read (count, sum of us) to `collectives`;
  // nothing when the service does not serve them.
  void ReadCollectives(size_t service, CountedMean* collectives);

  const RuntimeMetrics& metrics_;
  Clock& clock_;
  const bool multi_slice_;
  std::map<int, Cumulative> previous_;
  // The collective distribution as last read, by buffer-size class: its count, sum and start
  // (ns: a runtime may restart it more than once a second).
  struct CollectiveClass {
    int64_t count = 0;
    double sum_us = 0;
    int64_t start_ns = 0;
  };
  std::map<std::string, CollectiveClass> collectives_;
  // The host's DCN transfer latencies (multi-slice jobs), differenced read after read.
  DcnLatencyTracker dcn_;
  int64_t last_sample_ns_ = 0;
};

// The steps a cumulative distribution gained between two reads: count, sum and the upper
// bound of the highest bucket that grew (capped by the distribution's own max), in the units of
// the distribution. Exposed for tests.
struct DistributionDelta {
  int64_t count = 0;
  double sum = 0;
  double max = 0;
};
DistributionDelta Difference(const tpu::monitoring::runtime::Distribution& now,
                             int64_t before_count, double before_sum,
                             const std::vector<int64_t>& before_buckets);

struct TelemetryReporterOptions {
  int64_t interval_ns = 1'000'000'000;
  // Samples kept while the aggregator is away, oldest dropped first (5 minutes at 1 s: a few
  // hundred kB).
  size_t max_buffered = 300;
  // Each sample also goes here, on the reporter's thread (the recorder's guard).
  std::function<void(const podprof::v1::TelemetrySample&)> on_sample;
};

// Samples on a thread of its own (podprof-telem) at every multiple of the interval on the
// agent's clock, so the hosts of a pod sample at about the same instants, and reports each
// sample to the aggregator at once, with any that earlier reports failed to deliver.
class TelemetryReporter {
 public:
  TelemetryReporter(TelemetrySampler sampler,
                    std::unique_ptr<podprof::v1::Aggregator::StubInterface> aggregator,
                    std::string host_name, Clock& clock, TelemetryReporterOptions options);
  ~TelemetryReporter();
  TelemetryReporter(const TelemetryReporter&) = delete;
  TelemetryReporter& operator=(const TelemetryReporter&) = delete;

  // Samples delivered, and waiting for the aggregator.
  int64_t delivered() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t buffered() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One sample, reported; the time of the next (the next multiple of the interval).
  int64_t Tick();
  void Report();

  TelemetrySampler sampler_;
  const std::unique_ptr<podprof::v1::Aggregator::StubInterface> aggregator_;
  const std::string host_name_;
  Clock& clock_;
  const TelemetryReporterOptions options_;
  mutable absl::Mutex mu_;
  std::deque<podprof::v1::TelemetrySample> pending_ ABSL_GUARDED_BY(mu_);
  int64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  bool failing_ = false;   // only the loop's thread; logs a failure once, not every second
  PeriodicThread thread_;  // last: stopped before the members it uses go
};

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_TELEMETRY_H_
