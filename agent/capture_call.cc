#include "agent/capture_call.h"

#include <malloc.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "agent/agent_metrics.h"
#include "common/logging.h"
#include "proto/grpc_status.h"
#include "security/tls.h"

namespace podprof::agent {

CaptureCall::CaptureCall(Agent* agent, metrics::Registry* metrics, security::RefusalLog* refusals,
                         grpc::CallbackServerContext* context,
                         const podprof::v1::CaptureRequest* request)
    : agent_(agent), metrics_(metrics), context_(context), request_(request) {
  // Finish before gRPC has bound the reactor is allowed: gRPC starts it once bound.
  if (absl::Status admitted = Admit(refusals); !admitted.ok()) {
    Finish(ToGrpc(admitted));
    return;
  }
  thread_ = std::thread([this] { Capture(); });
}

absl::Status CaptureCall::Admit(security::RefusalLog* refusals) {
  const security::RoleAcl aggregators{security::kAggregatorRole,
                                      agent_->config().allowed_aggregators,
                                      "tls.allowed_aggregators", agent_->config().insecure};
  if (absl::Status a = aggregators.Check(*context_, "the aggregator"); !a.ok()) {
    refusals->Note(context_->peer(), a.message());
    return a;
  }
  if (request_->capture_id().empty()) return absl::InvalidArgumentError("capture_id is empty");
  if (const std::string me = agent_->HostInfo().host_name();
      !request_->host_name().empty() && request_->host_name() != me) {
    return absl::FailedPreconditionError(
        absl::StrCat("capture for host ", request_->host_name(), " reached the agent of ", me));
  }
  return agent_->BeginCapture(request_->capture_id());
}

void CaptureCall::Capture() {
  const podprof::v1::CaptureRequest& request = *request_;
  PODPROF_LOG(INFO) << "capture " << request.capture_id() << ": " << request.duration_ms()
                    << " ms from " << request.start_ns();
  CaptureRunner runner(agent_->clock(), agent_->workload());
  CaptureOutcome outcome;
  const int64_t started = agent_->clock().MonotonicNs();
  // The chips the aggregator is told of, when neither sysfs nor an earlier capture named them.
  agent_->LearnChipsFromMetrics();
  absl::Status s =
      runner.Run(request, agent_->HostInfo(), agent_->Limits(), &cancel_, this, &outcome);
  agent_->LearnChips(outcome.chips);
  agent_->EndCapture();
  if (metrics_ != nullptr) {
    RecordCapture(*metrics_, s.ok(), (agent_->clock().MonotonicNs() - started) / 1e9,
                  static_cast<int64_t>(outcome.counts.events),
                  static_cast<int64_t>(outcome.counts.bytes));
  }
  // A capture reads and converts tens of MB in bursts; the agent shares the host with the
  // training job, so give the freed pages back now instead of keeping the high-water mark.
  malloc_trim(0);
  if (!s.ok()) {
    PODPROF_LOG(WARNING) << "capture " << request.capture_id() << " failed: " << s.message();
  } else {
    PODPROF_LOG(INFO) << "capture " << request.capture_id() << ": " << outcome.counts.events
                      << " events, " << outcome.counts.kernels << " kernels in "
                      << outcome.counts.chunks << " chunks";
  }
  Finish(ToGrpc(s));  // the last use of the reactor on this thread: OnDone may follow at once
}

bool CaptureCall::Write(const podprof::v1::CaptureChunk& chunk) {
  {
    absl::MutexLock lock(&mu_);
    if (!writable_) return false;
    written_ = false;
  }
  StartWrite(&chunk);
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&written_));
  return writable_;
}

void CaptureCall::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  if (!ok) writable_ = false;  // the stream is broken: the client went away
  written_ = true;
}

void CaptureCall::OnCancel() {
  cancel_.Cancel();
  absl::MutexLock lock(&mu_);
  writable_ = false;
}

void CaptureCall::OnDone() {
  // The capture thread finished the call as its last act, so this join waits at most for it
  // to return; a refused call has no thread.
  if (thread_.joinable()) {
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // gRPC ran OnDone inline in Finish: the thread ends on its own
    } else {
      thread_.join();
    }
  }
  delete this;
}

}  // namespace podprof::agent
