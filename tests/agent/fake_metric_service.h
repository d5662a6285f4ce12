// A fake of libtpu's runtime metric service for the agent's unit tests: a real gRPC server on
// loopback, in process, serving each metric name as the test last set it (NOT_FOUND for a name
// never set, as a runtime answers for a metric it does not keep), and counting the calls it
// answered, so that a test can say a path made none. Gauges are built with either of the
// runtime's two ways of naming a chip (GaugeOf).
#ifndef PODPROF_TESTS_AGENT_FAKE_METRIC_SERVICE_H_
#define PODPROF_TESTS_AGENT_FAKE_METRIC_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/runtime_metrics.h"
#include "common/clock.h"
#include "proto/tpu_metric_names.h"
#include "proto/tpu_metric_service.grpc.pb.h"

namespace podprof::agent {

// How a value names its chip: the gauges' `device-id` int_attr, or `device_ordinal` in a
// key-value list (the hlo.* metrics), as a string (current runtimes) or an int (older).
enum class ChipNaming { kIntAttr, kOrdinalString, kOrdinalInt };

// One gauge value per chip: `values` as {chip, value}, ints where whole.
inline tpu::monitoring::runtime::TPUMetric GaugeOf(
    const std::string& name, const std::vector<std::pair<int, double>>& values,
    ChipNaming naming = ChipNaming::kIntAttr) {
  namespace rt = tpu::monitoring::runtime;
  rt::TPUMetric out;
  out.set_name(name);
  for (const auto& [chip, value] : values) {
    rt::Metric* m = out.add_metrics();
    rt::Attribute* a = m->mutable_attribute();
    if (naming == ChipNaming::kIntAttr) {
      a->set_key(tpu_metrics::kDeviceIdKey);
      a->mutable_value()->set_int_attr(chip);
    } else {
      a->set_key(tpu_metrics::kDeviceAttributeKey);
      rt::Attribute* ordinal = a->mutable_value()->mutable_kvlist_attr()->add_attributes();
      ordinal->set_key(tpu_metrics::kDeviceOrdinalKey);
      if (naming == ChipNaming::kOrdinalInt) {
        ordinal->mutable_value()->set_int_attr(chip);
      } else {
        ordinal->mutable_value()->set_string_attr(absl::StrCat(chip));
      }
    }
    if (value == static_cast<double>(static_cast<int64_t>(value))) {
      m->mutable_gauge()->set_as_int(static_cast<int64_t>(value));
    } else {
      m->mutable_gauge()->set_as_double(value);
    }
  }
  return out;
}

// Thread-safe: gRPC's threads answer while the test sets.
class FakeMetricService final : public tpu::monitoring::runtime::RuntimeMetricService::Service {
 public:
  FakeMetricService() {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~FakeMetricService() override { server_->Shutdown(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  // Serves `metric` for its name from now on.
  void Set(tpu::monitoring::runtime::TPUMetric metric) {
    absl::MutexLock lock(&mu_);
    const std::string name = metric.name();
    metrics_[name] = std::move(metric);
  }
  // Calls answered so far, every method counted.
  int64_t calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

  // The agent's reader over this service alone, on the agent's own kind of channel.
  std::unique_ptr<RuntimeMetrics> Reader(Clock& clock) const {
    return RuntimeMetrics::Dial({address()}, clock);
  }

  grpc::Status GetRuntimeMetric(grpc::ServerContext*,
                                const tpu::monitoring::runtime::MetricRequest* req,
                                tpu::monitoring::runtime::MetricResponse* resp) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    auto it = metrics_.find(req->metric_name());
    if (it == metrics_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such metric");
    *resp->mutable_metric() = it->second;
    return grpc::Status::OK;
  }
  grpc::Status ListSupportedMetrics(
      grpc::ServerContext*, const tpu::monitoring::runtime::ListSupportedMetricsRequest*,
      tpu::monitoring::runtime::ListSupportedMetricsResponse* resp) override {
    absl::MutexLock lock(&mu_);
    ++calls_;
    for (const auto& [name, metric] : metrics_) {
      resp->add_supported_metric()->set_metric_name(name);
    }
    return grpc::Status::OK;
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  mutable absl::Mutex mu_;
  std::map<std::string, tpu::monitoring::runtime::TPUMetric> metrics_ ABSL_GUARDED_BY(mu_);
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace podprof::agent

#endif  // PODPROF_TESTS_AGENT_FAKE_METRIC_SERVICE_H_
