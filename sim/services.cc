#include "sim/services.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/checked.h"
#include "common/pattern.h"

namespace podprof::sim {
namespace {

namespace rt = tpu::monitoring::runtime;

constexpr char kHbmUsage[] = "tpu.runtime.hbm.memory.usage.bytes";
constexpr char kHbmTotal[] = "tpu.runtime.hbm.memory.total.bytes";
constexpr char kDutyCycle[] = "tpu.runtime.tensorcore.dutycycle.percent";
constexpr char kIdle[] = "tpu.runtime.tensorcore.idle_duration.seconds";
constexpr char kQueue[] = "hlo.queue.size.gauge";
constexpr char kTiming[] = "hlo.execution.timing.distribution.microseconds";

// Exponential buckets for kernel timings: 1 us * 2^i, 24 finite buckets (up to ~16 s).
constexpr int kBuckets = 24;
constexpr double kGrowth = 2, kScale = 1;

void SetTimestamp(int64_t ns, google::protobuf::Timestamp* ts) {
  ts->set_seconds(ns / 1'000'000'000);
  ts->set_nanos(static_cast<int32_t>(ns % 1'000'000'000));
}

void FillDistribution(const std::vector<double>& us, rt::Distribution* d) {
  auto* exp = d->mutable_bucket_options()->mutable_exponential_buckets();
  exp->set_num_finite_buckets(kBuckets);
  exp->set_growth_factor(kGrowth);
  exp->set_scale(kScale);
  // Bucket 0 is underflow (< scale), 1..N finite, N+1 overflow.
  std::vector<int64_t> counts(kBuckets + 2, 0);
  double sum = 0, min = us.empty() ? 0 : us[0], max = min;
  for (double v : us) {
    sum += v;
    min = std::min(min, v);
    max = std::max(max, v);
    int b = v < kScale ? 0 : 1 + static_cast<int>(std::floor(std::log2(v / kScale)));
    counts[std::min(b, kBuckets + 1)]++;
  }
  const double mean = us.empty() ? 0 : sum / static_cast<double>(us.size());
  double ssd = 0;
  for (double v : us) ssd += (v - mean) * (v - mean);
  d->set_count(static_cast<int64_t>(us.size()));
  d->set_mean(mean);
  d->set_min(min);
  d->set_max(max);
  d->set_sum_of_squared_deviation(ssd);
  for (int64_t c : counts) d->add_bucket_counts(c);
}

}  // namespace

const std::vector<std::string>& SupportedMetricNames() {
  static const auto* const kNames =
      new std::vector<std::string>{kHbmUsage, kHbmTotal, kDutyCycle, kIdle, kQueue, kTiming};
  return *kNames;
}

grpc::Status ProfilerServiceImpl::Profile(grpc::ServerContext* context,
                                          const tensorflow::ProfileRequest* request,
                                          tensorflow::ProfileResponse* response) {
  const auto& opts = request->opts();
  SessionRequest s;
  s.session_id = !request->session_id().empty() ? request->session_id() : opts.session_id();
  s.repository_root = request->repository_root();
  s.file_host = !opts.override_hostname().empty() ? opts.override_hostname() : request->host_name();
  auto adv = opts.advanced_configuration().find("override_hostname");
  if (s.file_host == request->host_name() && adv != opts.advanced_configuration().end() &&
      !adv->second.string_value().empty()) {
    s.file_host = adv->second.string_value();
  }
  // A malformed kernel-profiling request fails the RPC before the session, as the runtime's
  // does; one the generation cannot honour is only a warning in the capture.
  absl::StatusOr<KernelProfilingRequest> kernel_profiling = KernelProfilingFromOptions(opts);
  if (!kernel_profiling.ok()) return ToGrpc(kernel_profiling.status());
  s.kernel_profiling = *std::move(kernel_profiling);
  // Both are unsigned on the wire: checked before they become int64 (2^58 + 1000 ms would
  // otherwise become 1 s once in ns, and 2^63 ns a negative start).
  if (opts.start_timestamp_ns() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return ToGrpc(absl::InvalidArgumentError(absl::StrCat("start_timestamp_ns must be 0..",
                                                          std::numeric_limits<int64_t>::max(),
                                                          ", got ", opts.start_timestamp_ns())));
  }
  s.start_host_ns = static_cast<int64_t>(opts.start_timestamp_ns());
  // The server waits on the options' duration; the request's is the fallback.
  const uint64_t duration_ms =
      opts.duration_ms() != 0 ? opts.duration_ms() : request->duration_ms();
  absl::StatusOr<int64_t> duration_ns =
      MillisFieldToNanos("duration_ms", duration_ms, 1, kMaxSessionMs);
  if (!duration_ns.ok()) return ToGrpc(duration_ns.status());
  s.duration_ms = *duration_ns / 1'000'000;
  absl::StatusOr<SessionResult> r =
      host_->RunSession(s, [context] { return context->IsCancelled(); });
  if (!r.ok()) return ToGrpc(r.status());
  response->set_empty_trace(r->empty_trace);
  return grpc::Status::OK;
}

grpc::Status ProfilerServiceImpl::Terminate(grpc::ServerContext*,
                                            const tensorflow::TerminateRequest* request,
                                            tensorflow::TerminateResponse*) {
  return ToGrpc(host_->Terminate(request->session_id()));
}

grpc::Status ProfilerServiceImpl::Monitor(grpc::ServerContext*, const tensorflow::MonitorRequest*,
                                          tensorflow::MonitorResponse* response) {
  std::vector<ChipActivity> chips = host_->Activity();
  double duty = 0;
  for (const ChipActivity& c : chips) duty += c.duty_cycle_percent;
  duty /= std::max<size_t>(1, chips.size());
  const double step_ms = static_cast<double>(host_->model().step_period_ns()) / 1e6;
  auto* m = response->mutable_monitor_result();
  m->set_response_type(tensorflow::ProfilerServiceMonitorResult::UTIL_IDLE_STEP);
  m->set_device_idle_time_percent(100 - duty);
  m->set_matrix_unit_utilization_percent(duty * 0.6);
  m->set_step_time_ms_avg(step_ms);
  m->set_step_time_ms_min(step_ms);
  m->set_step_time_ms_max(step_ms);
  response->set_data(absl::StrCat("simulated ", host_->model().generation().device_type, ": ",
                                  chips.size(), " chips, duty cycle ", duty, "%, step ", step_ms,
                                  " ms"));
  return grpc::Status::OK;
}

grpc::Status MetricServiceImpl::ListSupportedMetrics(grpc::ServerContext*,
                                                     const rt::ListSupportedMetricsRequest* request,
                                                     rt::ListSupportedMetricsResponse* response) {
  absl::StatusOr<UserPattern> filter = CompileUserPattern("filter", request->filter());
  if (!filter.ok()) return ToGrpc(filter.status());
  for (const std::string& name : SupportedMetricNames()) {
    if (filter->Search(name)) response->add_supported_metric()->set_metric_name(name);
  }
  return grpc::Status::OK;
}

grpc::Status MetricServiceImpl::GetRuntimeMetric(grpc::ServerContext*,
                                                 const rt::MetricRequest* request,
                                                 rt::MetricResponse* response) {
  const std::string& name = request->metric_name();
  const auto& names = SupportedMetricNames();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("metric \"", name, "\" is not supported"));
  }
  const int64_t now = host_->host_clock().NowNs();
  rt::TPUMetric* metric = response->mutable_metric();
  metric->set_name(name);
  for (const ChipActivity& c : host_->Activity()) {
    rt::Metric* m = metric->add_metrics();
    m->mutable_attribute()->set_key("device-id");
    m->mutable_attribute()->mutable_value()->set_int_attr(c.chip);
    SetTimestamp(now, m->mutable_timestamp());
    if (name == kHbmUsage) {
      metric->set_description("HBM in use, bytes");
      m->mutable_gauge()->set_as_int(c.hbm_usage_bytes);
    } else if (name == kHbmTotal) {
      metric->set_description("HBM capacity, bytes");
      m->mutable_gauge()->set_as_int(c.hbm_total_bytes);
    } else if (name == kDutyCycle) {
      metric->set_description("TensorCore busy share of the last step, percent");
      m->mutable_gauge()->set_as_double(c.duty_cycle_percent);
    } else if (name == kIdle) {
      metric->set_description("time since the TensorCore last ran a kernel, seconds");
      m->mutable_gauge()->set_as_double(c.idle_seconds);
    } else if (name == kQueue) {
      metric->set_description("HLO programs queued or running");
      m->mutable_gauge()->set_as_int(c.queued_kernels);
    } else {
      metric->set_description("kernel execution time over the last step, microseconds");
      FillDistribution(c.kernel_us, m->mutable_distribution());
    }
  }
  return grpc::Status::OK;
}

grpc::Status MetricServiceImpl::GetTpuRuntimeStatus(grpc::ServerContext*,
                                                    const rt::GetTpuRuntimeStatusRequest*,
                                                    rt::GetTpuRuntimeStatusResponse*) {
  return grpc::Status::OK;
}

}  // namespace podprof::sim
