#include "agent/agent_service.h"

#include <sys/timex.h>

#include "agent/capture_call.h"
#include "security/rpc_guard.h"

namespace podprof::agent {

podprof::v1::ClockSourceState ReadClockSource() {
  podprof::v1::ClockSourceState out;
  struct timex tx = {};
  int state = adjtimex(&tx);
  if (state < 0) {
    out.set_error_message("adjtimex failed");
    return out;
  }
  out.set_synchronized(state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0);
  out.set_estimated_error_ns(static_cast<int64_t>(tx.esterror) * 1000);  // us -> ns
  out.set_max_error_ns(static_cast<int64_t>(tx.maxerror) * 1000);
  return out;
}

grpc::ServerWriteReactor<podprof::v1::CaptureChunk>* AgentService::Capture(
    grpc::CallbackServerContext* context, const podprof::v1::CaptureRequest* request) {
  return new CaptureCall(agent_, metrics_, &refusals_, context, request);
}

grpc::Status AgentService::Ping(grpc::ServerContext*, const podprof::v1::PingRequest* request,
                                podprof::v1::PingResponse* response) {
  return GuardRpc("Agent.Ping", [&]() -> grpc::Status {
    response->set_agent_receive_ns(agent_->clock().NowNs());
    response->set_client_send_ns(request->client_send_ns());
    // Read the clock as late as possible: the offset bound is half the round trip.
    response->set_agent_send_ns(agent_->clock().NowNs());
    return grpc::Status::OK;
  });
}

grpc::Status AgentService::Info(grpc::ServerContext*, const podprof::v1::InfoRequest*,
                                podprof::v1::InfoResponse* response) {
  return GuardRpc("Agent.Info", [&]() -> grpc::Status {
    agent_->LearnChipsFromMetrics();
    *response->mutable_host() = agent_->HostInfo();
    for (auto& e : agent_->CheckWorkload()) *response->add_workload_endpoints() = e;
    response->set_active_capture_id(agent_->active_capture());
    response->set_agent_start_ns(agent_->start_ns());
    *response->mutable_clock_source() = ReadClockSource();
    *response->mutable_recorder() = agent_->RecorderStatus();
    return grpc::Status::OK;
  });
}

}  // namespace podprof::agent
