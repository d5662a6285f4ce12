#include "agent/telemetry.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/logging.h"
#include "proto/grpc_status.h"

namespace podprof::agent {
namespace {

namespace rt = tpu::monitoring::runtime;

// Upper bound of bucket `i` of a distribution's layout (+inf for the overflow bucket).
double BucketUpper(const rt::BucketOptions& o, size_t i) {
  switch (o.options_case()) {
    case rt::BucketOptions::kExponentialBuckets: {
      const auto& e = o.exponential_buckets();
      if (static_cast<int>(i) > e.num_finite_buckets()) return INFINITY;
      return e.scale() * std::pow(e.growth_factor(), static_cast<double>(i));
    }
    case rt::BucketOptions::kLinearBuckets: {
      const auto& l = o.linear_buckets();
      if (static_cast<int>(i) > l.num_finite_buckets()) return INFINITY;
      return l.offset() + l.width() * static_cast<double>(i);
    }
    case rt::BucketOptions::kExplicitBuckets:
      if (i < static_cast<size_t>(o.explicit_buckets().bounds_size())) {
        return o.explicit_buckets().bounds(static_cast<int>(i));
      }
      return INFINITY;
    default:
      return INFINITY;
  }
}

podprof::v1::ChipTelemetry& TelemetryOf(std::map<int, podprof::v1::ChipTelemetry>& chips,
                                        int chip) {
  auto [it, fresh] = chips.try_emplace(chip);
  if (fresh) {
    it->second.set_chip(chip);
    it->second.set_duty_cycle_percent(-1);
    it->second.set_hbm_used_bytes(-1);
    it->second.set_queued(-1);
  }
  return it->second;
}

}  // namespace

DistributionDelta Difference(const rt::Distribution& now, int64_t before_count, double before_sum,
                             const std::vector<int64_t>& before_buckets) {
  DistributionDelta d;
  d.count = now.count() - before_count;
  d.sum = now.mean() * static_cast<double>(now.count()) - before_sum;
  if (d.count <= 0) return {};
  for (int i = now.bucket_counts_size() - 1; i >= 0; --i) {
    const auto idx = static_cast<size_t>(i);
    const int64_t before = idx < before_buckets.size() ? before_buckets[idx] : 0;
    if (now.bucket_counts(i) > before) {
      d.max = BucketUpper(now.bucket_options(), idx);
      break;
    }
  }
  // The bucket's bound overstates by up to a bucket's width; the all-time max bounds it too.
  if (now.max() > 0) d.max = std::min(d.max, now.max());
  if (!std::isfinite(d.max)) d.max = d.sum / static_cast<double>(d.count);
  return d;
}

void TelemetrySampler::ReadGauges(size_t service, const char* metric,
                                  std::map<int, podprof::v1::ChipTelemetry>& chips) {
  // A service that does not answer in time leaves its chips' fields unreported for the
  // interval rather than delaying the report.
  absl::StatusOr<std::vector<ChipValue>> values = metrics_.ReadGauge(service, metric);
  if (!values.ok()) return;
  const std::string name = metric;
  for (const ChipValue& v : *values) {
    podprof::v1::ChipTelemetry& c = TelemetryOf(chips, v.chip);
    if (name == tpu_metrics::kDutyCyclePercent) {
      c.set_duty_cycle_percent(v.value);
    } else if (name == tpu_metrics::kHbmUsageBytes) {
      c.set_hbm_used_bytes(static_cast<int64_t>(v.value));
    } else {
      c.set_queued(static_cast<int64_t>(v.value));
    }
  }
}

void TelemetrySampler::ReadTimings(size_t service,
                                   std::map<int, podprof::v1::ChipTelemetry>& chips) {
  absl::StatusOr<rt::TPUMetric> timings = metrics_.Read(service, tpu_metrics::kProgramTimingUs);
  if (!timings.ok()) return;
  for (const rt::Metric& m : timings->metrics()) {
    const int chip = ChipOf(m);
    if (m.measure_case() != rt::Metric::kDistribution || chip < 0) continue;
    podprof::v1::ChipTelemetry& c = TelemetryOf(chips, chip);
    const rt::Distribution& d = m.distribution();
    Cumulative now;
    now.count = d.count();
    now.sum_us = d.mean() * static_cast<double>(d.count());
    now.start_s = m.start_timestamp().seconds();
    now.buckets.assign(d.bucket_counts().begin(), d.bucket_counts().end());
    auto it = previous_.find(chip);
    // A count that went back or a new start is a restarted runtime: nothing to difference yet.
    if (it != previous_.end() && it->second.start_s == now.start_s &&
        it->second.count <= now.count) {
      const DistributionDelta delta =
          Difference(d, it->second.count, it->second.sum_us, it->second.buckets);
      c.set_steps(delta.count);
      if (delta.count > 0) {
        c.set_step_mean_us(delta.sum / static_cast<double>(delta.count));
        c.set_step_max_us(delta.max);
      }
    }
    previous_[chip] = std::move(now);
  }
}

void TelemetrySampler::ReadCollectives(size_t service, CountedMean* collectives) {
  absl::StatusOr<rt::TPUMetric> collective =
      metrics_.Read(service, tpu_metrics::kCollectiveEndToEndUs);
  if (!collective.ok()) return;
  for (const rt::Metric& m : collective->metrics()) {
    if (m.measure_case() != rt::Metric::kDistribution) continue;
    const std::string size_class = m.attribute().ShortDebugString();
    const rt::Distribution& d = m.distribution();
    CollectiveClass now;
    now.count = d.count();
    now.sum_us = d.mean() * static_cast<double>(d.count());
    now.start_ns = m.start_timestamp().seconds() * 1'000'000'000 + m.start_timestamp().nanos();
    auto it = collectives_.find(size_class);
    if (it != collectives_.end() && it->second.start_ns == now.start_ns &&
        it->second.count <= now.count) {
      collectives->Add(now.count - it->second.count, now.sum_us - it->second.sum_us);
    } else if (last_sample_ns_ > 0 && now.start_ns >= last_sample_ns_) {
      // Restarted (or first seen) since the last read: all of it is new. One that restarted
      // before it is not: part of it was counted, or happened before the agent looked.
      collectives->Add(now.count, now.sum_us);
    } else {
      collectives->Add(0, 0);  // reported, nothing to count yet
    }
    collectives_[size_class] = now;
  }
}

podprof::v1::TelemetrySample TelemetrySampler::Sample() {
  std::map<int, podprof::v1::ChipTelemetry> chips;
  CountedMean collectives;
  for (size_t i = 0; i < metrics_.size(); ++i) {
    ReadTimings(i, chips);
    ReadGauges(i, tpu_metrics::kDutyCyclePercent, chips);
    ReadGauges(i, tpu_metrics::kHbmUsageBytes, chips);
    ReadGauges(i, tpu_metrics::kQueueSize, chips);
    ReadCollectives(i, &collectives);
    // Multi-slice jobs only: a runtime without DCN has no such metric (NotFound), and a
    // refused distribution was logged by the tracker.
    if (!multi_slice_) continue;
    if (absl::StatusOr<rt::TPUMetric> dcn = metrics_.Read(i, tpu_metrics::kDcnTransferUs);
        dcn.ok()) {
      dcn_.Add(i, *dcn, last_sample_ns_).IgnoreError();
    }
  }
  const DcnInterval dcn = dcn_.Finish();
  podprof::v1::TelemetrySample out;
  const int64_t now = clock_.NowNs();
  out.set_time_ns(now);
  out.set_interval_ns(last_sample_ns_ > 0 ? now - last_sample_ns_ : 0);
  last_sample_ns_ = now;
  for (auto& [chip, c] : chips) {
    // The host's collectives, on each of its chips (docs of ChipTelemetry).
    c.set_collectives(collectives.count);
    c.set_collective_mean_us(collectives.Mean());
    c.set_dcn_transfers(dcn.transfers);
    c.set_dcn_latency_p50_us(dcn.p50_us);
    c.set_dcn_latency_p99_us(dcn.p99_us);
    *out.add_chips() = std::move(c);
  }
  return out;
}

TelemetryReporter::TelemetryReporter(
    TelemetrySampler sampler, std::unique_ptr<podprof::v1::Aggregator::StubInterface> aggregator,
    std::string host_name, Clock& clock, TelemetryReporterOptions options)
    : sampler_(std::move(sampler)),
      aggregator_(std::move(aggregator)),
      host_name_(std::move(host_name)),
      clock_(clock),
      options_(options),
      thread_("podprof-telem", clock, clock.NowNs(), [this] { return Tick(); }) {}

TelemetryReporter::~TelemetryReporter() { thread_.Stop(); }

int64_t TelemetryReporter::delivered() const {
  absl::MutexLock lock(&mu_);
  return delivered_;
}

size_t TelemetryReporter::buffered() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

int64_t TelemetryReporter::Tick() {
  podprof::v1::TelemetrySample sample = sampler_.Sample();
  if (options_.on_sample) options_.on_sample(sample);
  {
    absl::MutexLock lock(&mu_);
    pending_.push_back(std::move(sample));
    while (pending_.size() > options_.max_buffered) pending_.pop_front();
  }
  Report();
  const int64_t every = options_.interval_ns;
  return (clock_.NowNs() / every + 1) * every;
}

void TelemetryReporter::Report() {
  podprof::v1::ReportTelemetryRequest req;
  req.set_host_name(host_name_);
  {
    absl::MutexLock lock(&mu_);
    for (const podprof::v1::TelemetrySample& s : pending_) *req.add_samples() = s;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock_.NowNs(), 2'000'000'000));
  req.set_sent_ns(clock_.NowNs());
  podprof::v1::ReportTelemetryResponse resp;
  const grpc::Status s = aggregator_->ReportTelemetry(&ctx, req, &resp);
  if (!s.ok()) {
    if (!failing_) {
      PODPROF_LOG(WARNING) << "telemetry not delivered to the aggregator: " << s.error_message()
                           << "; keeping up to " << options_.max_buffered
                           << " samples and retrying every interval";
    }
    failing_ = true;
    return;
  }
  failing_ = false;
  absl::MutexLock lock(&mu_);
  // Samples taken meanwhile stay for the next report.
  const auto sent = static_cast<size_t>(req.samples_size());
  pending_.erase(pending_.begin(),
                 pending_.begin() + static_cast<std::ptrdiff_t>(std::min(sent, pending_.size())));
  delivered_ += static_cast<int64_t>(sent);
}

}  // namespace podprof::agent
