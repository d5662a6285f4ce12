// The two gRPC services a TPU workload serves, answered by a SimHost: the TSL profiler service
// and libtpu's runtime metric service. Handlers are thin adapters; SimHost does the work.
#ifndef PODPROF_SIM_SERVICES_H_
#define PODPROF_SIM_SERVICES_H_

#include "proto/grpc_status.h"
#include "proto/profiler_service.grpc.pb.h"
#include "proto/tpu_metric_service.grpc.pb.h"
#include "sim/sim_host.h"

namespace podprof::sim {

// `host` must outlive the services. Thread-safe (SimHost is).
class ProfilerServiceImpl final : public tensorflow::ProfilerService::Service {
 public:
  explicit ProfilerServiceImpl(SimHost* host) : host_(host) {}
  grpc::Status Profile(grpc::ServerContext* context, const tensorflow::ProfileRequest* request,
                       tensorflow::ProfileResponse* response) override;
  grpc::Status Terminate(grpc::ServerContext* context, const tensorflow::TerminateRequest* request,
                         tensorflow::TerminateResponse* response) override;
  grpc::Status Monitor(grpc::ServerContext* context, const tensorflow::MonitorRequest* request,
                       tensorflow::MonitorResponse* response) override;
  // Continuous profiling and its snapshots (SimHost::StartContinuous).
  grpc::Status StartContinuousProfiling(grpc::ServerContext* context,
                                        const tensorflow::ProfileRequest* request,
                                        tensorflow::ContinuousProfilingResponse* response) override;
  grpc::Status GetSnapshot(grpc::ServerContext* context,
                           const tensorflow::GetSnapshotRequest* request,
                           tensorflow::ProfileResponse* response) override;
  grpc::Status StopContinuousProfiling(
      grpc::ServerContext* context, const tensorflow::StopContinuousProfilingRequest* request,
      tensorflow::StopContinuousProfilingResponse* response) override;

 private:
  SimHost* const host_;
};

class MetricServiceImpl final : public tpu::monitoring::runtime::RuntimeMetricService::Service {
 public:
  explicit MetricServiceImpl(SimHost* host) : host_(host) {}
  grpc::Status GetRuntimeMetric(grpc::ServerContext* context,
                                const tpu::monitoring::runtime::MetricRequest* request,
                                tpu::monitoring::runtime::MetricResponse* response) override;
  grpc::Status ListSupportedMetrics(
      grpc::ServerContext* context,
      const tpu::monitoring::runtime::ListSupportedMetricsRequest* request,
      tpu::monitoring::runtime::ListSupportedMetricsResponse* response) override;
  grpc::Status GetTpuRuntimeStatus(
      grpc::ServerContext* context,
      const tpu::monitoring::runtime::GetTpuRuntimeStatusRequest* request,
      tpu::monitoring::runtime::GetTpuRuntimeStatusResponse* response) override;

 private:
  SimHost* const host_;
};

// The metric names the simulated runtime serves, in ListSupportedMetrics order.
const std::vector<std::string>& SupportedMetricNames();

}  // namespace podprof::sim

#endif  // PODPROF_SIM_SERVICES_H_
