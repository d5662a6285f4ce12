#include "metrics/grpc_metrics.h"

#include <string>

namespace podprof::metrics {
namespace {

namespace gx = grpc::experimental;

const char* CodeName(grpc::StatusCode c) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int i = static_cast<int>(c);
  return i >= 0 && i < 17 ? kNames[i] : "UNKNOWN";
}

class RpcInterceptor : public gx::Interceptor {
 public:
  RpcInterceptor(gx::ServerRpcInfo* info, Registry& registry, Clock& clock)
      : method_(info->method() == nullptr ? "unknown" : info->method()),
        registry_(registry),
        clock_(clock),
        start_ns_(clock.MonotonicNs()) {
    // "/podprof.v1.Aggregator/ListCaptures" -> "podprof.v1.Aggregator/ListCaptures"
    if (!method_.empty() && method_[0] == '/') method_.erase(0, 1);
  }

  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(gx::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double seconds = (clock_.MonotonicNs() - start_ns_) / 1e9;
      registry_.Histo("podprof_rpc_duration_seconds", {method_})->Observe(seconds);
      registry_
          .Counter("podprof_rpc_requests_total",
                   {method_, CodeName(methods->GetSendStatus().error_code())})
          ->Add(1);
    }
    methods->Proceed();
  }

 private:
  std::string method_;
  Registry& registry_;
  Clock& clock_;
  const int64_t start_ns_;
};

class Factory : public gx::ServerInterceptorFactoryInterface {
 public:
  Factory(Registry& registry, Clock& clock) : registry_(registry), clock_(clock) {}
  gx::Interceptor* CreateServerInterceptor(gx::ServerRpcInfo* info) override {
    return new RpcInterceptor(info, registry_, clock_);
  }

 private:
  Registry& registry_;
  Clock& clock_;
};

}  // namespace

std::vector<std::unique_ptr<gx::ServerInterceptorFactoryInterface>> RpcMetricsInterceptors(
    Registry& registry, Clock& clock) {
  registry.Declare("podprof_rpc_duration_seconds", Registry::Type::kHistogram,
                   "Time from an RPC's arrival to its status, by method.", {"method"},
                   Registry::LatencyBuckets());
  registry.Declare("podprof_rpc_requests_total", Registry::Type::kCounter,
                   "RPCs answered, by method and status code.", {"method", "code"});
  std::vector<std::unique_ptr<gx::ServerInterceptorFactoryInterface>> out;
  out.push_back(std::make_unique<Factory>(registry, clock));
  return out;
}

}  // namespace podprof::metrics
