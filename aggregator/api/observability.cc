#include "aggregator/api/observability.h"

#include <string>

#include "report/states.h"
#include "storage/health.h"

namespace podprof::aggregator {
namespace {

using Metrics = metrics::Registry;
using metrics::Sample;
constexpr auto kGauge = Metrics::Type::kGauge;
constexpr auto kCounter = Metrics::Type::kCounter;

void DeclareFamilies(Metrics& m) {
  m.Declare("podprof_captures", kGauge, "Captures in the store, by state.", {"state"});
  m.Declare("podprof_captures_stored_total", kCounter,
            "Captures committed to the store since the aggregator started.");
  m.Declare("podprof_ingest_events_total", kCounter,
            "Timeline events of the hosts of committed captures.");
  m.Declare("podprof_ingest_bytes_total", kCounter,
            "Bytes the hosts of committed captures streamed.");
  m.Declare("podprof_ingest_active_hosts", kGauge,
            "Hosts streaming into the ingest pipeline now (the pipeline's queue).");
  m.Declare("podprof_ingest_max_active_hosts", kGauge,
            "Hosts that may stream at once ([ingest] max_active_hosts).");
  m.Declare("podprof_store_bytes", kGauge, "Bytes of the SQLite database in use.");
  m.Declare("podprof_sql_statements_running", kGauge,
            "SQL statements running now (at most 2 at once; docs/SQL.md).");
  m.Declare("podprof_agents", kGauge, "Registered agents, by state.", {"state"});
  m.Declare("podprof_agent_clock_offset_seconds", kGauge,
            "Each agent's clock minus the aggregator's, as last estimated.", {"host"});
  m.Declare("podprof_agent_clock_uncertainty_seconds", kGauge,
            "The bound on the error of each agent's clock offset.", {"host"});
  m.Declare("podprof_agent_heartbeat_age_seconds", kGauge,
            "Time since each agent's last heartbeat.", {"host"});
}

void DeclareFleet(Metrics& m) {
  m.Declare("podprof_fleet_backlog_captures", kGauge,
            "Captures stored here and waiting for the ClickHouse fleet store.");
  m.Declare("podprof_fleet_backlog_limit_captures", kGauge,
            "The backlog's bound ([fleet] backlog_limit).");
  m.Declare("podprof_fleet_backlog_oldest_age_seconds", kGauge,
            "Age of the oldest capture waiting for the fleet store (0 when none).");
  m.Declare("podprof_fleet_rejected_captures", kGauge,
            "Captures whose rows ClickHouse refused, kept in the outbox.");
  m.Declare("podprof_fleet_replicated_total", kCounter,
            "Captures replicated to the fleet store since the aggregator started.");
  m.Declare("podprof_fleet_up", kGauge,
            "1 when the last replication attempt succeeded (or none failed yet), else 0.");
}

}  // namespace

void AddAggregatorMetrics(Metrics& m, const MetricSources& src, Clock& clock) {
  DeclareFamilies(m);
  m.AddCollector([src](Sample& s) {
    if (auto counts = src.store->captures().CountsByState(); counts.ok()) {
      for (const storage::CaptureState k : storage::kCaptureStates) {
        const char* state = storage::CaptureStateName(k);
        auto it = counts->find(state);
        s.Value("podprof_captures", {state}, it == counts->end() ? 0 : it->second);
      }
    }
    const storage::CaptureWriter::Written w = src.store->writer().written();
    s.Value("podprof_captures_stored_total", {}, w.captures);
    s.Value("podprof_ingest_events_total", {}, w.events);
    s.Value("podprof_ingest_bytes_total", {}, w.bytes);
    s.Value("podprof_ingest_active_hosts", {}, src.orchestrator->active_hosts());
    s.Value("podprof_ingest_max_active_hosts", {}, src.max_active_hosts);
    if (auto used = storage::UsedBytes(src.store->database()); used.ok())
      s.Value("podprof_store_bytes", {}, *used);
    if (src.queries != nullptr)
      s.Value("podprof_sql_statements_running", {}, src.queries->sql_running());
  });
  m.AddCollector([src, &clock](Sample& s) {
    std::map<std::string, int> states = {
        {"online", 0}, {"stale", 0}, {"offline", 0}, {"unreachable", 0}};
    const int64_t now = clock.NowNs();
    for (const podprof::v1::AgentStatus& a : src.agents->List({})) {
      ++states[report::AgentStateName(a.state())];
      const std::string& host = a.host().host_name();
      if (a.clock().probe_count() > 0) {
        s.Value("podprof_agent_clock_offset_seconds", {host}, a.clock().offset_ns() / 1e9);
        s.Value("podprof_agent_clock_uncertainty_seconds", {host},
                a.clock().uncertainty_ns() / 1e9);
      }
      s.Value("podprof_agent_heartbeat_age_seconds", {host}, (now - a.last_heartbeat_ns()) / 1e9);
    }
    for (const auto& [state, n] : states) s.Value("podprof_agents", {state}, n);
  });
  if (src.fleet == nullptr) return;
  DeclareFleet(m);
  m.AddCollector([src, &clock](Sample& s) {
    const fleet::ReplicatorStatus f = src.fleet->Status();
    s.Value("podprof_fleet_backlog_captures", {}, f.backlog.pending);
    s.Value("podprof_fleet_backlog_limit_captures", {}, src.fleet->options().backlog_limit);
    s.Value("podprof_fleet_backlog_oldest_age_seconds", {},
            f.backlog.pending > 0 ? (clock.NowNs() - f.backlog.oldest_queued_ns) / 1e9 : 0);
    s.Value("podprof_fleet_rejected_captures", {}, f.backlog.rejected);
    s.Value("podprof_fleet_replicated_total", {}, f.replicated);
    s.Value("podprof_fleet_up", {}, f.last_error.empty() ? 1 : 0);
  });
}

}  // namespace podprof::aggregator
