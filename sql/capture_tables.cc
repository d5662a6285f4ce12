#include "sql/capture_tables.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "sql/tables_internal.h"

namespace podprof::sql {

absl::StatusOr<std::unique_ptr<CaptureTables>> CaptureTables::Open(const StoreSources& store,
                                                                   const std::string& capture_id) {
  ASSIGN_OR_RETURN(storage::CaptureRow row, store.captures->Get(capture_id));
  std::unique_ptr<CaptureTables> t(new CaptureTables(std::move(row)));
  t->tables_.emplace_back("events", internal::MakeEventsTable(store, t->capture_));
  t->tables_.emplace_back("kernels", internal::MakeKernelsTable(store, t->capture_));
  t->tables_.emplace_back("collectives", internal::MakeCollectivesTable(store, t->capture_));
  t->tables_.emplace_back("counters", internal::MakeCountersTable(store, t->capture_));
  t->tables_.emplace_back("telemetry", internal::MakeTelemetryTable(store, t->capture_));
  return t;
}

CaptureTables::~CaptureTables() = default;

std::vector<NamedTable> CaptureTables::tables() const {
  std::vector<NamedTable> out;
  for (const auto& [name, table] : tables_) out.push_back({name, table.get()});
  return out;
}

absl::StatusOr<Result> RunOnCapture(const StoreSources& store, const std::string& capture_id,
                                    const std::string& statement, const Limits& limits,
                                    Clock& clock) {
  ASSIGN_OR_RETURN(std::unique_ptr<CaptureTables> tables, CaptureTables::Open(store, capture_id));
  return RunStatement(statement, tables->tables(), limits, clock);
}

}  // namespace podprof::sql
