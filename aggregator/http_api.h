// The aggregator's HTTP routes: /metrics, and the JSON API over the store (/api/v1/...), each
// also as CSV with ?format=csv, so that a notebook can read it with pandas.read_csv(url);
// POSTs start and cancel captures for callers in the operator role.
// docs/HTTP.md lists them with examples.
#ifndef PODPROF_AGGREGATOR_HTTP_API_H_
#define PODPROF_AGGREGATOR_HTTP_API_H_

#include <memory>

#include "aggregator/orchestrator.h"
#include "aggregator/registry.h"
#include "aggregator/service.h"
#include "common/clock.h"
#include "http/server.h"
#include "metrics/registry.h"
#include "storage/store.h"

namespace podprof::aggregator {

struct HttpApiSources {
  storage::Store* store = nullptr;
  Registry* agents = nullptr;
  metrics::Registry* metrics = nullptr;
  Clock* clock = nullptr;
  // Starting and cancelling captures, held to the same operator role as gRPC's.
  Orchestrator* orchestrator = nullptr;
  const AggregatorService* service = nullptr;
};

// The routes; `sources` must outlive the server that serves them.
std::shared_ptr<http::Router> AggregatorRoutes(const HttpApiSources& sources);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_HTTP_API_H_
