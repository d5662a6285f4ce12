// Waiting for something to happen, with a deadline: what a test or a benchmark does instead of
// sleeping for as long as it should take. A wait returns as soon as its condition holds, so a
// fast machine does not pay for a slow one, and a slow one gets the whole deadline.
#ifndef PODPROF_HARNESS_WAIT_H_
#define PODPROF_HARNESS_WAIT_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/podprof_aggregator.grpc.pb.h"

namespace podprof::testing {

// Checks `condition` every `interval` until it holds or `timeout` has passed (it is checked
// once more at the deadline); returns whether it held. Real time: the processes a test waits
// for run on the system clock.
inline bool WaitFor(const std::function<bool()>& condition, absl::Duration timeout,
                    absl::Duration interval = absl::Milliseconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    absl::SleepFor(std::min(interval, deadline - now));
  }
  return true;
}

// The aggregator's agents as it lists them; none when ListAgents fails. No wall-clock deadline:
// the aggregator is a child of the test on loopback and answers at once, and the test's own
// timeout bounds a call that hangs.
inline std::optional<v1::ListAgentsResponse> ListAgents(v1::Aggregator::StubInterface& stub) {
  grpc::ClientContext ctx;
  v1::ListAgentsResponse agents;
  if (!stub.ListAgents(&ctx, v1::ListAgentsRequest(), &agents).ok()) return std::nullopt;
  return agents;
}

// How many of the aggregator's agents are online with at least `probes` clock-probe bursts
// behind them (two give the clock model a drift); -1 when ListAgents fails.
inline int ProbedAgents(v1::Aggregator::StubInterface& stub, uint32_t probes = 1) {
  const std::optional<v1::ListAgentsResponse> agents = ListAgents(stub);
  if (!agents) return -1;
  int n = 0;
  for (const auto& a : agents->agents()) {
    n += a.state() == v1::AGENT_STATE_ONLINE && a.clock().probe_count() >= probes;
  }
  return n;
}

}  // namespace podprof::testing

#endif  // PODPROF_HARNESS_WAIT_H_
