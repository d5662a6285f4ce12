#include "aggregator/capture/registry.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock_probe.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "proto/grpc_status.h"

namespace podprof::aggregator {

void Registry::SetAgentHosts(std::map<std::string, std::vector<std::string>> agent_hosts) {
  absl::MutexLock lock(&mu_);
  agent_hosts_ = std::move(agent_hosts);
}

namespace {

bool Names(const Registry::Identities& identities, const std::string& name) {
  return std::find(identities.begin(), identities.end(), name) != identities.end();
}

bool Overlap(const Registry::Identities& a, const Registry::Identities& b) {
  for (const std::string& x : a) {
    if (Names(b, x)) return true;
  }
  return false;
}

// Whether a host registered by `owner` is another identity's than `caller`'s. Over plaintext
// (no identities on either side) nobody owns a host.
bool OwnedByAnother(const Registry::Identities& owner, const Registry::Identities& caller) {
  return !caller.empty() && !owner.empty() && !Overlap(owner, caller);
}

std::string Who(const Registry::Identities& identities) { return absl::StrJoin(identities, "/"); }

}  // namespace

absl::Status Registry::CheckOwner(const std::string& host, const Identities& caller) const {
  if (caller.empty()) return absl::OkStatus();  // plaintext: nobody is bound
  bool named = Names(caller, host);
  for (const std::string& id : caller) {
    auto it = agent_hosts_.find(id);
    named = named || (it != agent_hosts_.end() && Names(it->second, host));
  }
  if (!named) {
    return absl::PermissionDeniedError(absl::StrCat(
        "agent ", Who(caller), " may not register host ", host,
        ": its certificate does not name that host (CN or SAN), and tls.agent_hosts does not "
        "give it to this identity"));
  }
  auto it = agents_.find(host);
  if (it != agents_.end() && OwnedByAnother(it->second.owner, caller)) {
    return absl::PermissionDeniedError(absl::StrCat("host ", host, " is registered by agent ",
                                                    Who(it->second.owner), "; agent ", Who(caller),
                                                    " may not take it over"));
  }
  return absl::OkStatus();
}

absl::Status CheckRegistration(const podprof::v1::RegisterRequest& req) {
  const podprof::v1::HostInfo& h = req.host();
  const std::string& host = h.host_name();
  if (req.ByteSizeLong() > kMaxRegistrationBytes) {
    return absl::InvalidArgumentError(absl::StrCat("registration of host ", host, " is ",
                                                   req.ByteSizeLong(), " bytes, more than ",
                                                   kMaxRegistrationBytes));
  }
  if (h.chips_size() > kMaxChipsPerHost) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, " registers ", h.chips_size(),
                                                   " chips, more than ", kMaxChipsPerHost));
  }
  std::vector<int32_t> ordinals;
  for (const podprof::v1::ChipInfo& c : h.chips()) ordinals.push_back(c.ordinal());
  std::sort(ordinals.begin(), ordinals.end());
  if (std::adjacent_find(ordinals.begin(), ordinals.end()) != ordinals.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", host, " registers chip ordinal ",
                     *std::adjacent_find(ordinals.begin(), ordinals.end()), " twice"));
  }
  if ((h.has_slice() && h.slice() < 0) || (h.has_slice_worker() && h.slice_worker() < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, " registers slice ", h.slice(),
                                                   " worker ", h.slice_worker(),
                                                   ": both are 0 or more when set"));
  }
  if (h.labels_size() > kMaxLabelsPerHost) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, " registers ", h.labels_size(),
                                                   " labels, more than ", kMaxLabelsPerHost));
  }
  if (req.workload_endpoints_size() > kMaxEndpointsPerHost) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", host, " registers ", req.workload_endpoints_size(),
                     " workload endpoints, more than ", kMaxEndpointsPerHost));
  }
  if (req.warnings_size() > kMaxAgentWarnings) {
    return absl::InvalidArgumentError(absl::StrCat("host ", host, " registers ",
                                                   req.warnings_size(), " warnings, more than ",
                                                   kMaxAgentWarnings));
  }
  for (const std::string& w : req.warnings()) {
    if (w.size() > kMaxAgentWarningBytes) {
      return absl::InvalidArgumentError(absl::StrCat("host ", host, " registers a warning of ",
                                                     w.size(), " bytes, more than ",
                                                     kMaxAgentWarningBytes));
    }
  }
  return absl::OkStatus();
}

