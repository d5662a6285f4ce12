// The aggregator's HTTP routes: /metrics, and the JSON API over the store (/api/v1/...), each
// also as CSV with ?format=csv, so that a notebook can read it with pandas.read_csv(url).
// docs/HTTP.md lists them with examples.
#ifndef PODPROF_AGGREGATOR_HTTP_API_H_
#define PODPROF_AGGREGATOR_HTTP_API_H_

#include <memory>

#include "aggregator/registry.h"
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
};

// The routes; `sources` must outlive the server that serves them.
std::shared_ptr<http::Router> AggregatorRoutes(const HttpApiSources& sources);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_HTTP_API_H_
