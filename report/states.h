// The names podprof prints for states, the same in the CLI's tables and the daemons' metric
// labels.
#ifndef PODPROF_REPORT_STATES_H_
#define PODPROF_REPORT_STATES_H_

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

}  // namespace podprof::report

#endif  // PODPROF_REPORT_STATES_H_