absl::Status Registry::Register(const podprof::v1::RegisterRequest& req, const Identities& caller) {
  RETURN_IF_ERROR(CheckRegistration(req));
  const int64_t now = clock_.NowNs();
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckOwner(req.host().host_name(), caller); !s.ok()) return s;
  if (agents_.size() >= kMaxAgents && agents_.count(req.host().host_name()) == 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this aggregator holds ", kMaxAgents, " agents, the most it registers"));
  }
  Entry& e = agents_[req.host().host_name()];
  e.owner = caller;
  const bool moved = e.host.agent_address() != req.host().agent_address();
  e.host = req.host();
  e.endpoints.assign(req.workload_endpoints().begin(), req.workload_endpoints().end());
  e.warnings.assign(req.warnings().begin(), req.warnings().end());
  e.registered_ns = now;
  e.last_heartbeat_ns = now;
  e.agent_start_ns = req.agent_start_ns();
  if (moved || !e.stub) {
    // The channel accepts the chunks capture requests ask for (gRPC's default is 4 MiB).
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(max_chunk_bytes_));
    // A host waiting for a free stream slot (StreamPool) holds its data in the agent, not here:
    // a fixed per-stream window, not one grown by bandwidth probing to megabytes per host.
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 10);
    args.SetResourceQuota(quota_);
    // Connected now and kept connected: a capture's requests must reach every agent before its
    // start instant, and on a pod of thousands of hosts the handshakes alone would eat the lead.
    args.SetInt(GRPC_ARG_CLIENT_IDLE_TIMEOUT_MS, INT_MAX);
    e.channel = grpc::CreateCustomChannel(e.host.agent_address(), credentials_, args);
    e.channel->GetState(/*try_to_connect=*/true);
    e.stub = podprof::v1::Agent::NewStub(e.channel);
    e.clock = ClockModel();
    e.last_probe_ns = 0;
    e.dial_error.clear();
  }
  PODPROF_LOG(INFO) << "agent " << e.host.host_name() << " registered from "
                    << e.host.agent_address() << " with " << e.host.chips_size() << " chips"
                    << (caller.empty() ? "" : " as " + Who(caller));
  return absl::OkStatus();
}

absl::StatusOr<bool> Registry::Heartbeat(const podprof::v1::HeartbeatRequest& req,
                                         const Identities& caller) {
  const int64_t now = clock_.NowNs();
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(req.host_name());
  if (it == agents_.end()) return false;
  if (OwnedByAnother(it->second.owner, caller)) {
    return absl::PermissionDeniedError(absl::StrCat("host ", req.host_name(),
                                                    " is registered by agent ",
                                                    Who(it->second.owner), ", not ", Who(caller)));
  }
  // The entry points elsewhere (an agent that moved, or one that registered in its place while
  // the aggregator ran in plaintext): registering again puts this agent's address back.
  if (!req.agent_address().empty() && req.agent_address() != it->second.host.agent_address()) {
    return false;
  }
  it->second.last_heartbeat_ns = now;
  it->second.active_capture = req.active_capture_id();
  it->second.recorder = req.recorder();
  if (req.workload_endpoints_size() > 0) {
    it->second.endpoints.assign(req.workload_endpoints().begin(), req.workload_endpoints().end());
  }
  return true;
}

