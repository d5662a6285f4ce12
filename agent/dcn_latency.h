// A multi-slice host's DCN transfer latency per telemetry interval, from libtpu's cumulative
// `megascale.dcn_transfer_latencies.microsecond.cumulative.distribution` (docs/MEGASCALE.md
// section 3): the growth of its bucket counts between two reads is the interval's transfers,
// and their percentiles are read off those buckets as tpu-info reads them.
//
// What a runtime serves is not trusted: a distribution that is not exponential, has more than
// kMaxDcnBuckets buckets, a count past kMaxDcnBucketCount, or more than kMaxDcnClasses
// buffer-size classes is refused (logged once per kind, the interval reports none of it), so
// memory stays bounded by those limits whatever is served.
#ifndef PODPROF_AGENT_DCN_LATENCY_H_
#define PODPROF_AGENT_DCN_LATENCY_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/tpu_metric_service.pb.h"

namespace podprof::agent {

inline constexpr int kMaxDcnBuckets = 4096;
// A class's buckets hold at most this many in all, and an interval's classes this many.
inline constexpr int64_t kMaxDcnBucketCount = int64_t{1} << 50;
inline constexpr int64_t kMaxDcnIntervalCount = int64_t{1} << 60;
inline constexpr int kMaxDcnClasses = 64;

// The q-quantile (0 <= q < 1) of a distribution with exponential buckets (`scale` > 0,
// `growth` > 1; bucket 0 the underflow, bucket i >= 1 from scale * growth^(i-1)) holding
// `buckets`, as tpu-info's `_get_percentile` computes it (tpu_info/metrics.py): the rank
// floor(total * q); walking down from the top bucket, the first bucket i >= 1 below which at
// most that many observations lie; then linearly inside it, scale * growth^(i-1) * (1 +
// (rank - below) / buckets[i] * (growth - 1)). 1.0 when `total` is 0 or no such bucket exists
// (all in the underflow), as tpu-info returns. `total` is the buckets' sum.
double TpuInfoPercentile(const std::vector<int64_t>& buckets, int64_t total, double q, double scale,
                         double growth);

// One interval's DCN transfers: how many arrived, and their latency's p50 and p99, us (-1
// when none did).
struct DcnInterval {
  int64_t transfers = 0;
  double p50_us = -1, p99_us = -1;
};

// Differences the metric read after read. Not thread-safe: the telemetry sampler's thread.
class DcnLatencyTracker {
 public:
  // Adds service `service`'s read `metric` to the interval being built. `last_sample_ns` is
  // when the previous interval ended (0: none yet), on the clock of the metric's timestamps: a
  // class restarted (a new start_timestamp) since then counts whole, one restarted before it
  // (or first seen) is only remembered. InvalidArgument (already logged) for a refused
  // distribution, which adds nothing and forgets its class.
  absl::Status Add(size_t service, const tpu::monitoring::runtime::TPUMetric& metric,
                   int64_t last_sample_ns);
  // The interval built since the last Finish, and a fresh one begun.
  DcnInterval Finish();

 private:
  struct Class {
    int64_t start_ns = 0;
    std::vector<int64_t> buckets;
  };
  absl::Status AddClass(const std::pair<size_t, std::string>& key,
                        const tpu::monitoring::runtime::Metric& m, int64_t last_sample_ns);
  // Logs `status` once per kind of refusal (its first words), then returns it.
  absl::Status Refuse(absl::Status status);

  std::map<std::pair<size_t, std::string>, Class> previous_;
  // The interval's growth, summed over classes and services that share the first layout.
  std::vector<int64_t> interval_;
  int64_t interval_count_ = 0;  // their sum
  double scale_ = 0, growth_ = 0;
  std::set<std::string> warned_;
};

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_DCN_LATENCY_H_
