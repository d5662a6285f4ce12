#include "aggregator/service.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "aggregator/fleet_link.h"
#include "aggregator/service_internal.h"
#include "common/errno_status.h"
#include "common/logging.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "export/trace_export.h"
#include "export/xspace_export.h"
#include "fleet/capture_rows.h"
#include "ingest/capture_ingest.h"
#include "insight/change.h"
#include "insight/insight_proto.h"
#include "insight/verdict.h"
#include "proto/grpc_status.h"
#include "trace/chip_catalog.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

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

std::string StatusName(podprof::v1::CaptureStatus s) {
  const std::optional<storage::CaptureState> state = StateOf(s);
  return state ? storage::CaptureStateName(*state) : "";
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
  *s->mutable_options() = OptionsFromStoredJson(r.options_json);
  for (const storage::HostRow& h : r.host_rows) {
    auto* hr = s->add_hosts();
    hr->set_host_name(h.host);
    hr->set_status(StatusEnum(h.status));
    hr->set_error_message(h.error);
    hr->set_clock_offset_ns(h.clock_offset_ns);
    hr->set_clock_uncertainty_ns(h.clock_uncertainty_ns);
    hr->set_event_count(static_cast<uint64_t>(h.events));
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
    storage::Store& store, const std::string& capture_id, bool per_chip,
    const std::vector<storage::StatRow>& rows, size_t n) {
  absl::StatusOr<std::vector<storage::KernelInsightRow>> insights =
      store.KernelInsights(capture_id, per_chip);
  if (!insights.ok()) return insights.status();
  std::map<std::tuple<std::string, int, int64_t>, const storage::KernelInsightRow*> by_key;
  for (const auto& in : *insights) by_key[{in.host, in.chip, in.kernel_id}] = &in;
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
    storage::Store& store, const std::string& capture_id, bool per_chip,
    const std::vector<storage::StatRow>& rows, size_t n) {
  absl::StatusOr<std::vector<podprof::v1::KernelInsight>> insights =
      Judge(store, capture_id, per_chip, rows, n);
  if (!insights.ok()) return insights.status();
  std::vector<podprof::v1::KernelStats> out;
  for (size_t i = 0; i < insights->size(); ++i) {
    out.push_back(ToProto(rows[i]));
    *out.back().mutable_insight() = std::move((*insights)[i]);
  }
  return out;
}

grpc::Status AggregatorService::Refuse(const grpc::ServerContext& context,
                                       const absl::Status& denied) {
  refusals_.Note(context.peer(), denied.message());
  return ToGrpc(denied);
}

grpc::Status AggregatorService::Register(grpc::ServerContext* context,
                                         const podprof::v1::RegisterRequest* req,
                                         podprof::v1::RegisterResponse* resp) {
  if (absl::Status a = Access()->agents.Check(*context, "an agent"); !a.ok()) {
    return Refuse(*context, a);
  }
  if (req->host().host_name().empty() || req->host().agent_address().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a registration needs the host name and the agent's address");
  }
  if (absl::Status s = registry_->Register(*req, security::PeerIdentities(*context)); !s.ok()) {
    return Refuse(*context, s);
  }
  resp->set_heartbeat_interval_ms(
      static_cast<uint32_t>(registry_->heartbeat_interval_ns() / 1'000'000));
  resp->set_aggregator_version("podprof-aggregator 0.1.0");
  return grpc::Status::OK;
}

grpc::Status AggregatorService::Heartbeat(grpc::ServerContext* context,
                                          const podprof::v1::HeartbeatRequest* req,
                                          podprof::v1::HeartbeatResponse* resp) {
  if (absl::Status a = Access()->agents.Check(*context, "an agent"); !a.ok()) {
    return Refuse(*context, a);
  }
  absl::StatusOr<bool> known = registry_->Heartbeat(*req, security::PeerIdentities(*context));
  if (!known.ok()) return Refuse(*context, known.status());
  resp->set_reregister(!*known);
  resp->set_heartbeat_interval_ms(
      static_cast<uint32_t>(registry_->heartbeat_interval_ns() / 1'000'000));
  return grpc::Status::OK;
}

grpc::Status AggregatorService::ListAgents(grpc::ServerContext*,
                                           const podprof::v1::ListAgentsRequest* req,
                                           podprof::v1::ListAgentsResponse* resp) {
  std::map<std::string, std::string> selector(req->label_selector().begin(),
                                              req->label_selector().end());
  for (auto& a : registry_->List(selector)) *resp->add_agents() = std::move(a);
  if (fleet_ != nullptr) FillFleetStatus(*fleet_, resp->mutable_fleet());
  return grpc::Status::OK;
}

grpc::Status AggregatorService::StartCapture(grpc::ServerContext* context,
                                             const podprof::v1::StartCaptureRequest* req,
                                             podprof::v1::StartCaptureResponse* resp) {
  if (absl::Status a = Access()->operators.Check(*context, "an operator"); !a.ok()) {
    return Refuse(*context, a);
  }
  absl::StatusOr<podprof::v1::StartCaptureResponse> r = orchestrator_->Start(*req);
  if (!r.ok()) return ToGrpc(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status AggregatorService::WatchCapture(
    grpc::ServerContext* context, const podprof::v1::WatchCaptureRequest* req,
    grpc::ServerWriter<podprof::v1::CaptureProgress>* writer) {
  return ToGrpc(orchestrator_->Watch(
      req->capture_id(),
      [writer](const podprof::v1::CaptureProgress& p) { return writer->Write(p); },
      [context] { return context->IsCancelled(); }));
}

grpc::Status AggregatorService::CancelCapture(grpc::ServerContext* context,
                                              const podprof::v1::CancelCaptureRequest* req,
                                              podprof::v1::CancelCaptureResponse* resp) {
  if (absl::Status a = Access()->operators.Check(*context, "an operator"); !a.ok()) {
    return Refuse(*context, a);
  }
  absl::StatusOr<podprof::v1::CaptureStatus> s = orchestrator_->Cancel(req->capture_id());
  if (!s.ok()) return ToGrpc(s.status());
  resp->set_status(*s);
  return grpc::Status::OK;
}

grpc::Status AggregatorService::ListCaptures(grpc::ServerContext*,
                                             const podprof::v1::ListCapturesRequest* req,
                                             podprof::v1::ListCapturesResponse* resp) {
  storage::CaptureQuery q;
  q.since_ns = req->since_ns();
  q.until_ns = req->until_ns() > 0 ? req->until_ns() : INT64_MAX;
  q.status = StateOf(req->status());
  q.labels = {req->label_selector().begin(), req->label_selector().end()};
  q.limit = req->limit() > 0 ? static_cast<int>(std::min<uint32_t>(req->limit(), 1000)) : 100;
  q.page_token = req->page_token();
  std::string next;
  absl::StatusOr<std::vector<storage::CaptureRow>> rows = store_->ListCaptures(q, &next);
  if (!rows.ok()) return ToGrpc(rows.status());
  for (const auto& r : *rows) FillSummary(r, resp->add_captures());
  resp->set_next_page_token(next);
  return grpc::Status::OK;
}

grpc::Status AggregatorService::GetKernelStats(grpc::ServerContext*,
                                               const podprof::v1::GetKernelStatsRequest* req,
                                               podprof::v1::GetKernelStatsResponse* resp) {
  if (req->capture_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "capture_id is empty");
  }
  storage::StatsQuery q;
  q.capture_id = req->capture_id();
  switch (req->group_by()) {
    case podprof::v1::KERNEL_GROUPING_CHIP:
      q.group_by = storage::Grouping::kChip;
      break;
    case podprof::v1::KERNEL_GROUPING_HOST:
      q.group_by = storage::Grouping::kHost;
      break;
    case podprof::v1::KERNEL_GROUPING_CATEGORY:
      q.group_by = storage::Grouping::kCategory;
      break;
    case podprof::v1::KERNEL_GROUPING_KERNEL:
      q.group_by = storage::Grouping::kKernel;
      break;
    default:
      q.group_by = req->per_chip() ? storage::Grouping::kChip : storage::Grouping::kKernel;
  }
  q.op_regex = req->filter().op_regex();
  if (absl::Status s = CheckUserPattern("filter.op_regex", q.op_regex); !s.ok()) return ToGrpc(s);
  if (q.op_regex.empty() && !req->filter().op_name().empty()) {
    // A plain name filter is a substring match.
    q.op_regex = RegexEscape(req->filter().op_name());
  }
  q.category = req->filter().category();
  q.host = req->host_name();
  if (req->filter().has_chip_ordinal()) q.chip = req->filter().chip_ordinal();
  absl::StatusOr<storage::Order> order = OrderOf(req->order());
  if (!order.ok()) return ToGrpc(order.status());
  q.order = *order;
  absl::StatusOr<std::vector<storage::StatRow>> rows = store_->KernelStats(q);
  if (!rows.ok()) return ToGrpc(rows.status());
  resp->set_capture_id(req->capture_id());
  resp->set_matched_count(static_cast<uint32_t>(rows->size()));
  size_t n = req->top_n() > 0 ? std::min<size_t>(req->top_n(), rows->size()) : rows->size();
  if (q.group_by != storage::Grouping::kKernel && q.group_by != storage::Grouping::kChip) {
    for (size_t i = 0; i < n; ++i) *resp->add_stats() = ToProto((*rows)[i]);
    return grpc::Status::OK;  // no verdicts for host or category roll-ups
  }
  absl::StatusOr<std::vector<podprof::v1::KernelStats>> judged =
      JudgedStats(*store_, q.capture_id, q.group_by == storage::Grouping::kChip, *rows, n);
  if (!judged.ok()) return ToGrpc(judged.status());
  for (auto& k : *judged) *resp->add_stats() = std::move(k);
  return grpc::Status::OK;
}

grpc::Status AggregatorService::KernelHistory(grpc::ServerContext*,
                                              const podprof::v1::KernelHistoryRequest* req,
                                              podprof::v1::KernelHistoryResponse* resp) {
  storage::HistoryQuery q;
  q.op_regex =
      !req->filter().op_regex().empty() ? req->filter().op_regex() : req->filter().op_name();
  if (absl::Status s = CheckUserPattern(
          !req->filter().op_regex().empty() ? "filter.op_regex" : "filter.op_name", q.op_regex);
      !s.ok()) {
    return ToGrpc(s);
  }
  q.module = req->filter().module();
  q.since_ns = req->since_ns();
  q.until_ns = req->until_ns() > 0 ? req->until_ns() : INT64_MAX;
  q.max_kernels = req->max_kernels() > 0 ? static_cast<int>(req->max_kernels()) : 20;
  absl::StatusOr<std::vector<storage::HistorySeries>> series = store_->KernelHistory(q);
  if (!series.ok()) return ToGrpc(series.status());
  for (const storage::HistorySeries& s : *series) {
    auto* out = resp->add_series();
    out->mutable_kernel()->set_module(s.module);
    out->mutable_kernel()->set_op_name(s.op_name);
    out->mutable_kernel()->set_category(s.category);
    size_t first = 0;
    if (req->max_points() > 0 && s.points.size() > req->max_points()) {
      first = s.points.size() - req->max_points();  // the most recent points
    }
    FillHistoryPoints(s.points, first, out->mutable_points());
  }
  return grpc::Status::OK;
}

namespace {

// A kernel's change between two captures, judged by insight's rules.
struct KernelDelta {
  storage::KernelPair pair;
  double mean_change = 0, p50_change = 0, p99_change = 0;
  bool regression = false;
};

// Each pair judged (a kernel on one side only has no change), regressions first, then by the
// larger side's total time.
std::vector<KernelDelta> JudgeDeltas(std::vector<storage::KernelPair> pairs, double threshold) {
  std::vector<KernelDelta> out;
  out.reserve(pairs.size());
  for (storage::KernelPair& p : pairs) {
    KernelDelta d;
    d.pair = std::move(p);
    const std::optional<storage::StatRow>& b = d.pair.baseline;
    const std::optional<storage::StatRow>& c = d.pair.candidate;
    if (b && c) {
      const auto mean = [](const storage::StatRow& r) {
        return r.count > 0 ? static_cast<double>(r.total_ps) / r.count : 0.0;
      };
      d.mean_change = insight::RelativeChange(mean(*b), mean(*c));
      const insight::QuantileShift median = insight::MedianShift(b->sketch, c->sketch, threshold);
      d.p50_change = median.change;
      d.regression = median.regressed;
      d.p99_change = insight::TailShift(b->sketch, c->sketch, threshold).change;
    }
    out.push_back(std::move(d));
  }
  const auto total = [](const KernelDelta& d) {
    return std::max(d.pair.baseline ? d.pair.baseline->total_ps : 0,
                    d.pair.candidate ? d.pair.candidate->total_ps : 0);
  };
  std::sort(out.begin(), out.end(), [&](const KernelDelta& a, const KernelDelta& b) {
    return std::make_tuple(!a.regression, -total(a), a.pair.op_name) <
           std::make_tuple(!b.regression, -total(b), b.pair.op_name);
  });
  return out;
}

}  // namespace

grpc::Status AggregatorService::CompareCaptures(grpc::ServerContext*,
                                                const podprof::v1::CompareCapturesRequest* req,
                                                podprof::v1::CompareCapturesResponse* resp) {
  if (req->baseline_capture_id().empty() || req->candidate_capture_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "both baseline_capture_id and candidate_capture_id are required");
  }
  const double threshold = req->regression_threshold() > 0 ? req->regression_threshold()
                                                           : insight::kDefaultRegressionThreshold;
  if (absl::Status s = CheckUserPattern("filter.op_regex", req->filter().op_regex()); !s.ok()) {
    return ToGrpc(s);
  }
  absl::StatusOr<std::vector<storage::KernelPair>> pairs = store_->PairKernels(
      req->baseline_capture_id(), req->candidate_capture_id(), req->filter().op_regex());
  if (!pairs.ok()) return ToGrpc(pairs.status());
  const std::vector<KernelDelta> rows = JudgeDeltas(*std::move(pairs), threshold);
  // Each side's kernels judged as `podprof stats` judges them, counters and verdicts included.
  using Insights = std::map<int64_t, storage::KernelInsightRow>;
  auto insights_of = [&](const std::string& capture) -> absl::StatusOr<Insights> {
    ASSIGN_OR_RETURN(std::vector<storage::KernelInsightRow> rows,
                     store_->KernelInsights(capture, false));
    Insights by_kernel;
    for (storage::KernelInsightRow& r : rows) by_kernel[r.kernel_id] = std::move(r);
    return by_kernel;
  };
  absl::StatusOr<Insights> base_insights = insights_of(req->baseline_capture_id());
  if (!base_insights.ok()) return ToGrpc(base_insights.status());
  absl::StatusOr<Insights> cand_insights = insights_of(req->candidate_capture_id());
  if (!cand_insights.ok()) return ToGrpc(cand_insights.status());
  auto Judged = [](const storage::StatRow& r, const absl::StatusOr<Insights>& in) {
    podprof::v1::KernelStats k = ToProto(r);
    auto it = in->find(r.kernel.id);
    *k.mutable_insight() = InsightOf(r, it == in->end() ? nullptr : &it->second);
    return k;
  };
  uint32_t regressions = 0;
  size_t n = 0;
  for (const KernelDelta& delta : rows) {
    const storage::KernelPair& d = delta.pair;
    if (delta.regression) ++regressions;
    if (req->top_n() > 0 && n >= req->top_n()) continue;
    ++n;
    auto* out = resp->add_deltas();
    out->mutable_kernel()->set_module(d.module);
    out->mutable_kernel()->set_op_name(d.op_name);
    out->mutable_kernel()->set_category(d.category);
    if (d.baseline) *out->mutable_baseline() = Judged(*d.baseline, base_insights);
    if (d.candidate) *out->mutable_candidate() = Judged(*d.candidate, cand_insights);
    out->set_mean_change(delta.mean_change);
    out->set_p50_change(delta.p50_change);
    out->set_p99_change(delta.p99_change);
    out->set_total_ps_change((d.candidate ? d.candidate->total_ps : 0) -
                             (d.baseline ? d.baseline->total_ps : 0));
    out->set_regression(delta.regression);
  }
  resp->set_regression_count(regressions);
  return grpc::Status::OK;
}

}  // namespace podprof::aggregator
