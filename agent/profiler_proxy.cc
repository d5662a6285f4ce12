#include "agent/profiler_proxy.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "proto/grpc_status.h"
#include "security/rpc_guard.h"
#include "security/tls.h"

namespace podprof::agent {

grpc::Status ProfilerProxy::Admit(const grpc::ServerContext& context) {
  if (!mutual_tls_) return grpc::Status::OK;
  // Profiler clients are workloads, which no certificate role names: with an empty list any
  // certificate of the CA may profile, as the facade's own loopback callers may.
  const security::RoleAcl clients{"", agent_->config().allowed_profiler_clients,
                                  "tls.allowed_profiler_clients", false};
  absl::Status a = clients.Check(context, "an XProf client");
  if (a.ok()) return grpc::Status::OK;
  refusals_->Note(context.peer(), a.message());
  return ToGrpc(a);
}

grpc::Status ProfilerProxy::Claim(const std::string& id) {
  absl::Status claim = agent_->BeginCapture(id);
  if (claim.ok()) return grpc::Status::OK;
  // As the workload's own server answers a second session.
  if (absl::IsFailedPrecondition(claim)) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, std::string(claim.message()));
  }
  return ToGrpc(claim);
}

grpc::Status ProfilerProxy::Profile(grpc::ServerContext* context,
                                    const tensorflow::ProfileRequest* request,
                                    tensorflow::ProfileResponse* response) {
  return GuardRpc("ProfilerService.Profile", [&]() -> grpc::Status {
    if (grpc::Status admitted = Admit(*context); !admitted.ok()) return admitted;
    const int64_t now = agent_->clock().NowNs();
    tensorflow::ProfileRequest bounded = *request;
    if (absl::Status b = BoundProfileRequest(agent_->XprofLimits(), now, &bounded); !b.ok()) {
      PODPROF_LOG(WARNING) << "XProf capture " << request->session_id() << " for "
                           << context->peer() << " refused: " << b.message();
      return ToGrpc(b);
    }
    // The facade shares the host with podprof's own captures: one session at a time.
    if (grpc::Status claimed = Claim(absl::StrCat("xprof:", bounded.session_id())); !claimed.ok()) {
      return claimed;
    }
    // A capture of the workload by someone other than the aggregator: worth a line.
    const uint64_t duration_ms = std::max(bounded.duration_ms(), bounded.opts().duration_ms());
    PODPROF_LOG(INFO) << "XProf capture " << bounded.session_id() << " for " << context->peer()
                      << ", " << duration_ms << " ms into " << bounded.repository_root();
    {
      absl::MutexLock lock(&mu_);
      session_ = bounded.session_id();
    }
    // As XProf's client waits: max(workload_timeout, 2 x duration) past the start, so a hung
    // workload does not hold the host past the bounds (duration_ms is at most an hour here).
    const RunnerLimits limits = agent_->Limits();
    const int64_t duration_ns = static_cast<int64_t>(duration_ms) * 1'000'000;
    const int64_t start = static_cast<int64_t>(bounded.opts().start_timestamp_ns());
    const int64_t wait_ns = std::max<int64_t>(limits.workload_timeout_ns, 2 * duration_ns) +
                            std::max<int64_t>(0, start - now);
    std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
    ctx->set_deadline(DeadlineAt(now, wait_ns));  // the caller's, when earlier, still applies
    grpc::Status s = agent_->workload().profiler->Profile(ctx.get(), bounded, response);
    {
      absl::MutexLock lock(&mu_);
      session_.reset();
    }
    agent_->EndCapture();
    return s;
  });
}

grpc::Status ProfilerProxy::Terminate(grpc::ServerContext* context,
                                      const tensorflow::TerminateRequest* request,
                                      tensorflow::TerminateResponse* response) {
  return GuardRpc("ProfilerService.Terminate", [&]() -> grpc::Status {
    if (grpc::Status admitted = Admit(*context); !admitted.ok()) return admitted;
    {
      // Only the facade's own session: podprof's captures are not a facade caller's to end.
      absl::MutexLock lock(&mu_);
      if (!session_.has_value() || *session_ != request->session_id()) {
        const std::string active = agent_->active_capture();
        return grpc::Status(
            grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("no XProf session \"", request->session_id(),
                         "\" is running through this agent",
                         active.empty()
                             ? ""
                             : absl::StrCat(" (the host is busy with capture \"", active, "\")")));
      }
    }
    std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
    ctx->set_deadline(DeadlineAt(agent_->clock().NowNs(), agent_->Limits().workload_timeout_ns));
    return agent_->workload().profiler->Terminate(ctx.get(), *request, response);
  });
}

grpc::Status ProfilerProxy::Monitor(grpc::ServerContext* context,
                                    const tensorflow::MonitorRequest* request,
                                    tensorflow::MonitorResponse* response) {
  return GuardRpc("ProfilerService.Monitor", [&]() -> grpc::Status {
    if (grpc::Status admitted = Admit(*context); !admitted.ok()) return admitted;
    if (absl::Status b =
            CheckXprofDuration(request->duration_ms(), agent_->XprofLimits(), "duration_ms");
        !b.ok()) {
      return ToGrpc(b);
    }
    // A Monitor window is a profiling session in the workload too: it waits its turn.
    if (grpc::Status claimed = Claim("xprof monitor"); !claimed.ok()) return claimed;
    const int64_t window_ns = static_cast<int64_t>(request->duration_ms()) * 1'000'000;
    std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
    ctx->set_deadline(
        DeadlineAt(agent_->clock().NowNs(), agent_->Limits().workload_timeout_ns + window_ns));
    grpc::Status s = agent_->workload().profiler->Monitor(ctx.get(), *request, response);
    agent_->EndCapture();
    return s;
  });
}

}  // namespace podprof::agent
