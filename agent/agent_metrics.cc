#include "agent/agent_metrics.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/runtime_metrics.h"
#include "proto/tpu_metric_names.h"

namespace podprof::agent {
namespace {

using metrics::Registry;
using metrics::Sample;

const char* ServiceName(podprof::v1::WorkloadService s) {
  return s == podprof::v1::WORKLOAD_SERVICE_PROFILER ? "profiler" : "runtime_metrics";
}

// One runtime gauge of every chip, from each metric service the workload offers; a service
// that does not answer adds nothing.
void ReadRuntimeMetric(Agent& agent, const char* metric, const char* family, double scale,
                       Sample& s) {
  const RuntimeMetrics* metrics = agent.workload().metrics.get();
  for (size_t i = 0; metrics != nullptr && i < metrics->size(); ++i) {
    absl::StatusOr<std::vector<ChipValue>> values = metrics->ReadGauge(i, metric, scale);
    if (!values.ok()) continue;
    for (const ChipValue& v : *values) s.Value(family, {std::to_string(v.chip)}, v.value);
  }
}

}  // namespace

void AddAgentMetrics(Registry& m, Agent& agent) {
  m.Declare("podprof_agent_captures_total", Registry::Type::kCounter,
            "Captures this agent ran, by outcome.", {"outcome"});
  m.Declare("podprof_agent_capture_duration_seconds", Registry::Type::kHistogram,
            "Time from a capture's request to its last chunk sent (the window, then reading "
            "and converting the workload's XSpace).",
            {}, {0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600});
  m.Declare("podprof_agent_capture_events_total", Registry::Type::kCounter,
            "Timeline events sent to the aggregator.");
  m.Declare("podprof_agent_capture_bytes_total", Registry::Type::kCounter,
            "Bytes of capture chunks sent to the aggregator.");
  m.Declare("podprof_agent_capture_running", Registry::Type::kGauge,
            "1 while a capture runs on this host.");
  m.Declare("podprof_agent_chips", Registry::Type::kGauge, "Chips the agent knows on its host.");
  m.Declare("podprof_agent_workload_up", Registry::Type::kGauge,
            "1 when the workload's service answers at the address, else 0.",
            {"service", "address"});
  m.Declare("podprof_tpu_duty_cycle_ratio", Registry::Type::kGauge,
            absl::StrCat("TensorCore duty cycle of each chip (libtpu ",
                         tpu_metrics::kDutyCyclePercent, " / 100)."),
            {"chip"});
  m.Declare("podprof_tpu_hbm_used_bytes", Registry::Type::kGauge,
            absl::StrCat("HBM in use on each chip (libtpu ", tpu_metrics::kHbmUsageBytes, ")."),
            {"chip"});
  for (const char* outcome : {"ok", "failed"}) m.Counter("podprof_agent_captures_total", {outcome});
  m.AddCollector([&agent](Sample& s) {
    s.Value("podprof_agent_capture_running", {}, agent.active_capture().empty() ? 0 : 1);
    s.Value("podprof_agent_chips", {}, agent.HostInfo().chips_size());
    for (const podprof::v1::WorkloadEndpoint& e : agent.CheckWorkload()) {
      s.Value("podprof_agent_workload_up", {ServiceName(e.service()), e.address()},
              e.reachable() ? 1 : 0);
    }
    ReadRuntimeMetric(agent, tpu_metrics::kDutyCyclePercent, "podprof_tpu_duty_cycle_ratio", 0.01,
                      s);
    ReadRuntimeMetric(agent, tpu_metrics::kHbmUsageBytes, "podprof_tpu_hbm_used_bytes", 1, s);
  });
}

void RecordCapture(Registry& m, bool ok, double seconds, int64_t events, int64_t bytes) {
  m.Counter("podprof_agent_captures_total", {ok ? "ok" : "failed"})->Add(1);
  m.Histo("podprof_agent_capture_duration_seconds")->Observe(seconds);
  m.Counter("podprof_agent_capture_events_total")->Add(static_cast<double>(events));
  m.Counter("podprof_agent_capture_bytes_total")->Add(static_cast<double>(bytes));
}

}  // namespace podprof::agent
