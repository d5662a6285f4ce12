#include "aggregator/service.h"

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/errno_status.h"
#include "common/logging.h"
#include "export/trace_export.h"
#include "export/xspace_export.h"
#include "ingest/capture_ingest.h"
#include "insight/verdict.h"
#include "proto/grpc_status.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof::aggregator {
namespace {

podprof::v1::CaptureStatus StatusEnum(const std::string& s) {
  if (s == "complete") return podprof::v1::CAPTURE_STATUS_COMPLETE;
  if (s == "partial") return podprof::v1::CAPTURE_STATUS_PARTIAL;
  if (s == "failed") return podprof::v1::CAPTURE_STATUS_FAILED;
  if (s == "cancelled") return podprof::v1::CAPTURE_STATUS_CANCELLED;
  if (s == "running") return podprof::v1::CAPTURE_STATUS_RUNNING;
  if (s == "interrupted") return podprof::v1::CAPTURE_STATUS_INTERRUPTED;
  return podprof::v1::CAPTURE_STATUS_UNSPECIFIED;
}

std::string StatusName(podprof::v1::CaptureStatus s) {
  switch (s) {
    case podprof::v1::CAPTURE_STATUS_COMPLETE:
      return "complete";
    case podprof::v1::CAPTURE_STATUS_PARTIAL:
      return "partial";
    case podprof::v1::CAPTURE_STATUS_FAILED:
      return "failed";
    case podprof::v1::CAPTURE_STATUS_CANCELLED:
      return "cancelled";
    case podprof::v1::CAPTURE_STATUS_RUNNING:
      return "running";
    case podprof::v1::CAPTURE_STATUS_INTERRUPTED:
      return "interrupted";
    default:
      return "";
  }
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

void FillHistoryPoint(const storage::HistoryPoint& p, podprof::v1::KernelHistoryPoint* pt) {
  pt->set_capture_id(p.capture_id);
  pt->set_capture_start_ns(p.start_ns);
  pt->set_count(static_cast<uint64_t>(p.count));
  pt->set_mean_ps(p.count > 0 ? static_cast<double>(p.total_ps) / p.count : 0);
  pt->set_p50_ps(std::llround(p.sketch.Quantile(0.5)));
  pt->set_p90_ps(std::llround(p.sketch.Quantile(0.9)));
  pt->set_p99_ps(std::llround(p.sketch.Quantile(0.99)));
  pt->set_chip_count(static_cast<uint32_t>(p.chips));
  pt->set_total_ps(p.total_ps);
  pt->set_achieved_tflops(p.achieved_tflops);
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
  s->set_kernel_count(static_cast<uint64_t>(r.kernels));
  s->set_event_count(static_cast<uint64_t>(r.events));
  s->set_chip_count(static_cast<uint32_t>(r.chips));
  for (const auto& [k, v] : r.labels) (*s->mutable_labels())[k] = v;
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

// Spools one uploaded file to disk so memory stays bounded by a chunk.
class Spool {
 public:
  explicit Spool(const std::string& dir) {
    path_ = dir + "/podprof-import-XXXXXX";
    fd_ = ::mkstemp(path_.data());
  }
  ~Spool() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return fd_ >= 0; }
  bool Append(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    bytes_ += static_cast<int64_t>(data.size());
    return true;
  }
  const std::string& path() const { return path_; }
  int64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t bytes_ = 0;
};

}  // namespace

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
  insight::KernelFacts f;
  f.category = r.kernel.category;
  f.flops = r.kernel.flops;
  f.bytes_accessed = r.kernel.bytes_accessed;
  f.count = r.count;
  f.total_ps = r.total_ps;
  f.peak_tflops = r.peak_tflops;
  f.peak_hbm_gbps = r.peak_hbm_gbps;
  if (in != nullptr) {
    f.gauges = in->gauges;
    f.wait_ps = in->wait_ps;
    f.straggler = in->straggler;
    f.collective = in->wait_instances > 0;
  }
  const insight::Verdict v = insight::Decide(f);
  podprof::v1::KernelInsight insight;
  podprof::v1::KernelInsight* out = &insight;
  out->set_verdict(insight::BoundName(v.bound));
  out->set_verdict_text(v.text);
  out->set_arithmetic_intensity(v.intensity);
  out->set_ridge_point(v.ridge);
  out->set_roofline_fraction(v.roofline_fraction);
  out->set_wait_fraction(v.wait_fraction);
  out->set_wait_ps(f.wait_ps);
  out->set_straggler(f.straggler);
  out->set_has_counters(in != nullptr && (!in->gauges.empty() || !in->totals.empty()));
  out->set_stall_fraction(v.stall_fraction);
  out->set_dominant_stall(v.dominant_stall);
  if (in != nullptr) {
    for (const auto& [name, mean] : in->gauges) (*out->mutable_utilization())[name] = mean;
    for (const auto& [name, total] : in->totals) (*out->mutable_totals())[name] = total;
    out->set_counter_covered_ps(in->covered_ps);
  }
  return insight;
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

grpc::Status AggregatorService::Register(grpc::ServerContext* context,
                                         const podprof::v1::RegisterRequest* req,
                                         podprof::v1::RegisterResponse* resp) {
  if (absl::Status a = access_.agents.Check(*context, "an agent"); !a.ok()) return ToGrpc(a);
  if (req->host().host_name().empty() || req->host().agent_address().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a registration needs the host name and the agent's address");
  }
  registry_->Register(*req);
  resp->set_heartbeat_interval_ms(
      static_cast<uint32_t>(registry_->heartbeat_interval_ns() / 1'000'000));
  resp->set_aggregator_version("podprof-aggregator 0.1.0");
  return grpc::Status::OK;
}

grpc::Status AggregatorService::Heartbeat(grpc::ServerContext* context,
                                          const podprof::v1::HeartbeatRequest* req,
                                          podprof::v1::HeartbeatResponse* resp) {
  if (absl::Status a = access_.agents.Check(*context, "an agent"); !a.ok()) return ToGrpc(a);
  resp->set_reregister(!registry_->Heartbeat(*req));
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
  return grpc::Status::OK;
}

grpc::Status AggregatorService::StartCapture(grpc::ServerContext* context,
                                             const podprof::v1::StartCaptureRequest* req,
                                             podprof::v1::StartCaptureResponse* resp) {
  if (absl::Status a = access_.operators.Check(*context, "an operator"); !a.ok()) {
    return ToGrpc(a);
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
  if (absl::Status a = access_.operators.Check(*context, "an operator"); !a.ok()) {
    return ToGrpc(a);
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
  q.status = StatusName(req->status());
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
    for (size_t i = first; i < points.size(); ++i) {
      FillHistoryPoint(points[i], resp->add_history());
    }
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
  for (const auto& c : report->chips) {
    auto* out = resp->add_chips();
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

grpc::Status AggregatorService::KernelHistory(grpc::ServerContext*,
                                              const podprof::v1::KernelHistoryRequest* req,
                                              podprof::v1::KernelHistoryResponse* resp) {
  storage::HistoryQuery q;
  q.op_regex =
      !req->filter().op_regex().empty() ? req->filter().op_regex() : req->filter().op_name();
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
    for (size_t i = first; i < s.points.size(); ++i) {
      FillHistoryPoint(s.points[i], out->add_points());
    }
  }
  return grpc::Status::OK;
}

grpc::Status AggregatorService::CompareCaptures(grpc::ServerContext*,
                                                const podprof::v1::CompareCapturesRequest* req,
                                                podprof::v1::CompareCapturesResponse* resp) {
  if (req->baseline_capture_id().empty() || req->candidate_capture_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "both baseline_capture_id and candidate_capture_id are required");
  }
  const double threshold = req->regression_threshold() > 0 ? req->regression_threshold() : 0.05;
  absl::StatusOr<std::vector<storage::KernelDeltaRow>> rows = store_->Compare(
      req->baseline_capture_id(), req->candidate_capture_id(), req->filter().op_regex(), threshold);
  if (!rows.ok()) return ToGrpc(rows.status());
  uint32_t regressions = 0;
  size_t n = 0;
  for (const storage::KernelDeltaRow& d : *rows) {
    if (d.regression) ++regressions;
    if (req->top_n() > 0 && n >= req->top_n()) continue;
    ++n;
    auto* out = resp->add_deltas();
    out->mutable_kernel()->set_module(d.module);
    out->mutable_kernel()->set_op_name(d.op_name);
    out->mutable_kernel()->set_category(d.category);
    if (d.baseline) *out->mutable_baseline() = ToProto(*d.baseline);
    if (d.candidate) *out->mutable_candidate() = ToProto(*d.candidate);
    out->set_mean_change(d.mean_change);
    out->set_p50_change(d.p50_change);
    out->set_p99_change(d.p99_change);
    out->set_total_ps_change((d.candidate ? d.candidate->total_ps : 0) -
                             (d.baseline ? d.baseline->total_ps : 0));
    out->set_regression(d.regression);
  }
  resp->set_regression_count(regressions);
  return grpc::Status::OK;
}

namespace {

// An ostream whose bytes go out as ExportChunks of at most kChunkBytes, so an export of any
// size streams with bounded memory. Goes bad when the client is gone.
class ChunkStreamBuf : public std::streambuf {
 public:
  static constexpr size_t kChunkBytes = 1 << 20;
  ChunkStreamBuf(grpc::ServerWriter<podprof::v1::ExportChunk>* writer, std::string path)
      : writer_(writer), path_(std::move(path)), buf_(kChunkBytes) {
    setp(buf_.data(), buf_.data() + buf_.size());
  }
  uint64_t bytes() const { return offset_ + static_cast<uint64_t>(pptr() - pbase()); }

 protected:
  int_type overflow(int_type c) override {
    if (!Send()) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }
  int sync() override { return Send() ? 0 : -1; }

 private:
  bool Send() {
    const size_t n = static_cast<size_t>(pptr() - pbase());
    if (n == 0) return ok_;
    podprof::v1::ExportChunk chunk;
    chunk.set_path(path_);
    chunk.set_offset(offset_);
    chunk.set_data(pbase(), n);
    ok_ = ok_ && writer_->Write(chunk);
    offset_ += n;
    setp(buf_.data(), buf_.data() + buf_.size());
    return ok_;
  }

  grpc::ServerWriter<podprof::v1::ExportChunk>* writer_;
  const std::string path_;
  std::vector<char> buf_;
  uint64_t offset_ = 0;
  bool ok_ = true;
};

std::string HostDescription(const storage::HostRow& h) {
  if (h.status != "complete") return absl::StrCat(h.status, ": ", h.error);
  return absl::StrCat("clock correction ", h.clock_offset_ns, " ns +- ", h.clock_uncertainty_ns,
                      " ns");
}

}  // namespace

grpc::Status AggregatorService::ExportCapture(
    grpc::ServerContext* context, const podprof::v1::ExportCaptureRequest* request,
    grpc::ServerWriter<podprof::v1::ExportChunk>* writer) {
  const auto format = request->format();
  if (format != podprof::v1::EXPORT_FORMAT_PERFETTO &&
      format != podprof::v1::EXPORT_FORMAT_CHROME_JSON &&
      format != podprof::v1::EXPORT_FORMAT_XSPACE_DIR) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("export format ", static_cast<int>(format),
                                     " is not one of perfetto, chrome json, xspace dir"));
  }
  absl::StatusOr<storage::CaptureRow> row = store_->GetCapture(request->capture_id());
  if (!row.ok()) return ToGrpc(row.status());
  if (format == podprof::v1::EXPORT_FORMAT_XSPACE_DIR) {
    // One file per host, each a whole XSpace: only one host's is ever in memory.
    const std::string run = exporter::XprofRunName(row->start_ns);
    uint64_t files = 0;
    absl::Status s = store_->ForEachHost(request->capture_id(), [&](storage::StoredHost& h) {
      if (context->IsCancelled()) return absl::CancelledError("the client went away");
      if (h.capture.host.chips.empty()) return absl::OkStatus();  // a host that failed
      ChunkStreamBuf buf(writer,
                         absl::StrCat("plugins/profile/", run, "/", h.row.host, ".xplane.pb"));
      std::ostream out(&buf);
      if (!exporter::ToXSpace(h.capture).SerializeToOstream(&out) || !out.flush()) {
        return absl::UnavailableError("the client stopped reading");
      }
      ++files;
      return absl::OkStatus();
    });
    if (!s.ok()) return ToGrpc(s);
    PODPROF_LOG(INFO) << "exported " << request->capture_id() << " as an XProf session of " << files
                      << " hosts";
    return grpc::Status::OK;
  }
  const bool perfetto = format == podprof::v1::EXPORT_FORMAT_PERFETTO;
  ChunkStreamBuf buf(writer, absl::StrCat(request->capture_id(), perfetto ? ".pftrace" : ".json"));
  std::ostream out(&buf);
  std::optional<exporter::PerfettoWriter> pw;
  std::optional<exporter::ChromeJsonWriter> cw;
  if (perfetto) {
    pw.emplace(&out);
  } else {
    cw.emplace(&out, row->start_ns);
  }
  // Each kernel's verdict on each chip, for its slices.
  std::map<std::string, exporter::KernelNotes> notes;
  {
    storage::StatsQuery q;
    q.capture_id = request->capture_id();
    q.group_by = storage::Grouping::kChip;
    absl::StatusOr<std::vector<storage::StatRow>> rows = store_->KernelStats(q);
    if (!rows.ok()) return ToGrpc(rows.status());
    absl::StatusOr<std::vector<podprof::v1::KernelInsight>> judged =
        Judge(*store_, q.capture_id, true, *rows, rows->size());
    if (!judged.ok()) return ToGrpc(judged.status());
    for (size_t i = 0; i < judged->size(); ++i) {
      const storage::StatRow& r = (*rows)[i];
      notes[r.host][{r.chip, r.kernel.module, r.kernel.op_name}] = (*judged)[i].verdict_text();
    }
  }
  absl::Status s = store_->ForEachHost(request->capture_id(), [&](storage::StoredHost& h) {
    if (context->IsCancelled()) return absl::CancelledError("the client went away");
    auto host_notes = notes.find(h.row.host);
    const exporter::KernelNotes* n = host_notes == notes.end() ? nullptr : &host_notes->second;
    if (perfetto) {
      pw->AddHost(h.capture, HostDescription(h.row), n);
    } else {
      cw->AddHost(h.capture, HostDescription(h.row), n);
    }
    return out ? absl::OkStatus() : absl::UnavailableError("the client stopped reading");
  });
  if (s.ok()) s = perfetto ? pw->Finish() : cw->Finish();
  if (!s.ok()) return ToGrpc(s);
  const exporter::ExportCounts& n = perfetto ? pw->counts() : cw->counts();
  PODPROF_LOG(INFO) << "exported " << request->capture_id() << " as "
                    << podprof::v1::ExportFormat_Name(format) << ": " << n.hosts << " hosts, "
                    << n.slices << " slices, " << buf.bytes() << " bytes";
  return grpc::Status::OK;
}

grpc::Status AggregatorService::ImportXSpace(
    grpc::ServerContext* context, grpc::ServerReader<podprof::v1::ImportXSpaceChunk>* reader,
    podprof::v1::ImportXSpaceResponse* response) {
  if (absl::Status a = access_.operators.Check(*context, "an operator"); !a.ok()) {
    return ToGrpc(a);
  }
  std::string dir = limits_.spool_dir;
  if (dir.empty()) dir = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp";
  ingest::CaptureInput w;
  w.source = "import";
  w.created_ns = clock_->NowNs();
  std::set<std::string> seen;
  std::vector<std::string> errors;

  // Parses the spooled file of one host into the capture, or records why it could not.
  auto finish_file = [&](const std::string& host, Spool& spool) {
    if (!spool.ok()) {
      errors.push_back(absl::StrCat(host, ": cannot spool the upload in ", dir));
      return;
    }
    trace::ReadOptions opts;
    opts.host_name = host;
    absl::StatusOr<trace::HostCapture> cap = trace::ReadXSpaceFile(spool.path(), opts);
    if (!cap.ok()) {
      // The spool path means nothing to the user: name the host's file instead.
      std::string msg(cap.status().message());
      if (msg.rfind(spool.path(), 0) == 0) msg = msg.substr(spool.path().size() + 2);
      errors.push_back(absl::StrCat(host, ".xplane.pb: ", msg));
      return;
    }
    if (cap->EventCount() == 0) {
      errors.push_back(absl::StrCat(host, ".xplane.pb: no device events (not a TPU/GPU capture?)"));
      return;
    }
    ingest::HostInput h;
    h.host = host;  // the file's name, as XProf names hosts
    h.bytes = static_cast<uint64_t>(spool.bytes());
    h.capture = std::move(*cap);
    w.hosts.push_back(std::move(h));
  };

  podprof::v1::ImportXSpaceChunk chunk;
  std::string host;
  std::unique_ptr<Spool> spool;
  bool first = true;
  bool too_big = false;
  while (reader->Read(&chunk)) {
    if (first) {
      w.labels = {chunk.labels().begin(), chunk.labels().end()};
      first = false;
    }
    if (!chunk.host_name().empty() && chunk.host_name() != host) {
      if (spool) finish_file(host, *spool);
      host = chunk.host_name();
      if (!seen.insert(host).second) {
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            absl::StrCat("host ", host, " appears twice in one import"));
      }
      spool = std::make_unique<Spool>(dir);
      too_big = false;
    }
    if (!spool) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "the first chunk of an import must name its host");
    }
    if (too_big) continue;
    if (spool->bytes() + static_cast<int64_t>(chunk.data().size()) > limits_.max_file_bytes) {
      errors.push_back(absl::StrCat(host, ".xplane.pb: larger than the import limit of ",
                                    limits_.max_file_bytes, " bytes"));
      too_big = true;
      seen.erase(host);
      continue;
    }
    if (spool->ok() && !spool->Append(chunk.data())) {
      return ToGrpc(ErrnoToStatus(errno, absl::StrCat("spooling the upload of ", host)));
    }
  }
  if (spool && !too_big) finish_file(host, *spool);
  spool.reset();
  for (const std::string& e : errors) response->add_file_errors(e);
  if (w.hosts.empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        errors.empty() ? "the import held no files"
                                       : absl::StrCat("no file could be imported: ", errors[0]));
  }
  // Imports keep the hosts' own clocks; the capture spans their profile windows.
  w.start_ns = INT64_MAX;
  w.end_ns = 0;
  for (const ingest::HostInput& h : w.hosts) {
    w.start_ns = std::min(w.start_ns, h.capture->host.profile_start_ns);
    w.end_ns = std::max(w.end_ns, h.capture->host.profile_stop_ns);
  }
  if (w.start_ns <= 0 || w.start_ns == INT64_MAX) w.start_ns = w.created_ns;
  if (w.end_ns < w.start_ns) w.end_ns = w.start_ns;
  w.status = errors.empty() ? "complete" : "partial";
  w.id = absl::StrFormat("imp-%d-%04x", w.created_ns / 1'000'000,
                         static_cast<unsigned>(w.created_ns % 65536));
  const size_t imported = w.hosts.size();
  const std::string id = w.id;
  const int64_t start_ns = w.start_ns;
  absl::Status s = ingest::StoreCapture(*store_, std::move(w));
  if (!s.ok()) return ToGrpc(s);
  PODPROF_LOG(INFO) << "imported " << imported << " host(s) as " << id
                    << (errors.empty() ? "" : absl::StrCat(", ", errors.size(), " file(s) failed"));
  response->set_capture_id(id);
  storage::CaptureQuery q;
  q.since_ns = start_ns;
  q.until_ns = start_ns;
  std::string next;
  absl::StatusOr<std::vector<storage::CaptureRow>> rows = store_->ListCaptures(q, &next);
  if (rows.ok()) {
    for (const auto& r : *rows) {
      if (r.id == id) FillSummary(r, response->mutable_summary());
    }
  }
  storage::StatsQuery top;
  top.capture_id = id;
  top.top = 10;
  absl::StatusOr<std::vector<storage::StatRow>> stats = store_->KernelStats(top);
  if (stats.ok()) {
    for (const auto& r : *stats) *response->add_top_kernels() = ToProto(r);
  }
  return grpc::Status::OK;
}

}  // namespace podprof::aggregator
