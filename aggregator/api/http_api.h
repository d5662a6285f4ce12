// The aggregator's HTTP routes: /metrics, and the JSON API over the store (/api/v1/...), each
// also as CSV with ?format=csv, so that a notebook can read it with pandas.read_csv(url);
// POSTs start and cancel captures for callers in the operator role.
// docs/HTTP.md lists them with examples.
#ifndef PODPROF_AGGREGATOR_API_HTTP_API_H_
#define PODPROF_AGGREGATOR_API_HTTP_API_H_

#include <memory>
#include <string>

#include "aggregator/api/access_control.h"
#include "aggregator/api/queries.h"
#include "aggregator/api/store_reads.h"
#include "aggregator/capture/orchestrator.h"
#include "aggregator/recorder/triggers.h"
#include "common/clock.h"
#include "fleet/clickhouse.h"
#include "http/server.h"
#include "metrics/registry.h"

namespace podprof::aggregator {

struct HttpApiSources {
  // Every read the routes answer: the same layer, and so the same answers, as gRPC's.
  Queries* queries = nullptr;
  // What the views and downloads read a capture's timelines through (the store's read roles).
  const StoreReads* reads = nullptr;
  metrics::Registry* metrics = nullptr;
  Clock* clock = nullptr;
  // Starting and cancelling captures, held to the same operator role as gRPC's.
  Orchestrator* orchestrator = nullptr;
  // Who may start and cancel captures: the roles gRPC checks.
  const AccessRules* access = nullptr;
  // Where "Open in Perfetto" posts traces ([http] perfetto_ui).
  std::string perfetto_ui = "https://ui.perfetto.dev";
  // Why starting and cancelling captures over HTTP is refused to everyone, or "" when the
  // operator role decides: plaintext HTTP beyond loopback lets anyone who can reach the port
  // act as an operator, so it takes [http] insecure_writes to allow it.
  std::string writes_refused;
  // The triggers (GET /api/v1/triggers, the webhook POST /api/v1/snapshots/webhook); null
  // leaves those routes answering 404.
  TriggerLoop* triggers = nullptr;
  // The fleet store [fleet] replicates to, which /api/v1/fleet/... ask (fleet/queries.h), and
  // its database; null (no [fleet]) leaves those routes answering 404 saying so.
  const fleet::ClickHouse* fleet = nullptr;
  std::string fleet_database = "podprof";
};

// The routes; `sources` must outlive the server that serves them.
std::shared_ptr<http::Router> AggregatorRoutes(const HttpApiSources& sources);

// The routes behind the web pages (http_views.cc): the pod timeline per window, the collective
// waits heatmap, a kernel as `podprof kernel` describes it, a diff as `podprof diff` judges
// it, export downloads, and the pages' settings.
void AddViewRoutes(const HttpApiSources& sources, http::Router& router);

// The fleet store's questions (fleet_routes.cc): /api/v1/fleet/history, /top and
// /regressions, as `podprof fleet` asks them, written by the same report/ code.
void AddFleetRoutes(const HttpApiSources& sources, http::Router& router);

// A capture's cross-slice (DCN) transfers (dcn_routes.cc): /api/v1/captures/{id}/dcn, as
// `podprof dcn` asks it, written by the same report/ code.
void AddDcnRoutes(const HttpApiSources& sources, http::Router& router);

// POST /api/v1/sql (sql_routes.cc): a read-only SQL statement over a capture's tables, as
// `podprof sql` asks it.
void AddSqlRoutes(const HttpApiSources& sources, http::Router& router);

// POST /mcp (mcp_routes.cc): the registry's tools over the Model Context Protocol.
void AddMcpRoutes(const HttpApiSources& sources, http::Router& router);

// GET /api/v1/triggers (trigger_routes.cc): the triggers' settings and their last events.
void AddTriggerRoutes(const HttpApiSources& sources, http::Router& router);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_HTTP_API_H_
