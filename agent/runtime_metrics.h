// The one reader of the workload's runtime metric services (libtpu's
// tpu.monitoring.runtime.RuntimeMetricService, which podprof-simhost serves too). Every call the
// agent makes to them goes through here: the service check (Info, heartbeats, /metrics), the
// chips a workload holds before any capture, the gauges of a Prometheus scrape, the series
// sampled beside a capture, the always-on telemetry and a snapshot's runtime status.
//
// It owns what those readers must agree on:
//   * one deadline per call, kDeadlineNs on the agent's clock;
//   * the metric names, from proto/tpu_metric_names.h (the simulator serves by the same table);
//   * which chip a value is about, whichever way the runtime names it (ChipOf): gauges carry the
//     chip in the attribute's int_attr, the hlo.* metrics in a `device_ordinal` key-value list.
#ifndef PODPROF_AGENT_RUNTIME_METRICS_H_
#define PODPROF_AGENT_RUNTIME_METRICS_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "proto/tpu_metric_names.h"
#include "proto/tpu_metric_service.grpc.pb.h"

namespace podprof::agent {

// The chip a metric value is about: the attribute's int_attr (the gauges' `device-id`), or
// `device_ordinal` in its key-value list, a decimal string on newer runtimes and an int on older
// (the hlo.* metrics). -1 when the value names no chip (a megascale metric's, the host's).
int ChipOf(const tpu::monitoring::runtime::Metric& m);

// A gauge's value, whichever of its int and double forms the runtime sent.
double GaugeValue(const tpu::monitoring::runtime::Gauge& g);

// One value of a gauge on one chip.
struct ChipValue {
  int chip = 0;
  double value = 0;
};

// The workload's runtime metric services, in the order of [workload] metrics. Thread-safe: it
// holds no state of its own past construction, and gRPC stubs are thread-safe. `clock` must
// outlive it.
class RuntimeMetrics {
 public:
  using Stub = tpu::monitoring::runtime::RuntimeMetricService::StubInterface;

  // How long any one call may take. A runtime answers these from memory in well under a
  // millisecond on loopback; one that has not answered in this time is hung or away, and the
  // telemetry's 1 s interval must still fit its four reads.
  static constexpr int64_t kDeadlineNs = 300'000'000;

  // One service.
  struct Service {
    std::string address;
    std::unique_ptr<Stub> stub;
    // The channel under `stub`, whose backoff a service check ends (agent/workload_channel.h);
    // null where a test gave its own stub.
    std::shared_ptr<grpc::Channel> channel;
  };

  RuntimeMetrics(Clock& clock, std::vector<Service> services)
      : clock_(clock), services_(std::move(services)) {}
  // A channel of its own for each address, refusing an answer past kMaxMetricResponseBytes
  // before it is parsed. Nothing is dialled until the first call.
  static std::unique_ptr<RuntimeMetrics> Dial(const std::vector<std::string>& addresses,
                                              Clock& clock);

  size_t size() const { return services_.size(); }
  const std::string& address(size_t i) const { return services_[i].address; }

  // Metric `name` as service `i` serves it. The service's error otherwise (NotFound for a
  // metric its runtime does not keep, DeadlineExceeded past kDeadlineNs), its message naming
  // neither address nor metric: callers say which they asked.
  absl::StatusOr<tpu::monitoring::runtime::TPUMetric> Read(size_t i, absl::string_view name) const;

  // Gauge `name` of every chip service `i` reports, in the order served, each value times
  // `scale`. Values that name no chip are left out. Errors as Read's.
  absl::StatusOr<std::vector<ChipValue>> ReadGauge(size_t i, absl::string_view name,
                                                   double scale = 1) const;

  // The chips every service reports HBM for (tpu_metrics::kHbmTotalBytes), each once, in the
  // order seen: which devices the workload holds, before any capture. A service that does not
  // answer adds none.
  std::vector<int> Chips() const;

  // Whether service `i` answers now (ListSupportedMetrics; UNIMPLEMENTED answers too). One that
  // is unreachable is asked once more on a fresh channel given kCheckReconnectDeadlineNs to
  // connect: the shared channel may still be in gRPC's backoff while the service is back.
  grpc::Status Check(size_t i) const;

  // Service `i`'s GetTpuRuntimeStatus with the HLO instructions (include_hlo_info). Errors
  // name the call.
  absl::StatusOr<tpu::monitoring::runtime::GetTpuRuntimeStatusResponse> RuntimeStatus(
      size_t i) const;

 private:
  // A client context whose deadline is kDeadlineNs from now on the agent's clock.
  std::unique_ptr<grpc::ClientContext> Context() const;

  Clock& clock_;
  const std::vector<Service> services_;
};

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_RUNTIME_METRICS_H_
