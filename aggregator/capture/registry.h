// The aggregator's registry of agents: what they registered, their heartbeats and liveness, and a
// clock model per agent fed by bursts of Ping probes. Thread-safe (one mutex; probing happens
// outside it).
#ifndef PODPROF_AGGREGATOR_CAPTURE_REGISTRY_H_
#define PODPROF_AGGREGATOR_CAPTURE_REGISTRY_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/capture/clock_model.h"
#include "common/clock.h"
#include "proto/podprof_agent.grpc.pb.h"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::aggregator {

// What one registration may hold: a host's chips (a TPU host has 4 or 8, a GPU host up to 16),
// its labels and workload endpoints, and its bytes in all. A registration is kept for as long
// as its host lives, so an agent could otherwise grow the aggregator without bound (100,000
// chips or 12.6 MB of labels were taken).
inline constexpr int kMaxChipsPerHost = 256;
inline constexpr int kMaxLabelsPerHost = 64;
inline constexpr int kMaxEndpointsPerHost = 64;
// The most start-up warnings (RegisterRequest.warnings) an agent may register, and their length.
inline constexpr int kMaxAgentWarnings = 8;
inline constexpr size_t kMaxAgentWarningBytes = 1024;
inline constexpr size_t kMaxRegistrationBytes = 64 << 10;
// Hosts one aggregator registers: past the largest pods (2,240 hosts) many times over.
inline constexpr size_t kMaxAgents = 100'000;

// InvalidArgument naming the host and the limit a registration passes, or OK: chips (each
// ordinal once), labels, endpoints and bytes, as above.
absl::Status CheckRegistration(const podprof::v1::RegisterRequest& request);

class Registry {
 public:
  // `clock` (the aggregator's) must outlive the registry.
  // `credentials` are used for every connection to an agent (mutual TLS, or plaintext).
  // `max_chunk_bytes` is the largest message accepted from an agent: capture requests ask for
  // chunks no larger.
  Registry(
      Clock& clock, int64_t heartbeat_interval_ns, int64_t probe_interval_ns,
      std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials(),
      int64_t max_chunk_bytes = 4 << 20)
      : clock_(clock),
        heartbeat_interval_ns_(heartbeat_interval_ns),
        probe_interval_ns_(probe_interval_ns),
        credentials_(std::move(credentials)),
        max_chunk_bytes_(max_chunk_bytes) {
    quota_.Resize(kAgentBufferBytes);
  }

  int64_t max_chunk_bytes() const { return max_chunk_bytes_; }
  // The aggregator's clock, which every deadline the reads set is on.
  Clock& clock() const { return clock_; }

  // The caller's verified certificate names (CN and SANs, security::PeerIdentities); empty
  // over plaintext, where no one is bound to a host.
  using Identities = std::vector<std::string>;

  // Host names an identity may register besides its own names (`[tls] agent_hosts`), for
  // certificates that do not name their host. Replaces the previous map (a reload).
  void SetAgentHosts(std::map<std::string, std::vector<std::string>> agent_hosts);

  // Adds or refreshes an agent (a restarted agent keeps its clock model only if it kept its
  // address). Over mutual TLS a host belongs to the identity that registers it: the caller's
  // certificate must name the host (CN or SAN) or agent_hosts must list it for the caller, and
  // a host registered by one identity is refused to another. Errors (PermissionDenied) say
  // which rule refused and name the host and both identities.
  // A registration is bounded before anything of it is kept (CheckRegistration), and so is the
  // number of hosts (kMaxAgents: RESOURCE_EXHAUSTED for a new one past it).
  absl::Status Register(const podprof::v1::RegisterRequest& request, const Identities& caller = {});
  // False when the host is unknown or its heartbeat names another address than it registered
  // (the agent must register again, which reclaims the entry). PermissionDenied when a host
  // owned by another identity is named.
  absl::StatusOr<bool> Heartbeat(const podprof::v1::HeartbeatRequest& request,
                                 const Identities& caller = {});
  // OK when `caller` may speak for registered host `host` (telemetry): FailedPrecondition when
  // the host is not registered, PermissionDenied when another identity owns it. `chips`, when
  // given, gets the ordinals of the chips the host registered.
  absl::Status CheckSender(const std::string& host, const Identities& caller,
                           std::vector<int32_t>* chips = nullptr);
  // Counts as a heartbeat: the agent was just heard from another way (it is streaming a
  // capture).
  void Touch(const std::string& host);
  // Agents whose labels include every pair of `selector`, by host name.
  std::vector<podprof::v1::AgentStatus> List(const std::map<std::string, std::string>& selector);

