#include "aggregator/recorder/telemetry.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/median.h"
#include "common/status_macros.h"

namespace podprof::aggregator {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;
// Retention runs at most this often: a delete of a few seconds' rows every minute.
constexpr int64_t kRetentionEveryNs = 60 * kSecondNs;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

}  // namespace

void TelemetryHub::Rollup::Add(const podprof::v1::ChipTelemetry& t) {
  steps += t.steps();
  step_sum_us += t.step_mean_us() * static_cast<double>(t.steps());
  step_max_us = std::max(step_max_us, t.step_max_us());
  if (t.duty_cycle_percent() >= 0) {
    duty_sum += t.duty_cycle_percent();
    ++duty_n;
  }
  if (t.hbm_used_bytes() >= 0) hbm = t.hbm_used_bytes();
  queued = std::max(queued, t.queued());
  if (t.collective_mean_us() >= 0) {
    collectives.Add(t.collectives(), t.collective_mean_us() * static_cast<double>(t.collectives()));
  }
  if (t.dcn_transfers() > 0 && t.dcn_latency_p50_us() >= 0) {
    dcn_transfers += t.dcn_transfers();
    dcn_p50_weighted += t.dcn_latency_p50_us() * static_cast<double>(t.dcn_transfers());
    dcn_p99_max = std::max(dcn_p99_max, t.dcn_latency_p99_us());
  }
}

namespace {

// Why `t` (the `i`th chip entry of sample `n`) is no measurement, or OK.
absl::Status CheckChipValues(const podprof::v1::ChipTelemetry& t) {
  auto field = [](const char* name, double v, double min, double max = 1e300) -> absl::Status {
    if (std::isfinite(v) && v >= min && v <= max) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(name, " is ", v));
  };
  RETURN_IF_ERROR(field("steps", static_cast<double>(t.steps()), 0));
  RETURN_IF_ERROR(field("step_mean_us", t.step_mean_us(), 0));
  RETURN_IF_ERROR(field("step_max_us", t.step_max_us(), 0));
  if (t.duty_cycle_percent() != -1) {
    RETURN_IF_ERROR(field("duty_cycle_percent", t.duty_cycle_percent(), 0, 100));
  }
  RETURN_IF_ERROR(field("hbm_used_bytes", static_cast<double>(t.hbm_used_bytes()), -1));
  RETURN_IF_ERROR(field("queued", static_cast<double>(t.queued()), -1));
  RETURN_IF_ERROR(field("collectives", static_cast<double>(t.collectives()), 0));
  RETURN_IF_ERROR(field("collective_mean_us", t.collective_mean_us(), -1));
  RETURN_IF_ERROR(field("dcn_transfers", static_cast<double>(t.dcn_transfers()), 0));
  // 0 from an agent older than the DCN fields, -1 when it had no transfers to measure.
  RETURN_IF_ERROR(field("dcn_latency_p50_us", t.dcn_latency_p50_us(), -1));
  RETURN_IF_ERROR(field("dcn_latency_p99_us", t.dcn_latency_p99_us(), -1));
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckTelemetryReport(const podprof::v1::ReportTelemetryRequest& report,
                                  const std::vector<int32_t>& chips) {
  const std::string& host = report.host_name();
  if (report.samples_size() > kMaxSamplesPerReport) {
    return absl::InvalidArgumentError(absl::StrCat("telemetry of host ", host, " carries ",
                                                   report.samples_size(), " samples, more than ",
                                                   kMaxSamplesPerReport));
  }
  std::vector<bool> seen(chips.size());
  for (int n = 0; n < report.samples_size(); ++n) {
    const podprof::v1::TelemetrySample& s = report.samples(n);
    // On the agent's own clock, as sent_ns: the age needs no correction, and is computed in
    // 128 bits, as either may be any int64.
    const __int128 age = static_cast<__int128>(report.sent_ns()) - s.time_ns();
    if (age < -kTelemetryFutureSlackNs || age > kTelemetryMaxAgeNs) {
      return absl::InvalidArgumentError(
          absl::StrCat("telemetry of host ", host, ": sample ", n, " ends at ", s.time_ns(),
                       " ns, not within an hour before the report's sent_ns ", report.sent_ns()));
    }
    std::fill(seen.begin(), seen.end(), false);
    for (const podprof::v1::ChipTelemetry& t : s.chips()) {
      const auto it = std::find(chips.begin(), chips.end(), t.chip());
      if (it == chips.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("telemetry of host ", host, ": sample ", n, " names chip ", t.chip(),
                         ", which the host did not register (", chips.size(), " chips)"));
      }
      if (seen[it - chips.begin()]) {
        return absl::InvalidArgumentError(absl::StrCat("telemetry of host ", host, ": sample ", n,
                                                       " names chip ", t.chip(), " twice"));
      }
      seen[it - chips.begin()] = true;
      if (absl::Status bad = CheckChipValues(t); !bad.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("telemetry of host ", host, ": sample ", n,
                                                       ", chip ", t.chip(), ": ", bad.message()));
      }
    }
  }
  return absl::OkStatus();
}

