// AggregatorService's kernel reports: a kernel described pod-wide and per chip with its
// history, and who made whom wait at a capture's collectives.
#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "aggregator/service.h"
#include "aggregator/service_internal.h"
#include "common/errno_status.h"
#include "common/logging.h"
#include "export/trace_export.h"
#include "export/xspace_export.h"
#include "ingest/capture_ingest.h"
#include "insight/evidence.h"
#include "insight/verdict.h"
#include "proto/grpc_status.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof::aggregator {

grpc::Status AggregatorService::DescribeKernel(grpc::ServerContext*,
                                               const podprof::v1::DescribeKernelRequest* req,
                                               podprof::v1::DescribeKernelResponse* resp) {
  if (req->op_name().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "op_name is empty");
  }
  if (req->op_name().size() > 1024 || req->module().size() > 1024) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "op_name or module over 1024 bytes");
  }
  absl::StatusOr<std::vector<storage::KernelIdentity>> found =
      store_->FindKernels(req->op_name(), req->module());
  if (!found.ok()) return ToGrpc(found.status());
  if (found->empty()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no stored kernel is named \"", req->op_name(), "\"",
                                     req->module().empty() ? "" : " in module " + req->module()));
  }
  // With a capture named, the kernel of that name it holds; else the newest stored.
  const storage::KernelIdentity* chosen = &found->front();
  std::string capture = req->capture_id();
  if (capture.empty()) {
    absl::StatusOr<std::string> latest = store_->LatestCaptureWith(chosen->key.id);
    if (!latest.ok()) return ToGrpc(latest.status());
    capture = *latest;
  }
  storage::StatsQuery q;
  q.capture_id = capture;
  q.op_regex = absl::StrCat("^", RegexEscape(req->op_name()), "$");
  absl::StatusOr<std::vector<storage::StatRow>> pod = store_->KernelStats(q);
  if (!pod.ok()) return ToGrpc(pod.status());
  const storage::StatRow* row = nullptr;
  for (const storage::KernelIdentity& k : *found) {
    for (const storage::StatRow& r : *pod) {
      if (row == nullptr && r.kernel.id == k.key.id) {
        row = &r;
        chosen = &k;
      }
    }
  }
  if (row == nullptr) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("capture ", capture, " holds no kernel named \"", req->op_name(), "\""));
  }
  podprof::v1::KernelDef* def = resp->mutable_kernel();
  FillKernelDef(chosen->key, def);
  def->set_source(chosen->key.source);
  def->set_hlo_text(chosen->hlo_text);
  def->set_tf_op(chosen->tf_op);
  def->set_source_stack(chosen->source_stack);
  def->set_mlir(chosen->mlir);
  def->set_custom_call_target(trace::CustomCallTarget(chosen->hlo_text));
  for (const storage::KernelIdentity& k : *found) {
    if (&k != chosen) FillKernelDef(k.key, resp->add_others());
  }
  resp->set_capture_id(capture);
  absl::StatusOr<std::vector<podprof::v1::KernelStats>> rollup =
      JudgedStats(*store_, capture, false, {*row}, 1);
  if (!rollup.ok()) return ToGrpc(rollup.status());
  *resp->mutable_rollup() = std::move(rollup->front());

  q.group_by = storage::Grouping::kChip;
  absl::StatusOr<std::vector<storage::StatRow>> chips = store_->KernelStats(q);
  if (!chips.ok()) return ToGrpc(chips.status());
  std::vector<storage::StatRow> mine;
  for (const storage::StatRow& r : *chips) {
    if (r.kernel.id == chosen->key.id) mine.push_back(r);
  }
  absl::StatusOr<std::vector<podprof::v1::KernelStats>> per_chip =
      JudgedStats(*store_, capture, true, mine, mine.size());
  if (!per_chip.ok()) return ToGrpc(per_chip.status());
  for (auto& k : *per_chip) *resp->add_per_chip() = std::move(k);
  absl::StatusOr<std::vector<storage::KernelScopeRow>> scopes =
      store_->KernelScopes(capture, chosen->key.id);
  if (!scopes.ok()) return ToGrpc(scopes.status());
  for (const storage::KernelScopeRow& sc : *scopes) {
    podprof::v1::KernelScopeTime* t = resp->add_scopes();
    t->set_line(sc.line);
    t->set_name(sc.name);
    t->set_count(static_cast<uint64_t>(sc.count));
    t->set_total_ps(sc.total_ps);
  }

  storage::HistoryQuery h;
  h.module = chosen->key.module;
  h.op_regex = q.op_regex;
  h.max_kernels = 1;
  absl::StatusOr<std::vector<storage::HistorySeries>> series = store_->KernelHistory(h);
  if (!series.ok()) return ToGrpc(series.status());
  if (!series->empty()) {
    const auto& points = series->front().points;
    size_t first = 0;
    const size_t limit = req->history_limit() > 0 ? req->history_limit() : 30;
    if (points.size() > limit) first = points.size() - limit;
    FillHistoryPoints(points, first, resp->mutable_history());
  }
  return grpc::Status::OK;
}

grpc::Status AggregatorService::GetStragglers(grpc::ServerContext*,
                                              const podprof::v1::GetStragglersRequest* req,
                                              podprof::v1::GetStragglersResponse* resp) {
  if (req->capture_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "capture_id is empty");
  }
  absl::StatusOr<storage::StragglerReport> report = store_->Stragglers(req->capture_id());
  if (!report.ok()) return ToGrpc(report.status());
  resp->set_capture_id(req->capture_id());
  const insight::StragglerVerdict verdict = insight::JudgeStragglers(report->chips);
  resp->set_verdict(verdict.text);
  resp->set_straggler_named(verdict.named);
  resp->set_left_out(static_cast<uint64_t>(report->left_out));
  resp->set_left_out_example(report->left_out_example);
  for (size_t i = 0; i < report->chips.size(); ++i) {
    const trace::StragglerRow& c = report->chips[i];
    auto* out = resp->add_chips();
    out->set_expected_last(c.expected_last);
    out->set_p_value(verdict.p_values[i]);
    out->set_significant(verdict.significant[i]);
    out->set_host_name(c.host);
    out->set_chip_ordinal(c.chip_ordinal);
    out->set_times_last(static_cast<uint64_t>(c.times_last));
    out->set_instances(static_cast<uint64_t>(c.instances));
    out->set_caused_wait_ps(c.caused_ps);
    out->set_lateness_ps(c.lateness_ps);
    for (int64_t step : c.steps) out->add_steps(step);
  }
  for (const auto& i : report->instances) {
    auto* out = resp->add_worst();
    out->set_collective_id(i.id);
    out->set_kernel_name(i.kernel_name);
    out->set_step(i.step);
    out->set_straggler_host(i.straggler_host);
    out->set_straggler_chip(i.straggler_chip);
    out->set_chips(static_cast<uint32_t>(i.chips));
    out->set_spread_ps(i.spread_ps);
    out->set_lateness_ps(i.lateness_ps);
    out->set_caused_wait_ps(i.caused_ps);
  }
  return grpc::Status::OK;
}

}  // namespace podprof::aggregator