  // Sends a burst of `burst` clock probes (UDP where the agent answers them, else the Ping
  // RPC) to every agent whose last burst is older than the probe interval (or to all when
  // `force`), one agent after another; returns how many agents answered.
  int ProbeDue(int burst, bool force = false);
  // The clock estimate of `host` at aggregator time `at_ns`; false if unknown or unprobed.
  bool Estimate(const std::string& host, int64_t at_ns, ClockEstimate* out);

  struct Handle {
    std::string host;
    std::shared_ptr<podprof::v1::Agent::Stub> stub;
    std::shared_ptr<grpc::Channel> channel;  // the stub's, to connect ahead of a call
    int slice = -1;                          // HostInfo.slice; -1 when the agent knows none
  };
  // Online agents named in `hosts` (all when empty) whose labels match `selector` and, when
  // `slices` names any, whose slice is one of them; names in `hosts` that are not online are
  // returned in *missing.
  std::vector<Handle> Select(const std::vector<std::string>& hosts,
                             const std::map<std::string, std::string>& selector,
                             std::vector<std::string>* missing,
                             const std::vector<int>& slices = {});

  int64_t heartbeat_interval_ns() const { return heartbeat_interval_ns_; }

 private:
  // Why `caller` may not register `host` now, or OK.
  absl::Status CheckOwner(const std::string& host, const Identities& caller) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Entry {
    podprof::v1::HostInfo host;
    Identities owner;  // who registered it; empty over plaintext
    std::vector<podprof::v1::WorkloadEndpoint> endpoints;
    std::vector<std::string> warnings;  // as it registered them
    int64_t registered_ns = 0;
    int64_t last_heartbeat_ns = 0;
    int64_t agent_start_ns = 0;
    int64_t last_probe_ns = 0;
    std::string active_capture;
    podprof::v1::RecorderStatus recorder;  // as the last heartbeat said
    // Why the last probe burst got no answer; empty once one is answered.
    std::string dial_error;
    ClockModel clock;
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<podprof::v1::Agent::Stub> stub;
  };
  // Liveness by heartbeats alone: what captures select by.
  podprof::v1::AgentState StateOf(const Entry& e, int64_t now) const;
  // What ListAgents shows: StateOf, and unreachable where heartbeats arrive but the last probe
  // could not reach the agent.
  podprof::v1::AgentState ShownStateOf(const Entry& e, int64_t now) const;

  Clock& clock_;
  const int64_t heartbeat_interval_ns_;
  const int64_t probe_interval_ns_;
  // A UDP probe that gets no answer in this long is lost; loopback and LAN answers take
  // well under a millisecond.
  static constexpr int64_t kUdpProbeTimeoutNs = 50'000'000;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const int64_t max_chunk_bytes_;
  // Every agent channel's buffers count against this one quota. Without it gRPC keeps each
  // connection's read buffers, sized by its last stream, while it idles: 170 KB an agent, most
  // of what a 2,240-host pod's capture added to the aggregator's peak. Near the limit gRPC
  // reads into smaller buffers and gives idle connections' back (bench_pod_scale: a peak of
  // 644-669 MB against 837-924 without).
  static constexpr size_t kAgentBufferBytes = 64 << 20;
  grpc::ResourceQuota quota_{"podprof-agents"};
  absl::Mutex probe_mu_;  // serializes ProbeDue
  absl::Mutex mu_;
  std::map<std::string, Entry> agents_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<std::string>> agent_hosts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CAPTURE_REGISTRY_H_