storage::TelemetryRecord TelemetryHub::RowOf(const std::string& host, int chip,
                                             const Rollup& r) const {
  storage::TelemetryRecord row;
  row.host = host;
  row.time_ns = (r.bucket + 1) * options_.store_interval_ns;
  row.interval_ns = options_.store_interval_ns;
  row.chip = chip;
  row.steps = r.steps;
  if (r.steps > 0) row.step_mean_us = r.step_sum_us / static_cast<double>(r.steps);
  row.step_max_us = r.step_max_us;
  row.duty_cycle_percent = r.duty_n > 0 ? r.duty_sum / r.duty_n : -1;
  row.hbm_used_bytes = r.hbm;
  row.queued = r.queued;
  row.collectives = r.collectives.count;
  row.collective_mean_us = r.collectives.Mean();
  row.dcn_transfers = r.dcn_transfers;
  if (r.dcn_transfers > 0) {
    row.dcn_latency_p50_us = r.dcn_p50_weighted / static_cast<double>(r.dcn_transfers);
    row.dcn_latency_p99_us = r.dcn_p99_max;
  }
  return row;
}

void TelemetryHub::Add(const std::string& host, int64_t time_ns,
                       const podprof::v1::ChipTelemetry& t) {
  const std::pair<std::string, int> key{host, t.chip()};
  // The store's roll-up: a sample of a later interval closes the chip's current one.
  Rollup& r = rollups_[key];
  const int64_t bucket = FloorDiv(time_ns, options_.store_interval_ns);
  if (r.bucket != bucket) {
    if (r.bucket >= 0) ready_.push_back(RowOf(host, t.chip(), r));
    r = Rollup{};
    r.bucket = bucket;
  }
  r.Add(t);
  // The pod's second (late samples of a closed one only reach the store).
  const int64_t second = FloorDiv(time_ns, kSecondNs);
  if (pod_.empty() || second > pod_.back().second) {
    OpenSecond& o = open_[second];
    ++o.chips;
    o.steps += t.steps();
    if (t.steps() > 0) o.step_means.push_back(t.step_mean_us());
    if (t.duty_cycle_percent() >= 0) {
      o.duty_sum += t.duty_cycle_percent();
      ++o.duty_n;
    }
  }
  std::deque<ChipPoint>& recent = chips_[key];
  recent.push_back({time_ns, t});
  while (!recent.empty() && recent.front().time_ns < time_ns - options_.chip_history_ns) {
    recent.pop_front();
  }
}

void TelemetryHub::Ingest(const podprof::v1::ReportTelemetryRequest& report, int64_t received_ns,
                          int slice) {
  // The agent's clock to this one: the report's transit (about a millisecond) is the error,
  // small against a one-second sample.
  // Taken as received minus the sample's age on the agent's clock, which CheckTelemetryReport
  // bounds: neither clock's value can then overflow the sum.
  absl::MutexLock lock(&mu_);
  for (const podprof::v1::TelemetrySample& s : report.samples()) {
    ++samples_;
    const int64_t age = static_cast<int64_t>(static_cast<__int128>(report.sent_ns()) - s.time_ns());
    for (const podprof::v1::ChipTelemetry& c : s.chips())
      Add(report.host_name(), received_ns - age, c);
    // The host's DCN figures, which each of its chips carries: once per sample.
    for (const podprof::v1::ChipTelemetry& c : s.chips()) {
      if (c.dcn_transfers() <= 0 || c.dcn_latency_p50_us() < 0) continue;
      AddDcn(
          report.host_name(), slice,
          {received_ns - age, c.dcn_transfers(), c.dcn_latency_p50_us(), c.dcn_latency_p99_us()});
      break;
    }
  }
}