absl::Status Registry::CheckSender(const std::string& host, const Identities& caller,
                                   std::vector<int32_t>* chips) {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(host);
  if (it == agents_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host ", host, " is not registered: register before sending telemetry"));
  }
  if (OwnedByAnother(it->second.owner, caller)) {
    return absl::PermissionDeniedError(absl::StrCat("host ", host, " is registered by agent ",
                                                    Who(it->second.owner), ", not ", Who(caller)));
  }
  if (chips != nullptr) {
    chips->clear();
    for (const podprof::v1::ChipInfo& c : it->second.host.chips()) chips->push_back(c.ordinal());
  }
  return absl::OkStatus();
}

void Registry::Touch(const std::string& host) {
  const int64_t now = clock_.NowNs();
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(host);
  if (it != agents_.end())
    it->second.last_heartbeat_ns = std::max(it->second.last_heartbeat_ns, now);
}

podprof::v1::AgentState Registry::StateOf(const Entry& e, int64_t now) const {
  // Liveness by missed heartbeats: a few missed is a hiccup, many is gone.
  const int64_t silent = now - e.last_heartbeat_ns;
  if (silent <= 3 * heartbeat_interval_ns_) return podprof::v1::AGENT_STATE_ONLINE;
  if (silent <= 10 * heartbeat_interval_ns_) return podprof::v1::AGENT_STATE_STALE;
  return podprof::v1::AGENT_STATE_OFFLINE;
}

podprof::v1::AgentState Registry::ShownStateOf(const Entry& e, int64_t now) const {
  const podprof::v1::AgentState s = StateOf(e, now);
  // An agent that heartbeats but cannot be dialled (an advertised name that does not resolve,
  // a port a firewall closes) is not "online": every capture of it would fail.
  if (s == podprof::v1::AGENT_STATE_ONLINE && !e.dial_error.empty()) {
    return podprof::v1::AGENT_STATE_UNREACHABLE;
  }
  return s;
}

std::vector<podprof::v1::AgentStatus> Registry::List(
    const std::map<std::string, std::string>& selector) {
  const int64_t now = clock_.NowNs();
  std::vector<podprof::v1::AgentStatus> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, e] : agents_) {
    bool match = true;
    for (const auto& [k, v] : selector) {
      auto it = e.host.labels().find(k);
      match = match && it != e.host.labels().end() && it->second == v;
    }
    if (!match) continue;
    podprof::v1::AgentStatus s;
    *s.mutable_host() = e.host;
    s.set_state(ShownStateOf(e, now));
    s.set_dial_error(e.dial_error);
    for (const std::string& w : e.warnings) s.add_agent_warnings(w);
    s.set_registered_ns(e.registered_ns);
    s.set_last_heartbeat_ns(e.last_heartbeat_ns);
    for (const auto& ep : e.endpoints) *s.add_workload_endpoints() = ep;
    s.set_active_capture_id(e.active_capture);
    *s.mutable_recorder() = e.recorder;
    if (!e.clock.empty()) {
      ClockEstimate est = e.clock.At(now);
      auto* c = s.mutable_clock();
      c->set_offset_ns(est.offset_ns);
      c->set_uncertainty_ns(est.uncertainty_ns);
      c->set_drift_ppb(est.drift_ppb);
      c->set_min_rtt_ns(est.min_rtt_ns);
      c->set_probe_count(static_cast<uint32_t>(est.probes));
      c->set_updated_ns(e.last_probe_ns);
    }
    out.push_back(std::move(s));
  }
  return out;
}

