// The aggregator's /metrics: what it stores, ingests and replicates, and each agent's clock, read
// at scrape time from where the daemon keeps them (docs/HTTP.md lists the families).
#ifndef PODPROF_AGGREGATOR_API_OBSERVABILITY_H_
#define PODPROF_AGGREGATOR_API_OBSERVABILITY_H_

#include "aggregator/api/queries.h"
#include "aggregator/capture/orchestrator.h"
#include "aggregator/capture/registry.h"
#include "common/clock.h"
#include "fleet/replicator.h"
#include "metrics/registry.h"
#include "storage/store.h"

namespace podprof::aggregator {

struct MetricSources {
  storage::Store* store = nullptr;
  Registry* agents = nullptr;
  Orchestrator* orchestrator = nullptr;
  fleet::Replicator* fleet = nullptr;  // null without [fleet]
  int64_t max_active_hosts = 0;
  const Queries* queries = nullptr;  // its SQL statements running
};

// Declares the aggregator's families in `m` and the collectors that fill them. `sources` and
// `clock` must outlive `m`'s scrapes.
void AddAggregatorMetrics(metrics::Registry& m, const MetricSources& sources, Clock& clock);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_OBSERVABILITY_H_
