#include "agent/dcn_latency.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace podprof::agent {
namespace {

namespace rt = tpu::monitoring::runtime;

// A growth past this puts the top buckets' bounds past any double long before kMaxDcnBuckets;
// no latency distribution needs it.
constexpr double kMaxGrowth = 16;

// The class a Metric is about: its `buffer-size`, else its first attribute's string (as
// tpu-info groups them), cut to 64 bytes so that a hostile label holds no memory.
std::string ClassOf(const rt::Metric& m) {
  const auto& attributes = m.attribute().value().kvlist_attr().attributes();
  std::string label;
  for (const rt::Attribute& a : attributes) {
    if (a.key() == "buffer-size") {
      label = a.value().string_attr();
      break;
    }
  }
  if (label.empty() && !attributes.empty()) label = attributes[0].value().string_attr();
  if (label.size() > 64) label.resize(64);
  return label;
}

}  // namespace

double TpuInfoPercentile(const std::vector<int64_t>& buckets, int64_t total, double q, double scale,
                         double growth) {
  if (total <= 0) return 1.0;
  const auto rank = static_cast<int64_t>(static_cast<double>(total) * q);
  int64_t below = total;
  for (size_t i = buckets.size(); i-- > 1;) {
    below -= buckets[i];
    if (below <= rank) {
      const double lower = scale * std::pow(growth, static_cast<double>(i - 1));
      // Only reached at a bucket that holds some (the walk starts above the rank).
      if (buckets[i] <= 0) return lower;
      return lower * (1 + static_cast<double>(rank - below) / static_cast<double>(buckets[i]) *
                              (growth - 1));
    }
  }
  return 1.0;
}

absl::Status DcnLatencyTracker::Refuse(absl::Status status) {
  const std::string kind(status.message().substr(0, status.message().find(':')));
  if (warned_.size() < 32 && warned_.insert(kind).second) {
    PODPROF_LOG(WARNING) << "DCN transfer latencies not read: " << status.message()
                         << " (said once; the telemetry reports none of that distribution)";
  }
  return status;
}

absl::Status DcnLatencyTracker::AddClass(const std::pair<size_t, std::string>& key,
                                         const rt::Metric& m, int64_t last_sample_ns) {
  const rt::Distribution& d = m.distribution();
  if (d.bucket_options().options_case() != rt::BucketOptions::kExponentialBuckets) {
    return absl::InvalidArgumentError(
        absl::StrCat("buckets not exponential: class \"", key.second, "\""));
  }
  const auto& e = d.bucket_options().exponential_buckets();
  if (!(e.scale() > 0 && std::isfinite(e.scale()) && e.growth_factor() > 1 &&
        e.growth_factor() <= kMaxGrowth)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bucket scale or growth out of range: class \"", key.second, "\" has scale ", e.scale(),
        " and growth ", e.growth_factor(), " (scale > 0, growth in (1, ", kMaxGrowth, "])"));
  }
  if (d.bucket_counts_size() > kMaxDcnBuckets) {
    return absl::InvalidArgumentError(absl::StrCat("too many buckets: class \"", key.second,
                                                   "\" has ", d.bucket_counts_size(), ", at most ",
                                                   kMaxDcnBuckets));
  }
  int64_t count = 0;
  for (int64_t c : d.bucket_counts()) {
    // Checked one by one, so that the sum cannot overflow either.
    if (c < 0 || c > kMaxDcnBucketCount - count) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket counts out of range: class \"", key.second, "\" has a count of ", c,
                       " (the buckets must hold 0 to ", kMaxDcnBucketCount, " in all)"));
    }
    count += c;
  }
  if (!interval_.empty() && (e.scale() != scale_ || e.growth_factor() != growth_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bucket layouts differ: class \"", key.second, "\" has scale ", e.scale(),
                     " and growth ", e.growth_factor(), ", unlike the scale ", scale_,
                     " and growth ", growth_, " of the classes read before it"));
  }
  Class now;
  now.start_ns = m.start_timestamp().seconds() * 1'000'000'000 + m.start_timestamp().nanos();
  now.buckets.assign(d.bucket_counts().begin(), d.bucket_counts().end());
  std::vector<int64_t> grown;
  auto it = previous_.find(key);
  bool same = it != previous_.end() && it->second.start_ns == now.start_ns &&
              it->second.buckets.size() <= now.buckets.size();
  if (same) {
    grown = now.buckets;
    for (size_t i = 0; i < it->second.buckets.size(); ++i) {
      grown[i] -= it->second.buckets[i];
      // A count that went back is a runtime that restarted without saying so.
      same = same && grown[i] >= 0;
    }
  }
  if (!same) {
    grown.clear();
    // Restarted (or first seen) since the last read: all of it is new. One that restarted
    // before it is not: part of it was counted, or happened before the agent looked.
    if (last_sample_ns > 0 && now.start_ns >= last_sample_ns) grown = now.buckets;
  }
  previous_[key] = std::move(now);
  if (grown.empty()) return absl::OkStatus();
  int64_t grown_count = 0;
  for (int64_t c : grown) grown_count += c;
  if (grown_count > kMaxDcnIntervalCount - interval_count_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "too many transfers: class \"", key.second, "\" has ", grown_count, " in the interval, ",
        interval_count_, " before it, more than ", kMaxDcnIntervalCount, " in all"));
  }
  interval_count_ += grown_count;
  if (interval_.empty()) {
    scale_ = e.scale();
    growth_ = e.growth_factor();
  }
  if (interval_.size() < grown.size()) interval_.resize(grown.size(), 0);
  for (size_t i = 0; i < grown.size(); ++i) interval_[i] += grown[i];
  return absl::OkStatus();
}

absl::Status DcnLatencyTracker::Add(size_t service, const rt::TPUMetric& metric,
                                    int64_t last_sample_ns) {
  if (metric.metrics_size() > kMaxDcnClasses) {
    // Forget the service's classes: what it serves next is compared with nothing stale.
    for (auto it = previous_.begin(); it != previous_.end();) {
      it = it->first.first == service ? previous_.erase(it) : std::next(it);
    }
    return Refuse(absl::InvalidArgumentError(
        absl::StrCat("too many buffer-size classes: service ", service, " serves ",
                     metric.metrics_size(), ", at most ", kMaxDcnClasses)));
  }
  absl::Status out = absl::OkStatus();
  for (const rt::Metric& m : metric.metrics()) {
    if (m.measure_case() != rt::Metric::kDistribution) continue;
    const std::pair<size_t, std::string> key{service, ClassOf(m)};
    if (absl::Status s = AddClass(key, m, last_sample_ns); !s.ok()) {
      previous_.erase(key);
      out = Refuse(std::move(s));
    }
  }
  return out;
}

DcnInterval DcnLatencyTracker::Finish() {
  DcnInterval out;
  const int64_t total = interval_count_;
  out.transfers = total;
  if (total > 0) {
    out.p50_us = TpuInfoPercentile(interval_, total, 0.5, scale_, growth_);
    out.p99_us = TpuInfoPercentile(interval_, total, 0.99, scale_, growth_);
    if (!std::isfinite(out.p50_us) || !std::isfinite(out.p99_us)) out.p50_us = out.p99_us = -1;
  }
  interval_.clear();
  interval_count_ = 0;
  return out;
}

}  // namespace podprof::agent