int Registry::ProbeDue(int burst, bool force) {
  const int64_t now = clock_.NowNs();
  struct Due {
    std::string name;
    std::string address;
    std::shared_ptr<podprof::v1::Agent::Stub> stub;
    std::string udp_host;
    int udp_port = 0;
  };
  std::vector<Due> due;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [name, e] : agents_) {
      if (!force && now - e.last_probe_ns < probe_interval_ns_) continue;
      if (e.channel) e.channel->GetState(/*try_to_connect=*/true);  // reconnect one that dropped
      const std::string& addr = e.host.agent_address();
      due.push_back({name, addr, e.stub, addr.substr(0, addr.rfind(':')),
                     static_cast<int>(e.host.clock_probe_port())});
    }
  }
  // One agent after another: probes that overlap would queue behind each other and widen
  // every bound.
  absl::MutexLock probing(&probe_mu_);
  int answered = 0;
  for (const Due& d : due) {
    const std::string& name = d.name;
    std::vector<Probe> probes;
    if (d.udp_port > 0) {
      absl::StatusOr<std::vector<ProbeTimes>> udp =
          ProbeClock(d.udp_host, d.udp_port, burst, kUdpProbeTimeoutNs, clock_);
      if (udp.ok()) {
        for (const ProbeTimes& t : *udp) probes.push_back({t.t1, t.t2, t.t3, t.t4});
      }
    }
    // Over the Ping RPC when the agent has no UDP responder or none of its answers came back.
    const int pings = probes.empty() ? burst : 0;
    std::string failed;
    for (int i = 0; i < pings; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(DeadlineAt(clock_.NowNs(), 500'000'000));
      podprof::v1::PingRequest req;
      podprof::v1::PingResponse resp;
      Probe p;
      p.t1 = clock_.NowNs();
      req.set_client_send_ns(p.t1);
      grpc::Status s = d.stub->Ping(&ctx, req, &resp);
      p.t4 = clock_.NowNs();
      if (!s.ok()) {
        // An unreachable agent costs one timeout per burst, not eight.
        failed = absl::StrCat("the aggregator cannot reach ", d.address, ": ", s.error_message());
        break;
      }
      p.t2 = resp.agent_receive_ns();
      p.t3 = resp.agent_send_ns();
      probes.push_back(p);
    }
    absl::MutexLock lock(&mu_);
    auto it = agents_.find(name);
    if (it == agents_.end()) continue;
    if (probes.empty()) {
      if (failed.empty()) failed = absl::StrCat("the aggregator cannot reach ", d.address);
      it->second.dial_error = std::move(failed);
      continue;
    }
    ++answered;
    it->second.dial_error.clear();
    for (const Probe& p : probes) it->second.clock.AddProbe(p);
    it->second.last_probe_ns = clock_.NowNs();
  }
  return answered;
}

std::vector<Registry::Handle> Registry::Select(const std::vector<std::string>& hosts,
                                               const std::map<std::string, std::string>& selector,
                                               std::vector<std::string>* missing,
                                               const std::vector<int>& slices) {
  const int64_t now = clock_.NowNs();
  std::vector<Handle> out;
  absl::MutexLock lock(&mu_);
  auto matches = [&](const Entry& e) {
    for (const auto& [k, v] : selector) {
      auto it = e.host.labels().find(k);
      if (it == e.host.labels().end() || it->second != v) return false;
    }
    if (!slices.empty() && (!e.host.has_slice() || std::find(slices.begin(), slices.end(),
                                                             e.host.slice()) == slices.end())) {
      return false;
    }
    return StateOf(e, now) == podprof::v1::AGENT_STATE_ONLINE;
  };
  auto handle = [](const std::string& name, const Entry& e) {
    return Handle{name, e.stub, e.channel, e.host.has_slice() ? e.host.slice() : -1};
  };
  if (hosts.empty()) {
    for (const auto& [name, e] : agents_) {
      if (matches(e)) out.push_back(handle(name, e));
    }
    return out;
  }
  for (const std::string& h : hosts) {
    auto it = agents_.find(h);
    if (it != agents_.end() && matches(it->second)) {
      out.push_back(handle(h, it->second));
    } else {
      missing->push_back(h);
    }
  }
  return out;
}

bool Registry::Estimate(const std::string& host, int64_t at_ns, ClockEstimate* out) {
  absl::MutexLock lock(&mu_);
  auto it = agents_.find(host);
  if (it == agents_.end() || it->second.clock.empty()) return false;
  *out = it->second.clock.At(at_ns);
  return true;
}

}  // namespace podprof::aggregator
