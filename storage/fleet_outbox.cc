#include "storage/fleet_outbox.h"

#include <string>
#include <vector>

#include "common/status_macros.h"
#include "storage/store_internal.h"

namespace podprof::storage {

using internal::Transaction;

absl::Status FleetOutbox::QueueInTransaction(Connection& c, const std::string& capture_id,
                                             int64_t queued_ns) {
  const int64_t limit = backlog_limit_.load();
  if (limit <= 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(auto count, Statement::Prepare(c,
                                                  "SELECT count(*) FROM fleet_outbox "
                                                  "WHERE state = 'pending'"));
  ASSIGN_OR_RETURN(bool row, count->Step());
  if (row && count->Int(0) >= limit) {
    // Full: the oldest entries are kept (they are the furthest behind); this capture stays
    // in the database only.
    ++not_queued_;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto ins, Statement::Prepare(c,
                                                "INSERT OR REPLACE INTO fleet_outbox "
                                                "(capture_id, queued_ns) VALUES (?, ?)"));
  ins->Bind(1, capture_id).Bind(2, queued_ns);
  return ins->Run();
}

absl::StatusOr<int64_t> FleetOutbox::QueueStored(int64_t since_ns) {
  const int64_t limit = backlog_limit_.load();
  int64_t queued = 0;
  RETURN_IF_ERROR(db_.OnWriter([&](Connection& c) -> absl::Status {
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

absl::StatusOr<std::vector<std::string>> FleetOutbox::Pending(int limit) {
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(auto q, Statement::Prepare(*c,
                                              "SELECT capture_id FROM fleet_outbox "
                                              "WHERE state = 'pending' "
                                              "ORDER BY queued_ns, capture_id LIMIT ?"));
  q->Bind(1, static_cast<int64_t>(limit));
  std::vector<std::string> out;
  RETURN_IF_ERROR(q->ForEachRow([&](const Statement& row) {
    out.push_back(row.Text(0));
    return absl::OkStatus();
  }));
  return out;
}

namespace {

// Runs `sql` once per capture id (bound as the last parameter, after `error` when it is set),
// in one transaction on the writer.
absl::Status UpdateEach(Database& db, const char* sql, const std::vector<std::string>& capture_ids,
                        const std::string* error) {
  if (capture_ids.empty()) return absl::OkStatus();
  return db.OnWriter([&](Connection& c) {
    return Transaction(c, [&]() -> absl::Status {
      ASSIGN_OR_RETURN(auto st, Statement::Prepare(c, sql));
      for (const std::string& id : capture_ids) {
        st->Reset();
        if (error != nullptr) {
          st->Bind(1, *error).Bind(2, id);
        } else {
          st->Bind(1, id);
        }
        RETURN_IF_ERROR(st->Run());
      }
      return absl::OkStatus();
    });
  });
}

}  // namespace

absl::Status FleetOutbox::Replicated(const std::vector<std::string>& capture_ids) {
  return UpdateEach(db_, "DELETE FROM fleet_outbox WHERE capture_id = ?", capture_ids, nullptr);
}

absl::Status FleetOutbox::AttemptFailed(const std::vector<std::string>& capture_ids,
                                        const std::string& error) {
  return UpdateEach(db_,
                    "UPDATE fleet_outbox SET attempts = attempts + 1, error = ? "
                    "WHERE capture_id = ?",
                    capture_ids, &error);
}

absl::Status FleetOutbox::Rejected(const std::string& capture_id, const std::string& error) {
  return db_.OnWriter([&](Connection& c) -> absl::Status {
    ASSIGN_OR_RETURN(auto up, Statement::Prepare(c,
                                                 "UPDATE fleet_outbox SET state = 'rejected', "
                                                 "attempts = attempts + 1, error = ? "
                                                 "WHERE capture_id = ?"));
    up->Bind(1, error).Bind(2, capture_id);
    return up->Run();
  });
}

absl::StatusOr<FleetBacklog> FleetOutbox::Backlog() {
  FleetBacklog b;
  b.not_queued = not_queued_.load();
  ASSIGN_OR_RETURN(ReaderLease c, db_.Reader());
  ASSIGN_OR_RETURN(auto pending, Statement::Prepare(*c,
                                                    "SELECT count(*), coalesce(min(queued_ns), 0) "
                                                    "FROM fleet_outbox WHERE state = 'pending'"));
  ASSIGN_OR_RETURN(bool row, pending->Step());
  if (row) {
    b.pending = pending->Int(0);
    b.oldest_queued_ns = pending->Int(1);
  }
  ASSIGN_OR_RETURN(auto rejected, Statement::Prepare(*c,
                                                     "SELECT capture_id, error FROM fleet_outbox "
                                                     "WHERE state = 'rejected' "
                                                     "ORDER BY queued_ns DESC"));
  RETURN_IF_ERROR(rejected->ForEachRow([&](const Statement& r) {
    ++b.rejected;
    if (b.rejections.size() < 10) b.rejections.emplace_back(r.Text(0), r.Text(1));
    return absl::OkStatus();
  }));
  return b;
}

}  // namespace podprof::storage
