#include "report/pod_rows.h"

#include <map>

#include "absl/strings/str_join.h"
#include "proto/recorder_states.h"
#include "report/format.h"
#include "report/states.h"

namespace podprof::report {

std::string JoinLabels(const google::protobuf::Map<std::string, std::string>& labels) {
  const std::map<std::string, std::string> sorted(labels.begin(), labels.end());
  return absl::StrJoin(sorted, ";", absl::PairFormatter("="));
}

void WriteStragglersCsv(const v1::GetStragglersResponse& r, std::ostream& out) {
  out << "capture,host,chip,times_last,instances,expected_last,p_value,significant,"
         "caused_wait_ps,lateness_ps,steps\n";
  for (const auto& c : r.chips()) {
    out << CsvField(r.capture_id()) << ',' << CsvField(c.host_name()) << ',' << c.chip_ordinal()
        << ',' << c.times_last() << ',' << c.instances() << ',' << CsvDouble(c.expected_last())
        << ',' << CsvDouble(c.p_value()) << ',' << (c.significant() ? "true" : "false") << ','
        << c.caused_wait_ps() << ',' << c.lateness_ps() << ','
        << CsvField(absl::StrJoin(c.steps(), " ")) << "\n";
  }
}

int SliceOf(const v1::HostInfo& host) { return host.has_slice() ? host.slice() : -1; }

int SliceWorkerOf(const v1::HostInfo& host) {
  return host.has_slice_worker() ? host.slice_worker() : -1;
}

std::string SliceText(const v1::HostInfo& host) {
  return host.has_slice() ? std::to_string(host.slice()) : "-";
}

void WriteAgentsCsv(const v1::ListAgentsResponse& response, std::ostream& out) {
  out << "host,address,state,chips,slice,slice_worker,labels,last_heartbeat_ns,clock_offset_ns,"
         "clock_uncertainty_ns,clock_drift_ppb,min_rtt_ns,probe_count,active_capture_id,"
         "workload,recorder\n";
  for (const auto& a : response.agents()) {
    out << CsvField(a.host().host_name()) << "," << CsvField(a.host().agent_address()) << ","
        << AgentStateName(a.state()) << "," << a.host().chips_size() << "," << SliceOf(a.host())
        << "," << SliceWorkerOf(a.host()) << "," << CsvField(JoinLabels(a.host().labels())) << ","
        << a.last_heartbeat_ns() << "," << a.clock().offset_ns() << ","
        << a.clock().uncertainty_ns() << "," << a.clock().drift_ppb() << ","
        << a.clock().min_rtt_ns() << "," << a.clock().probe_count() << ","
        << CsvField(a.active_capture_id()) << "," << WorkloadStateName(a) << ","
        << CsvField(v1::RecorderStateText(a.recorder())) << "\n";
  }
}

}  // namespace podprof::report
