// The fleet outbox (schema version 6): captures committed here and not yet in the ClickHouse
// fleet store. An entry is written in its capture's own transaction, so a capture is queued
// exactly when it is stored, whatever happens to the process next; the replicator (fleet/)
// takes entries oldest first and removes them once the fleet holds the capture. Thread-safe.
#ifndef PODPROF_STORAGE_FLEET_OUTBOX_H_
#define PODPROF_STORAGE_FLEET_OUTBOX_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/database.h"
#include "storage/rows.h"

namespace podprof::storage {

class FleetOutbox {
 public:
  explicit FleetOutbox(Database& db) : db_(db) {}
  FleetOutbox(const FleetOutbox&) = delete;
  FleetOutbox& operator=(const FleetOutbox&) = delete;

  // From now on every capture committed is also queued while fewer than `backlog_limit` wait;
  // past it the capture is stored but not queued (counted in FleetBacklog::not_queued).
  // 0 stops queueing.
  void QueueForFleet(int64_t backlog_limit) { backlog_limit_ = backlog_limit; }
  // On the writer, in the transaction that stores capture `capture_id`: its entry, when
  // QueueForFleet asked for them and the backlog has room.
  absl::Status QueueInTransaction(Connection& c, const std::string& capture_id, int64_t queued_ns);
  // Queues the captures already stored (complete, partial or failed ones that started at or
  // after `since_ns`), oldest first, as far as the backlog has room: a fleet store turned on
  // for a pod with history. Captures ClickHouse already holds are skipped when replicated.
  // Returns how many were queued.
  absl::StatusOr<int64_t> QueueStored(int64_t since_ns);
  // The ids of up to `limit` pending captures, oldest first.
  absl::StatusOr<std::vector<std::string>> Pending(int limit);
  // The captures are in the fleet store now: their entries go.
  absl::Status Replicated(const std::vector<std::string>& capture_ids);
  // A failed attempt that will be retried: counts it and keeps why.
  absl::Status AttemptFailed(const std::vector<std::string>& capture_ids, const std::string& error);
  // The fleet store refused the capture's rows: it stays in the outbox, out of the queue,
  // with why, for an operator to see (podprof fleet status).
  absl::Status Rejected(const std::string& capture_id, const std::string& error);
  absl::StatusOr<FleetBacklog> Backlog();

 private:
  Database& db_;
  std::atomic<int64_t> backlog_limit_{0};
  std::atomic<int64_t> not_queued_{0};
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_FLEET_OUTBOX_H_
