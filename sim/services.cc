#include "sim/services.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checked.h"
#include "common/pattern.h"
#include "proto/tpu_metric_names.h"
#include "sim/dcn_metric.h"

namespace podprof::sim {
namespace {

namespace rt = tpu::monitoring::runtime;

namespace names = tpu_metrics;
using names::kDutyCyclePercent, names::kHbmBandwidthPercent, names::kHbmTotalBytes,
    names::kHbmUsageBytes, names::kIdleSeconds, names::kProgramTimingUs, names::kQueueSize;

// Exponential buckets for timings: 1 us * 2^i, 24 finite buckets (up to ~16 s). The transfer
// metrics use the same layout (their rates in Mbit/s fit it too).
constexpr int kBuckets = kTimingBuckets;
constexpr double kGrowth = kTimingGrowth, kScale = kTimingScale;

// The runtime's multi-slice ("megascale") metrics: distributions over the host's transfers,
// accumulated since Metric.start_timestamp.
struct TransferMetric {
  const char* name;
  const char* description;
  std::vector<TransferObservation> HostTransfers::*observations;
  // One Metric per buffer-size class (`buffer-size` in the attribute's key-value list), or
  // one for all of the host's connections (an empty list).
  bool by_buffer_size;
};
const TransferMetric kTransferMetrics[] = {
    {names::kDcnTransferUs, "collective transfers after the slowest chip arrived, microseconds",
     &HostTransfers::outbound_us, true},
    {names::kDcnInboundTransferUs,
     "collective data arrival from launch (waiting on the slowest chip included), microseconds",
     &HostTransfers::inbound_us, true},
    {names::kHostToDeviceTransferUs, "input batches from the host into HBM, microseconds",
     &HostTransfers::host_to_device_us, true},
    {names::kDeviceToHostTransferUs, "step outputs from HBM to the host, microseconds",
     &HostTransfers::device_to_host_us, true},
    {names::kCollectiveEndToEndUs,
     "collectives from launch to result, host reduction included, microseconds",
     &HostTransfers::collective_us, true},
    {names::kHostComputeUs, "the host's share of reducing collectives, microseconds",
     &HostTransfers::host_compute_us, true},
    {names::kTcpMinRttUs, "smallest round trip of each connection to another host, microseconds",
     &HostTransfers::tcp_min_rtt_us, false},
    {names::kTcpDeliveryRateMbps, "delivery rate of each connection to another host, Mbit/s",
     &HostTransfers::tcp_delivery_mbps, false},
};

const TransferMetric* FindTransferMetric(const std::string& name) {
  for (const TransferMetric& t : kTransferMetrics) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

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
    counts[TimingBucket(v)]++;
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

// A cumulative distribution (Cumulative, DcnLatencyClass) in exponential buckets of `scale` x
// `growth`^i, `buckets` of them.
template <typename C>
void FillCumulative(const C& c, int buckets, double growth, double scale, rt::Distribution* d) {
  auto* exp = d->mutable_bucket_options()->mutable_exponential_buckets();
  exp->set_num_finite_buckets(buckets);
  exp->set_growth_factor(growth);
  exp->set_scale(scale);
  const double n = static_cast<double>(c.count);
  d->set_count(c.count);
  d->set_mean(c.count == 0 ? 0 : c.sum / n);
  d->set_min(c.min);
  d->set_max(c.max);
  d->set_sum_of_squared_deviation(c.count == 0 ? 0 : std::max(0.0, c.sum_sq - c.sum * c.sum / n));
  for (int64_t b : c.buckets) d->add_bucket_counts(b);
}

// log2 of a buffer's size class: the largest power of two not above it.
int SizeClassShift(int64_t bytes) {
  int shift = 0;
  while (shift < 62 && (int64_t{2} << shift) <= bytes) ++shift;
  return shift;
}

void AddStringAttribute(const std::string& key, const std::string& value, rt::KeyValueList* kv) {
  rt::Attribute* a = kv->add_attributes();
  a->set_key(key);
  a->mutable_value()->set_string_attr(value);
}

// The attribute of the HLO queue and timing metrics: a key-value list naming the device by
// `device_ordinal` and the kind of core. Current runtimes send the ordinal as a decimal string
// (older ones an int), and clients look for it there, not in the `device-id` int the gauges
// carry.
void SetDeviceOrdinal(int chip, rt::Attribute* attribute) {
  attribute->set_key(names::kDeviceAttributeKey);
  rt::KeyValueList* kv = attribute->mutable_value()->mutable_kvlist_attr();
  AddStringAttribute(names::kDeviceOrdinalKey, absl::StrCat(chip), kv);
  AddStringAttribute(names::kCoreTypeKey, "tensorcore", kv);
}

void AddTransferMetrics(const TransferMetric& spec, const HostTransfers& transfers, int64_t now,
                        rt::TPUMetric* metric) {
  metric->set_description(spec.description);
  // Observations by size class, smallest first; connection metrics have one class.
  std::map<int, std::vector<double>> classes;
  for (const TransferObservation& o : transfers.*spec.observations) {
    classes[spec.by_buffer_size ? SizeClassShift(o.bytes) : -1].push_back(o.value);
  }
  if (!spec.by_buffer_size && classes.empty()) classes[-1];
  for (const auto& [shift, values] : classes) {
    rt::Metric* m = metric->add_metrics();
    m->mutable_attribute()->set_key(names::kMegascaleKey);
    rt::KeyValueList* kv = m->mutable_attribute()->mutable_value()->mutable_kvlist_attr();
    if (shift >= 0) {
      AddStringAttribute(names::kBufferSizeKey, BufferSizeClass(int64_t{1} << shift), kv);
    }
    SetTimestamp(now, m->mutable_timestamp());
    SetTimestamp(transfers.start_host_ns, m->mutable_start_timestamp());
    FillDistribution(values, m->mutable_distribution());
  }
}

// A multi-slice job's DCN transfer latencies (sim/dcn_metric.h): one Metric per buffer-size
// class, cumulative since the host started, in podprof's bucket layout.
void AddDcnLatencies(const std::map<std::string, DcnLatencyClass>& classes, int64_t now,
                     rt::TPUMetric* metric) {
  metric->set_description(
      "DCN transfers received, from the sender's buffer leaving to its arrival, microseconds "
      "(buckets and size classes are the simulator's)");
  for (const auto& [label, c] : classes) {
    rt::Metric* m = metric->add_metrics();
    m->mutable_attribute()->set_key(names::kMegascaleKey);
    AddStringAttribute(names::kBufferSizeKey, label,
                       m->mutable_attribute()->mutable_value()->mutable_kvlist_attr());
    SetTimestamp(now, m->mutable_timestamp());
    SetTimestamp(c.start_host_ns, m->mutable_start_timestamp());
    FillCumulative(c, kDcnLatencyBuckets, kDcnLatencyGrowth, kDcnLatencyScaleUs,
                   m->mutable_distribution());
  }
}

// Identifies the compiled program in the runtime status: the XSpace's program_id, big-endian,
// so that a status and a capture of the same step can be matched.
std::string ProgramFingerprint(uint64_t program_id) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(program_id >> (56 - 8 * i));
  return out;
}

}  // namespace

const std::vector<std::string>& SupportedMetricNames() {
  static const auto* const kNames = [] {
    auto* names = new std::vector<std::string>{
        kHbmUsageBytes,       kHbmTotalBytes, kDutyCyclePercent, kIdleSeconds,
        kHbmBandwidthPercent, kQueueSize,     kProgramTimingUs};
    for (const TransferMetric& t : kTransferMetrics) names->push_back(t.name);
    return names;
  }();
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

grpc::Status ProfilerServiceImpl::StartContinuousProfiling(
    grpc::ServerContext*, const tensorflow::ProfileRequest*,
    tensorflow::ContinuousProfilingResponse*) {
  // The request's duration and start are ignored, as the real server ignores them.
  return ToGrpc(host_->StartContinuous());
}

grpc::Status ProfilerServiceImpl::GetSnapshot(grpc::ServerContext* context,
                                              const tensorflow::GetSnapshotRequest*,
                                              tensorflow::ProfileResponse* response) {
  absl::StatusOr<tensorflow::profiler::XSpace> space =
      host_->Snapshot([context] { return context->IsCancelled(); });
  if (!space.ok()) return ToGrpc(space.status());
  *response->mutable_xspace() = *std::move(space);
  response->set_empty_trace(response->xspace().planes_size() == 0);
  return grpc::Status::OK;
}

grpc::Status ProfilerServiceImpl::StopContinuousProfiling(
    grpc::ServerContext*, const tensorflow::StopContinuousProfilingRequest*,
    tensorflow::StopContinuousProfilingResponse*) {
  return ToGrpc(host_->StopContinuous());
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
  // A multi-slice job's DCN latencies are its DCN transfers'; with one slice the step's ICI
  // collectives stand in for them (HostTransfers).
  if (name == names::kDcnTransferUs && host_->model().slices() > 1) {
    AddDcnLatencies(host_->DcnLatencies(), now, metric);
    return grpc::Status::OK;
  }
  if (const TransferMetric* transfer = FindTransferMetric(name)) {
    AddTransferMetrics(*transfer, host_->Transfers(), now, metric);
    return grpc::Status::OK;
  }
  if (name == kProgramTimingUs) {
    metric->set_description(
        "execution time of each HLO program run (one per training step), microseconds, "
        "cumulative");
    int chip = 0;
    for (const Cumulative& c : host_->ProgramTimings()) {
      rt::Metric* m = metric->add_metrics();
      SetDeviceOrdinal(chip++, m->mutable_attribute());
      SetTimestamp(now, m->mutable_timestamp());
      SetTimestamp(c.start_host_ns, m->mutable_start_timestamp());
      FillCumulative(c, kBuckets, kGrowth, kScale, m->mutable_distribution());
    }
    return grpc::Status::OK;
  }
  for (const ChipActivity& c : host_->Activity()) {
    rt::Metric* m = metric->add_metrics();
    if (name == kQueueSize) {
      SetDeviceOrdinal(c.chip, m->mutable_attribute());
    } else {
      m->mutable_attribute()->set_key(names::kDeviceIdKey);
      m->mutable_attribute()->mutable_value()->set_int_attr(c.chip);
    }
    SetTimestamp(now, m->mutable_timestamp());
    if (name == kHbmUsageBytes) {
      metric->set_description("HBM in use, bytes");
      m->mutable_gauge()->set_as_int(c.hbm_usage_bytes);
    } else if (name == kHbmTotalBytes) {
      metric->set_description("HBM capacity, bytes");
      m->mutable_gauge()->set_as_int(c.hbm_total_bytes);
    } else if (name == kDutyCyclePercent) {
      metric->set_description("TensorCore busy share of the last second's steps, percent");
      m->mutable_gauge()->set_as_double(c.duty_cycle_percent);
    } else if (name == kIdleSeconds) {
      metric->set_description("time since the TensorCore last ran a kernel, seconds");
      m->mutable_gauge()->set_as_double(c.idle_seconds);
    } else if (name == kHbmBandwidthPercent) {
      metric->set_description(
          "HBM bandwidth used over the last second's steps, percent of the peak");
      m->mutable_gauge()->set_as_double(c.hbm_bandwidth_percent);
    } else if (name == kQueueSize) {
      metric->set_description("HLO programs queued or running");
      m->mutable_gauge()->set_as_int(c.queued_kernels);
    }
  }
  return grpc::Status::OK;
}

grpc::Status MetricServiceImpl::GetTpuRuntimeStatus(grpc::ServerContext*,
                                                    const rt::GetTpuRuntimeStatusRequest* request,
                                                    rt::GetTpuRuntimeStatusResponse* response) {
  const PodModel& model = host_->model();
  const std::string fingerprint = ProgramFingerprint(model.program_id());
  response->set_host_name(host_->host_name());
  for (const CoreState& c : host_->CoreStates()) {
    // Core and chip ids are int32 on the wire; a pod has far fewer.
    rt::CoreStateSummary& s =
        (*response->mutable_core_states())[static_cast<int32_t>(c.global_core_id)];
    rt::CoreId* id = s.mutable_core_id();
    id->set_global_core_id(static_cast<int32_t>(c.global_core_id));
    id->set_chip_id(static_cast<int32_t>(c.global_chip_id));
    id->mutable_core_on_chip()->set_type(rt::TPU_CORE_TYPE_TENSOR_CORE);
    id->mutable_core_on_chip()->set_index(c.core_on_chip);
    s.set_xdb_server_running(false);
    s.set_program_fingerprint(fingerprint);
    // One launch per step: the launch id is the step's, cut to the field's 31 bits.
    s.set_launch_id(static_cast<int32_t>(c.run_id & 0x7fffffff));
    rt::SequencerState* seq = s.add_sequencer_info();
    seq->set_sequencer_type(rt::TPU_SEQUENCER_TYPE_TENSOR_CORE_SEQUENCER);
    seq->set_sequencer_index(0);
    // The id's 64 bits as they are; the field is signed on the wire.
    seq->set_program_id(static_cast<int64_t>(model.program_id()));
    seq->set_run_id(c.run_id);
    seq->set_tracemark(c.run_id);
    // Between kernels (and once the step's work is done) the sequencer waits at the program's
    // entry; inside a kernel it is in that kernel's code, 1 KiB per kernel, 16-byte bundles.
    const int64_t kernel_base = c.op < 0 ? 0 : int64_t{1024} * (c.op + 1);
    const auto bundle = static_cast<int64_t>(c.op_progress * 63);
    seq->set_pc(kernel_base + 16 * bundle);
    // The tag says which kernel of the program runs (its position, from 1; 0 outside kernels).
    seq->set_tag(c.op < 0 ? 0 : c.op + 1);
    if (request->include_hlo_info() && c.op >= 0) {
      const OpTemplate& op = model.ops()[c.op];
      seq->set_hlo_location(op.name);
      seq->set_hlo_detailed_info(op.hlo_text);
    }
    // JAX dispatches the next step before this one finishes.
    if (c.next_queued) {
      rt::QueuedProgram* next = s.add_queued_program_info();
      next->set_run_id(c.run_id + 1);
      next->set_launch_id(c.run_id + 1);
      next->set_program_fingerprint(fingerprint);
    }
  }
  return grpc::Status::OK;
}

}  // namespace podprof::sim
