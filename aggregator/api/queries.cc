#include "aggregator/api/queries.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/api/api_rows.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "fleet/capture_rows.h"
#include "insight/change.h"
#include "insight/evidence.h"
#include "trace/kernel_stats.h"

namespace podprof::aggregator {

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

absl::StatusOr<v1::ListCapturesResponse> Queries::ListCaptures(
    const v1::ListCapturesRequest& request) {
  v1::ListCapturesResponse out;
  storage::CaptureQuery q;
  q.since_ns = request.since_ns();
  q.until_ns = request.until_ns() > 0 ? request.until_ns() : INT64_MAX;
  q.status = StateOf(request.status());
  q.labels = {request.label_selector().begin(), request.label_selector().end()};
  q.limit = request.limit() > 0
                ? static_cast<int>(std::min<uint32_t>(request.limit(), kMaxCaptureLimit))
                : kDefaultCaptureLimit;
  q.page_token = request.page_token();
  std::string next;
  absl::StatusOr<std::vector<storage::CaptureRow>> rows = reads_.captures().List(q, &next);
  if (!rows.ok()) return rows.status();
  for (const auto& r : *rows) FillSummary(r, out.add_captures());
  out.set_next_page_token(next);
  return out;
}

absl::StatusOr<v1::GetKernelStatsResponse> Queries::KernelStats(
    const v1::GetKernelStatsRequest& request) {
  v1::GetKernelStatsResponse out;
  if (request.capture_id().empty()) {
    return absl::InvalidArgumentError("capture_id is empty");
  }
  storage::StatsQuery q;
  q.capture_id = request.capture_id();
  switch (request.group_by()) {
    case v1::KERNEL_GROUPING_CHIP:
      q.group_by = storage::Grouping::kChip;
      break;
    case v1::KERNEL_GROUPING_HOST:
      q.group_by = storage::Grouping::kHost;
      break;
    case v1::KERNEL_GROUPING_CATEGORY:
      q.group_by = storage::Grouping::kCategory;
      break;
    case v1::KERNEL_GROUPING_KERNEL:
      q.group_by = storage::Grouping::kKernel;
      break;
    default:
      q.group_by = request.per_chip() ? storage::Grouping::kChip : storage::Grouping::kKernel;
  }
  q.op_regex = request.filter().op_regex();
  if (absl::Status s = CheckUserPattern("filter.op_regex", q.op_regex); !s.ok()) return s;
  if (q.op_regex.empty() && !request.filter().op_name().empty()) {
    // A plain name filter is a substring match.
    q.op_regex = RegexEscape(request.filter().op_name());
  }
  q.category = request.filter().category();
  q.host = request.host_name();
  if (request.filter().has_chip_ordinal()) q.chip = request.filter().chip_ordinal();
  absl::StatusOr<storage::Order> order = OrderOf(request.order());
  if (!order.ok()) return order.status();
  q.order = *order;
  absl::StatusOr<std::vector<storage::StatRow>> rows = reads_.kernels().Stats(q);
  if (!rows.ok()) return rows.status();
  out.set_capture_id(request.capture_id());
  out.set_matched_count(static_cast<uint32_t>(rows->size()));
  size_t n = request.top_n() > 0 ? std::min<size_t>(request.top_n(), rows->size()) : rows->size();
  if (q.group_by != storage::Grouping::kKernel && q.group_by != storage::Grouping::kChip) {
    for (size_t i = 0; i < n; ++i) *out.add_stats() = ToProto((*rows)[i]);
    return out;  // no verdicts for host or category roll-ups
  }
  absl::StatusOr<std::vector<v1::KernelStats>> judged = JudgedStats(
      reads_.insights(), q.capture_id, q.group_by == storage::Grouping::kChip, *rows, n);
  if (!judged.ok()) return judged.status();
  for (auto& k : *judged) *out.add_stats() = std::move(k);
  return out;
}

absl::StatusOr<v1::KernelHistoryResponse> Queries::KernelHistory(
    const v1::KernelHistoryRequest& request) {
  v1::KernelHistoryResponse out;
  storage::HistoryQuery q;
  q.op_regex = !request.filter().op_regex().empty() ? request.filter().op_regex()
                                                    : request.filter().op_name();
  if (absl::Status s = CheckUserPattern(
          !request.filter().op_regex().empty() ? "filter.op_regex" : "filter.op_name", q.op_regex);
      !s.ok()) {
    return s;
  }
  q.module = request.filter().module();
  q.since_ns = request.since_ns();
  q.until_ns = request.until_ns() > 0 ? request.until_ns() : INT64_MAX;
  q.max_kernels = request.max_kernels() > 0 ? static_cast<int>(request.max_kernels()) : 20;
  absl::StatusOr<std::vector<storage::HistorySeries>> series = reads_.kernels().History(q);
  if (!series.ok()) return series.status();
  for (const storage::HistorySeries& s : *series) {
    auto* row = out.add_series();
    row->mutable_kernel()->set_module(s.module);
    row->mutable_kernel()->set_op_name(s.op_name);
    row->mutable_kernel()->set_category(s.category);
    size_t first = 0;
    if (request.max_points() > 0 && s.points.size() > request.max_points()) {
      first = s.points.size() - request.max_points();  // the most recent points
    }
    FillHistoryPoints(s.points, first, row->mutable_points());
  }
  return out;
}

absl::StatusOr<v1::CompareCapturesResponse> Queries::Compare(
    const v1::CompareCapturesRequest& request) {
  v1::CompareCapturesResponse out;
  if (request.baseline_capture_id().empty() || request.candidate_capture_id().empty()) {
    return absl::InvalidArgumentError(
        "both baseline_capture_id and candidate_capture_id are required");
  }
  const double threshold = request.regression_threshold() > 0
                               ? request.regression_threshold()
                               : insight::kDefaultRegressionThreshold;
  if (absl::Status s = CheckUserPattern("filter.op_regex", request.filter().op_regex()); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<storage::KernelPair>> pairs = reads_.kernels().Pair(
      request.baseline_capture_id(), request.candidate_capture_id(), request.filter().op_regex());
  if (!pairs.ok()) return pairs.status();
  const std::vector<KernelDelta> rows = JudgeDeltas(*std::move(pairs), threshold);
  // Each side's kernels judged as `podprof stats` judges them, counters and verdicts included.
  using Insights = std::map<int64_t, storage::KernelInsightRow>;
  auto insights_of = [&](const std::string& capture) -> absl::StatusOr<Insights> {
    ASSIGN_OR_RETURN(std::vector<storage::KernelInsightRow> rows,
                     reads_.insights().KernelInsights(capture, false, fleet::SyncWaitScope()));
    Insights by_kernel;
    for (storage::KernelInsightRow& r : rows) by_kernel[r.kernel_id] = std::move(r);
    return by_kernel;
  };
  absl::StatusOr<Insights> base_insights = insights_of(request.baseline_capture_id());
  if (!base_insights.ok()) return base_insights.status();
  absl::StatusOr<Insights> cand_insights = insights_of(request.candidate_capture_id());
  if (!cand_insights.ok()) return cand_insights.status();
  auto Judged = [](const storage::StatRow& r, const absl::StatusOr<Insights>& in) {
    v1::KernelStats k = ToProto(r);
    auto it = in->find(r.kernel.id);
    *k.mutable_insight() = InsightOf(r, it == in->end() ? nullptr : &it->second);
    return k;
  };
  uint32_t regressions = 0;
  size_t n = 0;
  for (const KernelDelta& delta : rows) {
    const storage::KernelPair& d = delta.pair;
    if (delta.regression) ++regressions;
    if (request.top_n() > 0 && n >= request.top_n()) continue;
    ++n;
    auto* row = out.add_deltas();
    row->mutable_kernel()->set_module(d.module);
    row->mutable_kernel()->set_op_name(d.op_name);
    row->mutable_kernel()->set_category(d.category);
    if (d.baseline) *row->mutable_baseline() = Judged(*d.baseline, base_insights);
    if (d.candidate) *row->mutable_candidate() = Judged(*d.candidate, cand_insights);
    row->set_mean_change(delta.mean_change);
    row->set_p50_change(delta.p50_change);
    row->set_p99_change(delta.p99_change);
    row->set_total_ps_change((d.candidate ? d.candidate->total_ps : 0) -
                             (d.baseline ? d.baseline->total_ps : 0));
    row->set_regression(delta.regression);
  }
  out.set_regression_count(regressions);
  return out;
}

namespace {

// The kernel a description is of: among the stored kernels of that name, the one the capture
// holds, with its pod-wide row.
struct Described {
  const storage::KernelIdentity* kernel = nullptr;
  storage::StatRow row;
};

absl::StatusOr<Described> FindDescribed(const StoreReads& store,
                                        const std::vector<storage::KernelIdentity>& found,
                                        const std::string& capture, const std::string& op_name,
                                        const std::string& exact) {
  storage::StatsQuery q;
  q.capture_id = capture;
  q.op_regex = exact;
  ASSIGN_OR_RETURN(std::vector<storage::StatRow> pod, store.kernels().Stats(q));
  for (const storage::KernelIdentity& k : found) {
    for (storage::StatRow& r : pod) {
      if (r.kernel.id == k.key.id) return Described{&k, std::move(r)};
    }
  }
  return absl::NotFoundError(
      absl::StrCat("capture ", capture, " holds no kernel named \"", op_name, "\""));
}

void FillDescribedDef(const storage::KernelIdentity& k, v1::KernelDef* def) {
  FillKernelDef(k.key, def);
  def->set_source(k.key.source);
  def->set_hlo_text(k.hlo_text);
  def->set_tf_op(k.tf_op);
  def->set_source_stack(k.source_stack);
  def->set_mlir(k.mlir);
  def->set_custom_call_target(trace::CustomCallTarget(k.hlo_text));
}

// The kernel's rows per chip, judged, and the time in each scope inside it.
absl::Status FillPerChip(const StoreReads& store, const std::string& capture, int64_t kernel_id,
                         const std::string& exact, v1::DescribeKernelResponse* out) {
  storage::StatsQuery q;
  q.capture_id = capture;
  q.op_regex = exact;
  q.group_by = storage::Grouping::kChip;
  ASSIGN_OR_RETURN(const std::vector<storage::StatRow> chips, store.kernels().Stats(q));
  std::vector<storage::StatRow> mine;
  for (const storage::StatRow& r : chips) {
    if (r.kernel.id == kernel_id) mine.push_back(r);
  }
  ASSIGN_OR_RETURN(std::vector<v1::KernelStats> per_chip,
                   JudgedStats(store.insights(), capture, true, mine, mine.size()));
  for (auto& k : per_chip) *out->add_per_chip() = std::move(k);
  ASSIGN_OR_RETURN(const std::vector<storage::KernelScopeRow> scopes,
                   store.insights().KernelScopes(capture, kernel_id));
  for (const storage::KernelScopeRow& sc : scopes) {
    v1::KernelScopeTime* t = out->add_scopes();
    t->set_line(sc.line);
    t->set_name(sc.name);
    t->set_count(static_cast<uint64_t>(sc.count));
    t->set_total_ps(sc.total_ps);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::DescribeKernelResponse> Queries::DescribeKernel(
    const v1::DescribeKernelRequest& request) {
  if (request.op_name().empty()) return absl::InvalidArgumentError("op_name is empty");
  if (request.op_name().size() > 1024 || request.module().size() > 1024) {
    return absl::InvalidArgumentError("op_name or module over 1024 bytes");
  }
  ASSIGN_OR_RETURN(const std::vector<storage::KernelIdentity> found,
                   reads_.kernels().Find(request.op_name(), request.module()));
  if (found.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no stored kernel is named \"", request.op_name(), "\"",
                     request.module().empty() ? "" : " in module " + request.module()));
  }
  // With a capture named, the kernel of that name it holds; else the newest stored.
  std::string capture = request.capture_id();
  if (capture.empty()) {
    ASSIGN_OR_RETURN(capture, reads_.kernels().LatestCaptureWith(found.front().key.id));
  }
  const std::string exact = absl::StrCat("^", RegexEscape(request.op_name()), "$");
  ASSIGN_OR_RETURN(const Described d,
                   FindDescribed(reads_, found, capture, request.op_name(), exact));
  v1::DescribeKernelResponse out;
  FillDescribedDef(*d.kernel, out.mutable_kernel());
  for (const storage::KernelIdentity& k : found) {
    if (&k != d.kernel) FillKernelDef(k.key, out.add_others());
  }
  out.set_capture_id(capture);
  ASSIGN_OR_RETURN(std::vector<v1::KernelStats> rollup,
                   JudgedStats(reads_.insights(), capture, false, {d.row}, 1));
  *out.mutable_rollup() = std::move(rollup.front());
  RETURN_IF_ERROR(FillPerChip(reads_, capture, d.kernel->key.id, exact, &out));

  storage::HistoryQuery h;
  h.module = d.kernel->key.module;
  h.op_regex = exact;
  h.max_kernels = 1;
  ASSIGN_OR_RETURN(const std::vector<storage::HistorySeries> series, reads_.kernels().History(h));
  if (!series.empty()) {
    const auto& points = series.front().points;
    const size_t limit = request.history_limit() > 0 ? request.history_limit() : 30;
    FillHistoryPoints(points, points.size() > limit ? points.size() - limit : 0,
                      out.mutable_history());
  }
  return out;
}

absl::StatusOr<v1::GetStragglersResponse> Queries::Stragglers(
    const v1::GetStragglersRequest& request) {
  v1::GetStragglersResponse out;
  if (request.capture_id().empty()) {
    return absl::InvalidArgumentError("capture_id is empty");
  }
  absl::StatusOr<storage::StragglerReport> report =
      reads_.insights().Stragglers(request.capture_id());
  if (!report.ok()) return report.status();
  out.set_capture_id(request.capture_id());
  const insight::StragglerVerdict verdict = insight::JudgeStragglers(report->chips);
  out.set_verdict(verdict.text);
  out.set_straggler_named(verdict.named);
  out.set_left_out(static_cast<uint64_t>(report->left_out));
  out.set_left_out_example(report->left_out_example);
  for (size_t i = 0; i < report->chips.size(); ++i) {
    const trace::StragglerRow& c = report->chips[i];
    auto* row = out.add_chips();
    row->set_expected_last(c.expected_last);
    row->set_p_value(verdict.p_values[i]);
    row->set_significant(verdict.significant[i]);
    row->set_host_name(c.host);
    row->set_chip_ordinal(c.chip_ordinal);
    row->set_times_last(static_cast<uint64_t>(c.times_last));
    row->set_instances(static_cast<uint64_t>(c.instances));
    row->set_caused_wait_ps(c.caused_ps);
    row->set_lateness_ps(c.lateness_ps);
    for (int64_t step : c.steps) row->add_steps(step);
  }
  for (const auto& i : report->instances) {
    auto* row = out.add_worst();
    row->set_collective_id(i.id);
    row->set_kernel_name(i.kernel_name);
    row->set_step(i.step);
    row->set_straggler_host(i.straggler_host);
    row->set_straggler_chip(i.straggler_chip);
    row->set_chips(static_cast<uint32_t>(i.chips));
    row->set_spread_ps(i.spread_ps);
    row->set_lateness_ps(i.lateness_ps);
    row->set_caused_wait_ps(i.caused_ps);
  }
  return out;
}

v1::ListAgentsResponse Queries::Agents(const v1::ListAgentsRequest& request) {
  const std::map<std::string, std::string> selector(request.label_selector().begin(),
                                                    request.label_selector().end());
  v1::ListAgentsResponse out;
  for (auto& a : registry_.List(selector)) *out.add_agents() = std::move(a);
  if (fleet_ != nullptr) FillFleetStatus(*fleet_, out.mutable_fleet());
  return out;
}

absl::StatusOr<v1::CaptureSummary> Queries::Capture(const std::string& capture_id) {
  ASSIGN_OR_RETURN(const storage::CaptureRow row, reads_.captures().Get(capture_id));
  v1::CaptureSummary out;
  FillSummary(row, &out);
  return out;
}

absl::StatusOr<storage::CaptureRow> Queries::StoredCapture(const std::string& capture_id) {
  return reads_.captures().Get(capture_id);
}

absl::StatusOr<v1::GetTelemetryResponse> Queries::Telemetry(
    const v1::GetTelemetryRequest& request) {
  storage::TelemetryFilter f;
  f.since_ns = request.since_ns();
  f.until_ns = request.until_ns() > 0 ? request.until_ns() : INT64_MAX;
  f.hosts.assign(request.hosts().begin(), request.hosts().end());
  f.limit = request.limit() <= 0 ? kDefaultTelemetryLimit
                                 : std::min<int64_t>(request.limit(), kMaxTelemetryLimit);
  bool truncated = false;
  ASSIGN_OR_RETURN(const std::vector<storage::TelemetryRecord> rows,
                   reads_.telemetry().Read(f, &truncated));
  v1::GetTelemetryResponse out;
  for (const storage::TelemetryRecord& r : rows) *out.add_rows() = ToProto(r);
  out.set_truncated(truncated);
  return out;
}

}  // namespace podprof::aggregator
