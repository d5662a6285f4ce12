// The aggregator's side of the fleet store: the replicator built from [fleet] (its state as
// ListAgents reports it is api/api_rows.h's FillFleetStatus).
#ifndef PODPROF_AGGREGATOR_FLEET_LINK_H_
#define PODPROF_AGGREGATOR_FLEET_LINK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "aggregator/config.h"
#include "common/clock.h"
#include "fleet/replicator.h"
#include "storage/store.h"

namespace podprof::aggregator {

// The replicator [fleet] asks for, started (it reaches ClickHouse on its own thread; failures
// there are logged naming the setting and never stop the aggregator); null when
// fleet.clickhouse_url is empty. InvalidArgument naming the key for a malformed URL or an
// unreadable password file.
absl::StatusOr<std::unique_ptr<fleet::Replicator>> StartFleet(const AggregatorConfig& config,
                                                              storage::Store& store, Clock& clock);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_FLEET_LINK_H_
