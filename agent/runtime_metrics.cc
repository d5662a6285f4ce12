#include "agent/runtime_metrics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/workload_channel.h"
#include "proto/grpc_status.h"

namespace podprof::agent {

namespace rt = tpu::monitoring::runtime;

int ChipOf(const rt::Metric& m) {
  const rt::AttrValue& v = m.attribute().value();
  if (v.attr_case() != rt::AttrValue::kKvlistAttr) return static_cast<int>(v.int_attr());
  for (const rt::Attribute& a : v.kvlist_attr().attributes()) {
    if (a.key() != tpu_metrics::kDeviceOrdinalKey) continue;
    if (a.value().attr_case() == rt::AttrValue::kIntAttr) {
      return static_cast<int>(a.value().int_attr());
    }
    int chip = 0;
    if (absl::SimpleAtoi(a.value().string_attr(), &chip)) return chip;
  }
  return -1;
}

double GaugeValue(const rt::Gauge& g) {
  return g.value_case() == rt::Gauge::kAsDouble ? g.as_double() : static_cast<double>(g.as_int());
}

std::unique_ptr<RuntimeMetrics> RuntimeMetrics::Dial(const std::vector<std::string>& addresses,
                                                     Clock& clock) {
  std::vector<Service> services;
  for (const std::string& a : addresses) {
    Service s;
    s.address = a;
    s.channel = NewWorkloadChannel(a, /*own_connections=*/false, kMaxMetricResponseBytes);
    s.stub = rt::RuntimeMetricService::NewStub(s.channel);
    services.push_back(std::move(s));
  }
  return std::make_unique<RuntimeMetrics>(clock, std::move(services));
}

std::unique_ptr<grpc::ClientContext> RuntimeMetrics::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(DeadlineAt(clock_.NowNs(), kDeadlineNs));
  return ctx;
}

absl::StatusOr<rt::TPUMetric> RuntimeMetrics::Read(size_t i, absl::string_view name) const {
  rt::MetricRequest req;
  req.set_metric_name(std::string(name));
  rt::MetricResponse resp;
  const grpc::Status s = services_[i].stub->GetRuntimeMetric(Context().get(), req, &resp);
  if (!s.ok()) return FromGrpc(s);
  return std::move(*resp.mutable_metric());
}

absl::StatusOr<std::vector<ChipValue>> RuntimeMetrics::ReadGauge(size_t i, absl::string_view name,
                                                                 double scale) const {
  absl::StatusOr<rt::TPUMetric> metric = Read(i, name);
  if (!metric.ok()) return metric.status();
  std::vector<ChipValue> out;
  for (const rt::Metric& m : metric->metrics()) {
    const int chip = ChipOf(m);
    if (chip >= 0) out.push_back({chip, GaugeValue(m.gauge()) * scale});
  }
  return out;
}

std::vector<int> RuntimeMetrics::Chips() const {
  std::vector<int> chips;
  for (size_t i = 0; i < services_.size(); ++i) {
    absl::StatusOr<std::vector<ChipValue>> hbm = ReadGauge(i, tpu_metrics::kHbmTotalBytes);
    if (!hbm.ok()) continue;
    for (const ChipValue& v : *hbm) {
      if (std::find(chips.begin(), chips.end(), v.chip) == chips.end()) chips.push_back(v.chip);
    }
  }
  return chips;
}

grpc::Status RuntimeMetrics::Check(size_t i) const {
  const auto list = [this](Stub& stub) {
    rt::ListSupportedMetricsRequest req;
    rt::ListSupportedMetricsResponse resp;
    return stub.ListSupportedMetrics(Context().get(), req, &resp);
  };
  const Service& service = services_[i];
  const grpc::Status s = list(*service.stub);
  if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return s;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> fresh =
      ReconnectWorkload(service.address, service.channel.get(), clock_, kCheckReconnectDeadlineNs,
                        kMaxMetricResponseBytes);
  if (!fresh.ok()) return s;
  return list(*rt::RuntimeMetricService::NewStub(*fresh));
}

absl::StatusOr<rt::GetTpuRuntimeStatusResponse> RuntimeMetrics::RuntimeStatus(size_t i) const {
  rt::GetTpuRuntimeStatusRequest req;
  req.set_include_hlo_info(true);
  rt::GetTpuRuntimeStatusResponse resp;
  const grpc::Status s = services_[i].stub->GetTpuRuntimeStatus(Context().get(), req, &resp);
  if (!s.ok()) {
    const absl::Status e = FromGrpc(s);
    return absl::Status(e.code(), absl::StrCat("GetTpuRuntimeStatus: ", e.message()));
  }
  return resp;
}

}  // namespace podprof::agent
