// Stored rows as the API's messages, and the API's enums as the store's: the one conversion of
// each, shared by the query layer (queries.h), the RPC handlers, the HTTP routes and exports.
#include "aggregator/api/api_rows.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "aggregator/capture/stored_options.h"
#include "fleet/capture_rows.h"
#include "insight/change.h"
#include "insight/insight_proto.h"
#include "insight/verdict.h"
#include "trace/chip_catalog.h"
#include "trace/kernel_stats.h"

namespace podprof::aggregator {

podprof::v1::CaptureStatus StatusEnum(storage::CaptureState s) {
  switch (s) {
    case storage::CaptureState::kRunning:
      return podprof::v1::CAPTURE_STATUS_RUNNING;
    case storage::CaptureState::kComplete:
      return podprof::v1::CAPTURE_STATUS_COMPLETE;
    case storage::CaptureState::kPartial:
      return podprof::v1::CAPTURE_STATUS_PARTIAL;
    case storage::CaptureState::kFailed:
      return podprof::v1::CAPTURE_STATUS_FAILED;
    case storage::CaptureState::kCancelled:
      return podprof::v1::CAPTURE_STATUS_CANCELLED;
    case storage::CaptureState::kInterrupted:
      return podprof::v1::CAPTURE_STATUS_INTERRUPTED;
  }
  return podprof::v1::CAPTURE_STATUS_UNSPECIFIED;
}

podprof::v1::CaptureStatus StatusEnum(storage::HostOutcome o) {
  return o == storage::HostOutcome::kComplete ? podprof::v1::CAPTURE_STATUS_COMPLETE
                                              : podprof::v1::CAPTURE_STATUS_FAILED;
}

std::optional<storage::CaptureState> StateOf(podprof::v1::CaptureStatus s) {
  for (const storage::CaptureState state : storage::kCaptureStates) {
    if (StatusEnum(state) == s) return state;
  }
  return std::nullopt;  // unspecified
}

// `text` as a regular expression that matches it literally.
std::string RegexEscape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

void FillHistoryPoints(const std::vector<storage::HistoryPoint>& points, size_t first,
                       google::protobuf::RepeatedPtrField<podprof::v1::KernelHistoryPoint>* out) {
  for (size_t i = first; i < points.size(); ++i) {
    const storage::HistoryPoint& p = points[i];
    podprof::v1::KernelHistoryPoint* pt = out->Add();
    pt->set_capture_id(p.capture_id);
    pt->set_capture_start_ns(p.start_ns);
    pt->set_count(static_cast<uint64_t>(p.count));
    pt->set_mean_ps(p.count > 0 ? static_cast<double>(p.total_ps) / p.count : 0);
    pt->set_p50_ps(std::llround(p.sketch.Quantile(0.5)));
    pt->set_p90_ps(std::llround(p.sketch.Quantile(0.9)));
    pt->set_p99_ps(std::llround(p.sketch.Quantile(0.99)));
    pt->set_chip_count(static_cast<uint32_t>(p.chips));
    pt->set_total_ps(p.total_ps);
    pt->set_achieved_tflops(insight::AchievedTflops(p.flops_executed, p.total_ps));
    if (i > 0) {
      pt->set_regression(
          insight::MedianShift(points[i - 1].sketch, p.sketch, insight::kDefaultRegressionThreshold)
              .regressed);
    }
    if (!p.perf_totals.empty()) {
      const insight::KernelProfile k =
          insight::ProfileFromCounters(trace::FindGenerationByName(p.generation), p.perf_totals,
                                       p.perf_covered_ps, 0, p.total_ps);
      if (k.present) insight::ProfileToProto(k, pt->mutable_kernel_profile());
    }
    for (const auto& [name, mean] : insight::GaugeMeans(p.busy_gauges)) {
      (*pt->mutable_utilization())[name] = mean;
    }
  }
}

void FillKernelDef(const storage::KernelKey& k, podprof::v1::KernelDef* d) {
  d->set_kernel_id(static_cast<uint64_t>(k.id));
  d->set_module(k.module);
  d->set_op_name(k.op_name);
  d->set_category(k.category);
  d->set_program_id(k.program_id);
  d->set_hlo_text_hash(k.hlo_hash);
  d->set_flops(k.flops);
  d->set_bytes_accessed(k.bytes_accessed);
}

void FillSummary(const storage::CaptureRow& r, podprof::v1::CaptureSummary* s) {
  s->set_capture_id(r.id);
  s->set_created_ns(r.created_ns);
  s->set_start_ns(r.start_ns);
  s->set_end_ns(r.end_ns);
  s->set_status(StatusEnum(r.status));
  s->set_source(storage::CaptureSourceName(r.source));
  s->set_kernel_count(static_cast<uint64_t>(r.kernels));
  s->set_event_count(static_cast<uint64_t>(r.events));
  s->set_chip_count(static_cast<uint32_t>(r.chips));
  for (const auto& [k, v] : r.labels) (*s->mutable_labels())[k] = v;
  if (r.source == storage::CaptureSource::kSnapshot) {
    auto window = r.labels.find(kWindowLabel);
    if (window != r.labels.end()) s->set_window(window->second);
    if (std::optional<podprof::v1::SnapshotCause> cause = CauseFromLabels(r.labels)) {
      *s->mutable_cause() = *std::move(cause);
    }
  }
  *s->mutable_options() = OptionsFromStoredJson(r.options_json);
  for (const storage::HostRow& h : r.host_rows) {
    auto* hr = s->add_hosts();
    hr->set_host_name(h.host);
    hr->set_status(StatusEnum(h.status));
    hr->set_error_message(h.error);
    hr->set_clock_offset_ns(h.clock_offset_ns);
    hr->set_clock_uncertainty_ns(h.clock_uncertainty_ns);
    hr->set_clock_drift_ppb(h.correction.drift_ppb);
    hr->set_event_count(static_cast<uint64_t>(h.events));
    hr->set_analysed_by(h.analysed_by);
    for (const std::string& w : h.warnings) hr->add_warnings(w);
  }
}

absl::StatusOr<storage::Order> OrderOf(podprof::v1::KernelOrder o) {
  switch (o) {
    case podprof::v1::KERNEL_ORDER_UNSPECIFIED:
    case podprof::v1::KERNEL_ORDER_TOTAL_TIME:
      return storage::Order::kTotal;
    case podprof::v1::KERNEL_ORDER_COUNT:
      return storage::Order::kCount;
    case podprof::v1::KERNEL_ORDER_MEAN:
      return storage::Order::kMean;
    case podprof::v1::KERNEL_ORDER_P99:
      return storage::Order::kP99;
    default:
      return absl::InvalidArgumentError(absl::StrCat("ordering ", podprof::v1::KernelOrder_Name(o),
                                                     " is not supported; use total, count, "
                                                     "mean or p99"));
  }
}

podprof::v1::KernelStats ToProto(const storage::StatRow& r) {
  podprof::v1::KernelStats k;
  k.set_host_name(r.host);
  k.set_chip_ordinal(r.chip);
  FillKernelDef(r.kernel, k.mutable_kernel());
  k.set_count(static_cast<uint64_t>(r.count));
  k.set_total_ps(r.total_ps);
  k.set_min_ps(r.min_ps);
  k.set_max_ps(r.max_ps);
  k.set_mean_ps(r.count > 0 ? static_cast<double>(r.total_ps) / r.count : 0);
  auto q = [&](double p) {
    return std::clamp<int64_t>(std::llround(r.sketch.Quantile(p)), r.min_ps, r.max_ps);
  };
  k.set_p50_ps(q(0.5));
  k.set_p90_ps(q(0.9));
  k.set_p99_ps(q(0.99));
  k.set_total_flops(r.kernel.flops * r.count);
  k.set_total_bytes_accessed(r.kernel.bytes_accessed * r.count);
  trace::KernelStats ks;
  ks.count = r.count;
  ks.total_ps = r.total_ps;
  trace::KernelDef def;
  def.flops = r.kernel.flops;
  def.bytes_accessed = r.kernel.bytes_accessed;
  def.category = r.kernel.category;
  trace::KernelRates rates = trace::ComputeRates(ks, def, r.peak_tflops, r.peak_hbm_gbps);
  k.set_achieved_tflops(rates.achieved_tflops);
  k.set_achieved_hbm_gbps(rates.achieved_hbm_gbps);
  k.set_fraction_of_peak_flops(rates.fraction_of_peak_flops);
  k.set_fraction_of_peak_hbm(rates.fraction_of_peak_hbm);
  k.set_sketch(r.sketch.Serialize());
  k.set_chip_count(static_cast<uint32_t>(r.chips));
  return k;
}

// The verdict and counter figures of a stats row, from what the store attributed to it.

podprof::v1::KernelInsight InsightOf(const storage::StatRow& r,
                                     const storage::KernelInsightRow* in) {
  const insight::KernelFacts f = fleet::FactsOf(r, in);
  podprof::v1::KernelInsight out;
  insight::VerdictToProto(f, insight::Decide(f), &out);
  // Running counters' totals (energy, cycles) as the store attributed them.
  if (in != nullptr) {
    for (const auto& [name, total] : in->totals) (*out.mutable_totals())[name] = total;
    out.set_counter_covered_ps(in->covered_ps);
  }
  return out;
}

// The insights of the first `n` of `rows` (stats grouped by kernel, or by chip with
// `per_chip`), in order.
absl::StatusOr<std::vector<podprof::v1::KernelInsight>> Judge(
    storage::InsightQueries& insights, const std::string& capture_id, bool per_chip,
    const std::vector<storage::StatRow>& rows, size_t n) {
  absl::StatusOr<std::vector<storage::KernelInsightRow>> stored =
      insights.KernelInsights(capture_id, per_chip, fleet::SyncWaitScope());
  if (!stored.ok()) return stored.status();
  std::map<std::tuple<std::string, int, int64_t>, const storage::KernelInsightRow*> by_key;
  for (const auto& in : *stored) by_key[{in.host, in.chip, in.kernel_id}] = &in;
  std::vector<podprof::v1::KernelInsight> out;
  for (size_t i = 0; i < std::min(n, rows.size()); ++i) {
    const storage::StatRow& r = rows[i];
    auto it = by_key.find({per_chip ? r.host : "", per_chip ? r.chip : -1, r.kernel.id});
    out.push_back(InsightOf(r, it == by_key.end() ? nullptr : it->second));
  }
  return out;
}

// Stats rows with their insights, as the API gives them.
absl::StatusOr<std::vector<podprof::v1::KernelStats>> JudgedStats(
    storage::InsightQueries& insights, const std::string& capture_id, bool per_chip,
    const std::vector<storage::StatRow>& rows, size_t n) {
  absl::StatusOr<std::vector<podprof::v1::KernelInsight>> judged =
      Judge(insights, capture_id, per_chip, rows, n);
  if (!judged.ok()) return judged.status();
  std::vector<podprof::v1::KernelStats> out;
  for (size_t i = 0; i < judged->size(); ++i) {
    out.push_back(ToProto(rows[i]));
    *out.back().mutable_insight() = std::move((*judged)[i]);
  }
  return out;
}

podprof::v1::TelemetryRow ToProto(const storage::TelemetryRecord& r) {
  podprof::v1::TelemetryRow row;
  row.set_host(r.host);
  row.set_time_ns(r.time_ns);
  row.set_interval_ns(r.interval_ns);
  podprof::v1::ChipTelemetry* t = row.mutable_chip();
  t->set_chip(r.chip);
  t->set_steps(r.steps);
  t->set_step_mean_us(r.step_mean_us);
  t->set_step_max_us(r.step_max_us);
  t->set_duty_cycle_percent(r.duty_cycle_percent);
  t->set_hbm_used_bytes(r.hbm_used_bytes);
  t->set_queued(r.queued);
  t->set_collectives(r.collectives);
  t->set_collective_mean_us(r.collective_mean_us);
  t->set_dcn_transfers(r.dcn_transfers);
  t->set_dcn_latency_p50_us(r.dcn_latency_p50_us);
  t->set_dcn_latency_p99_us(r.dcn_latency_p99_us);
  return row;
}

void FillFleetStatus(fleet::Replicator& replicator, podprof::v1::FleetStatus* out) {
  const fleet::ReplicatorStatus s = replicator.Status();
  out->set_enabled(true);
  out->set_url(replicator.clickhouse().url());
  out->set_database(replicator.options().database);
  out->set_pod(replicator.options().pod);
  out->set_pending(static_cast<uint64_t>(s.backlog.pending));
  out->set_oldest_pending_unix_ns(s.backlog.oldest_queued_ns);
  out->set_backlog_limit(static_cast<uint64_t>(replicator.options().backlog_limit));
  out->set_rejected(static_cast<uint64_t>(s.backlog.rejected));
  for (const auto& [id, why] : s.backlog.rejections) {
    podprof::v1::FleetRejection* r = out->add_rejections();
    r->set_capture_id(id);
    r->set_error(why);
  }
  out->set_replicated(static_cast<uint64_t>(s.replicated));
  out->set_last_success_unix_ns(s.last_success_ns);
  out->set_last_error(s.last_error);
}

}  // namespace podprof::aggregator
