#include "agent/registrar.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "proto/grpc_status.h"
#include "security/tls.h"

namespace podprof::agent {

int64_t NextBackoffNs(int64_t last_ns, int64_t max_ns) {
  return std::min(max_ns, last_ns <= 0 ? int64_t{1'000'000'000} : last_ns * 2);
}

int64_t Registrar::Tick() {
  const AgentConfig config = agent_->config();
  if (retry_.exchange(false)) refused_ = false;
  if (refused_) return kRefusedWaitNs;
  // Whether this agent reaches its workload, for `podprof agents`: an agent the aggregator
  // reaches is no use if it cannot reach what it profiles. Checked before the call's deadline
  // starts: it takes up to 0.7 s a service while the workload is away, time the wait for the
  // next heartbeat gives back, so that the aggregator does not see the agent go stale.
  const int64_t check_start = agent_->clock().MonotonicNs();
  const std::vector<podprof::v1::WorkloadEndpoint> endpoints = agent_->CheckWorkload();
  const int64_t check_ns = agent_->clock().MonotonicNs() - check_start;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(agent_->clock().NowNs(), 2'000'000'000));
  grpc::Status s;
  // The aggregator may set the period; until it does, the configured one applies.
  int64_t interval =
      aggregator_interval_ns_ > 0 ? aggregator_interval_ns_ : config.heartbeat_interval_ns;
  if (!registered_) {
    podprof::v1::RegisterRequest req;
    agent_->LearnChipsFromMetrics();
    *req.mutable_host() = agent_->HostInfo();
    req.set_agent_start_ns(agent_->start_ns());
    for (const auto& e : endpoints) *req.add_workload_endpoints() = e;
    for (const std::string& w : agent_->startup_warnings()) req.add_warnings(w);
    podprof::v1::RegisterResponse resp;
    s = stub_->Register(&ctx, req, &resp);
    if (s.ok()) {
      registered_ = true;
      registered_address_ = req.host().agent_address();
      PODPROF_LOG(INFO) << "registered with the aggregator at " << address_;
      if (resp.heartbeat_interval_ms() > 0) {
        interval = aggregator_interval_ns_ = resp.heartbeat_interval_ms() * 1'000'000LL;
      }
    }
  } else {
    podprof::v1::HeartbeatRequest req;
    req.set_host_name(config.host_name);
    req.set_active_capture_id(agent_->active_capture());
    *req.mutable_recorder() = agent_->RecorderStatus();
    req.set_agent_address(registered_address_);
    for (const auto& e : endpoints) *req.add_workload_endpoints() = e;
    podprof::v1::HeartbeatResponse resp;
    s = stub_->Heartbeat(&ctx, req, &resp);
    if (s.ok() && resp.reregister()) registered_ = false;
    if (s.ok() && resp.heartbeat_interval_ms() > 0) {
      interval = aggregator_interval_ns_ = resp.heartbeat_interval_ms() * 1'000'000LL;
    }
  }
  if (s.ok()) {
    backoff_ns_ = 0;
    return registered_ ? std::max<int64_t>(0, interval - check_ns) : 0;
  }
  registered_ = false;
  if (s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
    // The aggregator refuses this certificate or host name: asking again changes nothing until
    // a certificate or a configuration does, and those come with a reload.
    PODPROF_LOG(ERROR) << "the aggregator at " << address_
                       << " refused this agent: " << s.error_message()
                       << "; not asking again until this agent is reloaded (SIGHUP) or restarted";
    refused_ = true;
    backoff_ns_ = 0;
    return kRefusedWaitNs;
  }
  if (backoff_ns_ == 0) {
    const std::string why =
        config.insecure ? "" : security::ExplainTlsDialFailure(s.error_message());
    PODPROF_LOG(WARNING) << "aggregator at " << address_ << " unreachable: " << s.error_message()
                         << (why.empty() ? "" : absl::StrCat(" (", why, ")"))
                         << "; retrying with backoff";
  }
  registered_ = false;
  backoff_ns_ = NextBackoffNs(backoff_ns_, config.heartbeat_max_backoff_ns);
  return backoff_ns_;
}

}  // namespace podprof::agent
