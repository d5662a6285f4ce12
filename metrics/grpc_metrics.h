// Every RPC a gRPC server answers, counted by method and status code and timed
// (podprof_rpc_requests_total, podprof_rpc_duration_seconds), through a server interceptor.
#ifndef PODPROF_METRICS_GRPC_METRICS_H_
#define PODPROF_METRICS_GRPC_METRICS_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <vector>

#include "common/clock.h"
#include "metrics/registry.h"

namespace podprof::metrics {

// The interceptors to hand ServerBuilder::experimental().SetInterceptorCreators(); declares
// the two families in `registry`. Both must outlive the server.
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcMetricsInterceptors(Registry& registry, Clock& clock);

}  // namespace podprof::metrics

#endif  // PODPROF_METRICS_GRPC_METRICS_H_
