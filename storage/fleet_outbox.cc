// The fleet outbox (schema version 6): captures committed here and not yet in the ClickHouse
// fleet store. Written in each capture's own transaction, so a capture is queued exactly when
// it is stored, whatever happens to the process next; the replicator (fleet/) takes entries
// oldest first and removes them once the fleet holds the capture.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/store.h"
#include "storage/store_internal.h"

namespace podprof::storage {

using internal::Transaction;

absl::Status Store::QueueInOutbox(Connection& c, const CaptureWrite& capture) {
  const int64_t limit = fleet_backlog_limit_.load();
  if (limit <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto count, Statement::Prepare(c,
                                                  "SELECT count(*) FROM fleet_outbox "
                                                  "WHERE state = 'pending'"));
  ASSIGN_OR_RETURN(bool row, count->Step());
  if (row && count->Int(0) >= limit) {
    // Full: the oldest entries are kept (they are the furthest behind); this capture stays
    // in the database only.
    ++fleet_not_queued_;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto ins, Statement::Prepare(c,
                                                "INSERT OR REPLACE INTO fleet_outbox "
                                                "(capture_id, queued_ns) VALUES (?, ?)"));
  ins->Bind(1, capture.id).Bind(2, capture.created_ns);
  return ins->Run();
}

absl::StatusOr<int64_t> Store::QueueStoredForFleet(int64_t since_ns) {
  const int64_t limit = fleet_backlog_limit_.load();
  int64_t queued = 0;
  RETURN_IF_ERROR(OnWriter([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(
        auto ins, Statement::Prepare(c,
                                     "INSERT OR IGNORE INTO fleet_outbox (capture_id, queued_ns) "
                                     "SELECT id, created_ns FROM captures WHERE start_ns >= ?1 "
                                     "AND status IN ('complete', 'partial', 'failed') "
                                     "ORDER BY start_ns LIMIT max(0, ?2 - (SELECT count(*) FROM "
                                     "fleet_outbox WHERE state = 'pending'))"));
    ins->Bind(1, since_ns).Bind(2, limit);
    RETURN_IF_ERROR(ins->Run());
    queued = sqlite3_changes(c.get());
    return absl::OkStatus();
  }));
  return queued;
}

absl::StatusOr<std::vector<std::string>> Store::FleetPending(int limit) {
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(auto q, Statement::Prepare(c,
                                              "SELECT capture_id FROM fleet_outbox "
                                              "WHERE state = 'pending' "
                                              "ORDER BY queued_ns, capture_id LIMIT ?"));
  q->Bind(1, static_cast<int64_t>(limit));
  std::vector<std::string> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, q->Step());
    if (!row) break;
    out.push_back(q->Text(0));
  }
  return out;
}

absl::Status Store::FleetReplicated(const std::vector<std::string>& capture_ids) {
  if (capture_ids.empty()) return absl::OkStatus();
  return OnWriter([&](Connection& c) {
    return Transaction(c, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(auto del,
                       Statement::Prepare(c, "DELETE FROM fleet_outbox WHERE capture_id = ?"));
      for (const std::string& id : capture_ids) {
        del->Reset();
        del->Bind(1, id);
        RETURN_IF_ERROR(del->Run());
      }
      return absl::OkStatus();
    });
  });
}

absl::Status Store::FleetAttemptFailed(const std::vector<std::string>& capture_ids,
                                       const std::string& error) {
  if (capture_ids.empty()) return absl::OkStatus();
  return OnWriter([&](Connection& c) {
    return Transaction(c, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(auto up, Statement::Prepare(c,
                                                   "UPDATE fleet_outbox SET attempts = "
                                                   "attempts + 1, error = ? WHERE capture_id = ?"));
      for (const std::string& id : capture_ids) {
        up->Reset();
        up->Bind(1, error).Bind(2, id);
        RETURN_IF_ERROR(up->Run());
      }
      return absl::OkStatus();
    });
  });
}

absl::Status Store::FleetRejected(const std::string& capture_id, const std::string& error) {
  return OnWriter([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(auto up, Statement::Prepare(c,
                                                 "UPDATE fleet_outbox SET state = 'rejected', "
                                                 "attempts = attempts + 1, error = ? "
                                                 "WHERE capture_id = ?"));
    up->Bind(1, error).Bind(2, capture_id);
    return up->Run();
  });
}

absl::StatusOr<FleetBacklog> Store::FleetBacklogStatus() {
  FleetBacklog b;
  b.not_queued = fleet_not_queued_.load();
  PODPROF_WITH_READER(c);
  ASSIGN_OR_RETURN(auto pending, Statement::Prepare(c,
                                                    "SELECT count(*), coalesce(min(queued_ns), 0) "
                                                    "FROM fleet_outbox WHERE state = 'pending'"));
  ASSIGN_OR_RETURN(bool row, pending->Step());
  if (row) {
    b.pending = pending->Int(0);
    b.oldest_queued_ns = pending->Int(1);
  }
  ASSIGN_OR_RETURN(auto rejected, Statement::Prepare(c,
                                                     "SELECT capture_id, error FROM fleet_outbox "
                                                     "WHERE state = 'rejected' "
                                                     "ORDER BY queued_ns DESC"));
  while (true) {
    ASSIGN_OR_RETURN(bool r, rejected->Step());
    if (!r) break;
    ++b.rejected;
    if (b.rejections.size() < 10) b.rejections.emplace_back(rejected->Text(0), rejected->Text(1));
  }
  return b;
}

}  // namespace podprof::storage
