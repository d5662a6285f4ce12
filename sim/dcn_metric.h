// libtpu's `megascale.dcn_transfer_latencies.microsecond.cumulative.distribution` as the
// simulated host of a multi-slice job serves it (docs/MEGASCALE.md section 3 for the real one,
// "podprof's multi-slice layout" for the simulator's): every DCN transfer this host's chips
// received, its latency from the moment the sender's buffer left (its send-done) to its arrival
// (PodModel::DcnTransitPs), in us, accumulated since a start over the steps that have run.
// An injected `--dcn-delay-at` on the link into this host's slice shows in it; a slow producer
// does not (its data leaves late, then crosses in the usual time).
//
// podprof's choices, not libtpu's (its bucket layout and class names are not public):
//   * exponential buckets of scale kDcnLatencyScaleUs, growth kDcnLatencyGrowth,
//     kDcnLatencyBuckets finite ones (1 us to about 1.6 s; bucket 0 is the underflow, the last
//     the overflow), fine enough that a 40 us transit and one 25% longer fall apart;
//   * one class per buffer size, labelled as the simulated runtime labels its other megascale
//     metrics: the largest power of two not above the buffer, binary units and a `+` ("1MB+"
//     for the simulator's 1 MiB gradient buckets).
#ifndef PODPROF_SIM_DCN_METRIC_H_
#define PODPROF_SIM_DCN_METRIC_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/pod_model.h"

namespace podprof::sim {

inline constexpr double kDcnLatencyScaleUs = 1;
inline constexpr double kDcnLatencyGrowth = 1.25;
inline constexpr int kDcnLatencyBuckets = 64;

// Bucket of `us` in that layout: 0 below the scale, i in [scale * growth^(i-1), scale *
// growth^i), kDcnLatencyBuckets + 1 past the last.
int DcnLatencyBucket(double us);

// One buffer-size class's distribution since `start_host_ns` (Metric.start_timestamp).
struct DcnLatencyClass {
  int64_t start_host_ns = 0;
  int64_t count = 0;
  double sum = 0, sum_sq = 0, min = 0, max = 0;
  std::vector<int64_t> buckets = std::vector<int64_t>(kDcnLatencyBuckets + 2, 0);
  void Add(double us);
};

// The size class label of a buffer of `bytes` ("1MB+"), as the simulated runtime names the
// `buffer-size` of every megascale metric.
std::string BufferSizeClass(int64_t bytes);

// Counts the DCN transfers one host's chips receive, step by step. Not thread-safe (SimHost
// guards it). `model` must outlive it.
class DcnLatencyCounter {
 public:
  // Counting starts after step `counted_through` (the one running at start-up), at
  // `start_host_ns` on the host clock.
  DcnLatencyCounter(const PodModel& model, int64_t counted_through, int64_t start_host_ns)
      : model_(model), counted_through_(counted_through), start_host_ns_(start_host_ns) {}

  // Adds every step up to `done` (the last one whose transfers have all arrived) not yet
  // counted, at most the last `max_steps` of them (a service first asked long after start-up).
  // Nothing with one slice, and nothing for a step the job did not issue.
  void CountThrough(int64_t done, int64_t max_steps = 100'000);
  // The classes, by label.
  const std::map<std::string, DcnLatencyClass>& classes() const { return classes_; }

 private:
  const PodModel& model_;
  int64_t counted_through_;
  const int64_t start_host_ns_;
  std::map<std::string, DcnLatencyClass> classes_;
};

}  // namespace podprof::sim

#endif  // PODPROF_SIM_DCN_METRIC_H_