void TelemetryHub::AddDcn(const std::string& host, int slice, const DcnPoint& p) {
  HostDcnQueue& q = dcn_[host];
  q.slice = slice;
  // In time order (a late sample of an earlier second goes where it belongs), and bounded: a
  // point a second over pod_history, however many samples a report carries.
  auto at = q.points.end();
  while (at != q.points.begin() && std::prev(at)->time_ns > p.time_ns) --at;
  q.points.insert(at, p);
  const auto most = static_cast<size_t>(std::max<int64_t>(1, options_.pod_history_ns / kSecondNs));
  while (q.points.size() > most) q.points.pop_front();
  while (!q.points.empty() &&
         q.points.front().time_ns < q.points.back().time_ns - options_.pod_history_ns) {
    q.points.pop_front();
  }
}

absl::Status TelemetryHub::Flush(int64_t now_ns, bool all) {
  std::vector<storage::TelemetryRecord> rows;
  bool retain = false;
  {
    absl::MutexLock lock(&mu_);
    // Close the settled seconds into pod points.
    const int64_t settled = FloorDiv(now_ns - options_.settle_ns, kSecondNs);
    while (!open_.empty() && (all || open_.begin()->first < settled)) {
      auto node = open_.extract(open_.begin());
      OpenSecond& o = node.mapped();
      PodPoint p;
      p.second = node.key();
      p.step_us = Median(std::move(o.step_means));
      p.duty_percent = o.duty_n > 0 ? o.duty_sum / o.duty_n : -1;
      p.steps = o.steps;
      p.chips = o.chips;
      pod_.push_back(p);
    }
    while (!pod_.empty() && pod_.front().second * kSecondNs < now_ns - options_.pod_history_ns) {
      pod_.pop_front();
    }
    // Chips whose interval ended without a later sample (an agent gone quiet, or shutdown).
    const int64_t current = FloorDiv(now_ns - options_.settle_ns, options_.store_interval_ns);
    for (auto& [key, r] : rollups_) {
      if (r.bucket >= 0 && (all || r.bucket < current)) {
        ready_.push_back(RowOf(key.first, key.second, r));
        r = Rollup{};
      }
    }
    rows.swap(ready_);
    retain = now_ns - last_retention_ns_ >= kRetentionEveryNs;
    if (retain) last_retention_ns_ = now_ns;
  }
  if (table_ == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(table_->Append(rows));
  {
    absl::MutexLock lock(&mu_);
    rows_stored_ += static_cast<int64_t>(rows.size());
  }
  if (retain) {
    ASSIGN_OR_RETURN(int64_t gone, table_->DeleteBefore(now_ns - options_.retention_ns));
    if (gone > 0) PODPROF_LOG(INFO) << "telemetry retention deleted " << gone << " rows";
  }
  return absl::OkStatus();
}

std::vector<PodPoint> TelemetryHub::PodHistory() const {
  absl::MutexLock lock(&mu_);
  return {pod_.begin(), pod_.end()};
}

std::map<std::pair<std::string, int>, std::vector<ChipPoint>> TelemetryHub::ChipHistory(
    int64_t since_ns) const {
  absl::MutexLock lock(&mu_);
  std::map<std::pair<std::string, int>, std::vector<ChipPoint>> out;
  for (const auto& [key, points] : chips_) {
    for (const ChipPoint& p : points) {
      if (p.time_ns >= since_ns) out[key].push_back(p);
    }
  }
  return out;
}

std::map<std::string, HostDcn> TelemetryHub::DcnHistory(int64_t since_ns) const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, HostDcn> out;
  for (const auto& [host, q] : dcn_) {
    HostDcn h;
    h.slice = q.slice;
    for (const DcnPoint& p : q.points) {
      if (p.time_ns >= since_ns) h.points.push_back(p);
    }
    if (!h.points.empty()) out[host] = std::move(h);
  }
  return out;
}

int64_t TelemetryHub::samples() const {
  absl::MutexLock lock(&mu_);
  return samples_;
}

int64_t TelemetryHub::rows_stored() const {
  absl::MutexLock lock(&mu_);
  return rows_stored_;
}

}  // namespace podprof::aggregator
