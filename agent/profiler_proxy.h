// The XProf facade: tensorflow.ProfilerService served by the agent and forwarded to the
// workload's profiler within the bounds of agent/xprof_bounds.h.
#ifndef PODPROF_AGENT_PROFILER_PROXY_H_
#define PODPROF_AGENT_PROFILER_PROXY_H_

#include <grpcpp/grpcpp.h>

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "proto/profiler_service.grpc.pb.h"
#include "security/refusal_log.h"

namespace podprof::agent {

// tensorflow.ProfilerService that forwards to the workload, so XProf's capture button or
// `jax.collect_profile` pointed at the agent captures the workload, writing files where the
// request says within the bounds of agent/xprof_bounds.h.
//
// Who can reach it: over mutual TLS (FacadeUsesTls) callers are held to
// tls.allowed_profiler_clients, and refusals go to `refusals`; on loopback it is plaintext with
// no authentication, as XProf clients speak no TLS, so every local user can call it. What a
// caller gets: a session of at most limits.max_capture_duration, written under the allowed
// roots, while no other capture holds the host (one at a time, podprof's own captures
// included), with a deadline on the call to the workload; Terminate ends only the session
// this facade is running, and Monitor is held to the same length and the same turn.
//
// Handlers run on gRPC's threads; the running session's id is guarded by mu_.
class ProfilerProxy final : public tensorflow::ProfilerService::Service {
 public:
  ProfilerProxy(Agent* agent, bool mutual_tls, security::RefusalLog* refusals)
      : agent_(agent), mutual_tls_(mutual_tls), refusals_(refusals) {}
  // INVALID_ARGUMENT for a request beyond the bounds (naming the field and the limit),
  // ALREADY_EXISTS while another capture holds the host (naming it), UNAVAILABLE while the
  // agent drains; otherwise the workload's answer.
  grpc::Status Profile(grpc::ServerContext* context, const tensorflow::ProfileRequest* request,
                       tensorflow::ProfileResponse* response) override;
  // FAILED_PRECONDITION unless `session_id` is the session this facade is running.
  grpc::Status Terminate(grpc::ServerContext* context, const tensorflow::TerminateRequest* request,
                         tensorflow::TerminateResponse* response) override;
  // INVALID_ARGUMENT past the duration limit, ALREADY_EXISTS while the host is busy.
  grpc::Status Monitor(grpc::ServerContext* context, const tensorflow::MonitorRequest* request,
                       tensorflow::MonitorResponse* response) override;

 private:
  // OK, or the refusal (logged) of a caller not in tls.allowed_profiler_clients.
  grpc::Status Admit(const grpc::ServerContext& context);
  // Claims the host for `id`: the refusal as the facade answers it, or OK.
  grpc::Status Claim(const std::string& id);
  Agent* const agent_;
  const bool mutual_tls_;
  security::RefusalLog* const refusals_;
  absl::Mutex mu_;
  // The session_id of the Profile call running through this facade, if any.
  std::optional<std::string> session_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_PROFILER_PROXY_H_
