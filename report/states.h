// The names podprof prints for states, the same in the CLI's tables and the daemons' metric
// labels.
#ifndef PODPROF_REPORT_STATES_H_
#define PODPROF_REPORT_STATES_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::report {

// "online", "stale", "offline", "unreachable"; "unknown" for anything else.
inline const char* AgentStateName(v1::AgentState s) {
  switch (s) {
    case v1::AGENT_STATE_ONLINE:
      return "online";
    case v1::AGENT_STATE_STALE:
      return "stale";
    case v1::AGENT_STATE_OFFLINE:
      return "offline";
    case v1::AGENT_STATE_UNREACHABLE:
      return "unreachable";
    default:
      return "unknown";
  }
}

// Whether the agent reaches its workload, as its last heartbeat said: "ok" when every service
// it uses (its profiler, its runtime metric services) answered the agent's last check,
// "unreachable" when one did not, "-" when the agent reported none (one that predates the
// check). Apart from the agent's own state: an agent the aggregator reaches may not reach
// what it profiles.
inline const char* WorkloadStateName(const v1::AgentStatus& a) {
  bool checked = false;
  for (const v1::WorkloadEndpoint& ep : a.workload_endpoints()) {
    if (ep.checked_ns() == 0) continue;
    if (!ep.reachable()) return "unreachable";
    checked = true;
  }
  return checked ? "ok" : "-";
}

// Why the agent does not reach its workload: "cannot reach its workload's profiler at ADDRESS:
// REASON" for the first service that did not answer; empty when every one did.
inline std::string WorkloadError(const v1::AgentStatus& a) {
  for (const v1::WorkloadEndpoint& ep : a.workload_endpoints()) {
    if (ep.reachable() || ep.checked_ns() == 0) continue;
    const char* what = ep.service() == v1::WORKLOAD_SERVICE_RUNTIME_METRICS
                           ? "its workload's runtime metrics"
                           : "its workload's profiler";
    return absl::StrCat("cannot reach ", what, " at ", ep.address(),
                        ep.error_message().empty() ? "" : ": ", ep.error_message());
  }
  return "";
}

}  // namespace podprof::report

#endif  // PODPROF_REPORT_STATES_H_
