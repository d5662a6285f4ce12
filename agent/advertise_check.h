// Whether the aggregator could dial the address this agent advertises: checked at start-up.
//
// An agent started with a --host-name (or an advertise address) that does not resolve still
// registers and heartbeats, and `podprof agents` listed it online while every capture of it
// failed to dial. The agent cannot know what the aggregator's resolver says, but a name that
// does not resolve even on the agent's own host almost never resolves elsewhere: the agent
// resolves it before it registers, and says what to set. What it does then is the
// `advertise_check` setting: "warn" (the default: a warning in the log, and the agent
// registers with it, so that `podprof agents` shows it in the NOTE column; a name that resolves
// only at the aggregator, split-horizon DNS, still works) or "refuse" (the agent does not
// start: exit 2 with the same sentence).
#ifndef PODPROF_AGENT_ADVERTISE_CHECK_H_
#define PODPROF_AGENT_ADVERTISE_CHECK_H_

#include <string>

#include "absl/status/status.h"
#include "agent/config.h"

namespace podprof::agent {

// Resolves host names: the system's resolver behind an interface, so that tests need no DNS.
class Resolver {
 public:
  virtual ~Resolver() = default;
  // OK when `host` (a name or a numeric address) resolves to at least one address; otherwise
  // NotFound with the resolver's reason. May block for as long as the system's resolver does.
  virtual absl::Status Resolve(const std::string& host) = 0;
};

// getaddrinfo(3), as gRPC resolves a dialled name on Linux (files, then DNS, per nsswitch).
// Thread-safe.
class SystemResolver final : public Resolver {
 public:
  absl::Status Resolve(const std::string& host) override;
};

// The address `config` advertises to the aggregator, as HostInfo reports it: `advertise`, else
// host_name with the listen port. Whether it came from host_name goes in `*from_host_name`.
std::string AdvertisedAddress(const AgentConfig& config, bool* from_host_name);

// The check at start-up. OK for an agent that registers nowhere (`aggregator` empty) or whose
// advertised host resolves (the port does not matter, and may not be bound yet). Otherwise one
// sentence naming the host, where it came from, the resolver's reason and what to set:
// FailedPrecondition with it when `advertise_check` is "refuse"; with "warn", OK and the sentence
// in `*warning` (for the log and the registration). `config.host_name` must be settled (the agent
// fills in gethostname() first).
absl::Status CheckAdvertisedAddress(const AgentConfig& config, Resolver& resolver,
                                    std::string* warning);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_ADVERTISE_CHECK_H_
