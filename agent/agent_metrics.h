// The agent's /metrics: its captures, whether the workload answers, and the libtpu runtime
// metrics (TensorCore duty cycle, HBM in use) read from the workload at every scrape, so that
// a TPU fleet has always-on dashboards the way dcgm-exporter gives GPUs.
#ifndef PODPROF_AGENT_AGENT_METRICS_H_
#define PODPROF_AGENT_AGENT_METRICS_H_

#include "agent/agent.h"
#include "metrics/registry.h"

namespace podprof::agent {

// Declares the agent's families in `m` and the collectors that fill them; `agent` must
// outlive `m`'s scrapes. The capture counts and durations are recorded by AgentService.
void AddAgentMetrics(metrics::Registry& m, Agent& agent);

// What AgentService records of each capture it ran.
void RecordCapture(metrics::Registry& m, bool ok, double seconds, int64_t events, int64_t bytes);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_AGENT_METRICS_H_
