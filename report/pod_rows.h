// The CSV of `podprof stragglers` and `podprof agents`, shared by the CLI and the aggregator's
// HTTP API (`?format=csv`), so that a client reading either gets the same bytes.
#ifndef PODPROF_REPORT_POD_ROWS_H_
#define PODPROF_REPORT_POD_ROWS_H_

#include <ostream>
#include <string>

#include "proto/podprof_aggregator.pb.h"

namespace podprof::report {

// Labels as `k=v;k=v`, sorted by key.
std::string JoinLabels(const google::protobuf::Map<std::string, std::string>& labels);

// A row per chip that was last at a collective: capture, host, chip, times_last, instances,
// expected_last, p_value, significant, caused_wait_ps, lateness_ps, steps (space-separated).
void WriteStragglersCsv(const v1::GetStragglersResponse& response, std::ostream& out);

// A host's slice of a multi-slice job and its worker id there (HostInfo); -1 when its agent
// knows none. SliceText: the slice for a table, "-" for none.
int SliceOf(const v1::HostInfo& host);
int SliceWorkerOf(const v1::HostInfo& host);
std::string SliceText(const v1::HostInfo& host);

// A row per registered agent with its clock: host, address, state, chips, slice, slice_worker
// (-1 when the agent knows none), labels, last_heartbeat_ns, clock_offset_ns,
// clock_uncertainty_ns, clock_drift_ppb, min_rtt_ns, probe_count, active_capture_id, workload,
// recorder (the flight recorder's state, last; empty from an agent that predates it).
void WriteAgentsCsv(const v1::ListAgentsResponse& response, std::ostream& out);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_POD_ROWS_H_
