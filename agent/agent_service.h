// podprof.v1.Agent, the agent's own gRPC service: captures (on the callback API), Ping for the
// clock probes over gRPC, and Info.
#ifndef PODPROF_AGENT_AGENT_SERVICE_H_
#define PODPROF_AGENT_AGENT_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "agent/agent.h"
#include "metrics/registry.h"
#include "proto/podprof_agent.grpc.pb.h"
#include "security/refusal_log.h"

namespace podprof::agent {

// podprof.v1.Agent. Handlers are thin; the work is in CaptureRunner. Capture is on gRPC's
// callback API (agent/capture_call.h), so that the client going away reaches the capture as
// an event; Ping and Info answer at once and stay synchronous.
class AgentService final
    : public podprof::v1::Agent::WithCallbackMethod_Capture<podprof::v1::Agent::Service> {
 public:
  // Who may start captures comes from the agent's configuration at each call
  // (tls.allowed_aggregators; empty: a certificate carrying urn:podprof:role:aggregator), so a
  // reload changes it for the next call.
  explicit AgentService(Agent* agent) : agent_(agent), refusals_(agent->clock()) {}
  // Where each capture's outcome, duration and volume are counted (/metrics); none when never
  // set. Set before serving; `metrics` must outlive the service.
  void SetMetrics(metrics::Registry* metrics) { metrics_ = metrics; }
  // Where refusals are logged; the daemon routes gRPC's failed handshakes here too.
  security::RefusalLog& refusals() { return refusals_; }
  grpc::ServerWriteReactor<podprof::v1::CaptureChunk>* Capture(
      grpc::CallbackServerContext* context, const podprof::v1::CaptureRequest* request) override;
  grpc::Status Ping(grpc::ServerContext* context, const podprof::v1::PingRequest* request,
                    podprof::v1::PingResponse* response) override;
  grpc::Status Info(grpc::ServerContext* context, const podprof::v1::InfoRequest* request,
                    podprof::v1::InfoResponse* response) override;

 private:
  Agent* const agent_;
  security::RefusalLog refusals_;
  metrics::Registry* metrics_ = nullptr;
};

// The kernel's clock discipline state (adjtimex), for Info.
podprof::v1::ClockSourceState ReadClockSource();

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_AGENT_SERVICE_H_
