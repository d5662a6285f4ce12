#include "agent/agent_metrics.h"

#include <string>

#include "common/clock.h"
#include "proto/grpc_status.h"
#include "proto/tpu_metric_service.grpc.pb.h"

namespace podprof::agent {
namespace {

using metrics::Registry;
using metrics::Sample;
namespace rt = tpu::monitoring::runtime;

const char* ServiceName(podprof::v1::WorkloadService s) {
  return s == podprof::v1::WORKLOAD_SERVICE_PROFILER ? "profiler" : "runtime_metrics";
}

// One runtime metric of every device, from each metric service the workload offers.
void ReadRuntimeMetric(Agent& agent, const char* metric, const char* family, double scale,
                       Sample& s) {
  const Workload& w = agent.workload();
  for (size_t i = 0; i < w.metrics.size(); ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineAt(agent.clock().NowNs(), 500'000'000));
    rt::MetricRequest req;
    req.set_metric_name(metric);
    rt::MetricResponse resp;
    if (!w.metrics[i]->GetRuntimeMetric(&ctx, req, &resp).ok()) continue;
    for (const rt::Metric& m : resp.metric().metrics()) {
      const double v = m.gauge().value_case() == rt::Gauge::kAsDouble
                           ? m.gauge().as_double()
                           : static_cast<double>(m.gauge().as_int());
      s.Value(family, {std::to_string(m.attribute().value().int_attr())}, v * scale);
    }
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
            "TensorCore duty cycle of each chip (libtpu tpu.runtime.tensorcore.dutycycle.percent "
            "/ 100).",
            {"chip"});
  m.Declare("podprof_tpu_hbm_used_bytes", Registry::Type::kGauge,
            "HBM in use on each chip (libtpu tpu.runtime.hbm.memory.usage.bytes).", {"chip"});
  for (const char* outcome : {"ok", "failed"}) m.Counter("podprof_agent_captures_total", {outcome});
  m.AddCollector([&agent](Sample& s) {
    s.Value("podprof_agent_capture_running", {}, agent.active_capture().empty() ? 0 : 1);
    s.Value("podprof_agent_chips", {}, agent.HostInfo().chips_size());
    for (const podprof::v1::WorkloadEndpoint& e : agent.CheckWorkload()) {
      s.Value("podprof_agent_workload_up", {ServiceName(e.service()), e.address()},
              e.reachable() ? 1 : 0);
    }
    ReadRuntimeMetric(agent, "tpu.runtime.tensorcore.dutycycle.percent",
                      "podprof_tpu_duty_cycle_ratio", 0.01, s);
    ReadRuntimeMetric(agent, "tpu.runtime.hbm.memory.usage.bytes", "podprof_tpu_hbm_used_bytes", 1,
                      s);
  });
}

void RecordCapture(Registry& m, bool ok, double seconds, int64_t events, int64_t bytes) {
  m.Counter("podprof_agent_captures_total", {ok ? "ok" : "failed"})->Add(1);
  m.Histo("podprof_agent_capture_duration_seconds")->Observe(seconds);
  m.Counter("podprof_agent_capture_events_total")->Add(static_cast<double>(events));
  m.Counter("podprof_agent_capture_bytes_total")->Add(static_cast<double>(bytes));
}

}  // namespace podprof::agent
