#include "storage/retention.h"

#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/health.h"
#include "storage/segment_index.h"
#include "storage/store_internal.h"

namespace podprof::storage {
namespace {

using internal::Transaction;

// Per-chip statistics have no cascade (see the schema): deletes the rows within the rowid
// ranges of the captures `ids` (a parenthesized SELECT of their ids, ?1 bound to `bound`)
// selects, each capture's own (a range may hold rows of captures written at the same time).
absl::Status DeleteStatRanges(Connection& c, const std::string& ids, int64_t bound) {
  ASSIGN_OR_RETURN(auto del, Statement::Prepare(c,
                                                "DELETE FROM kernel_stats WHERE rowid "
                                                "BETWEEN ?1 AND ?2 AND capture = ?3"));
  ASSIGN_OR_RETURN(auto ranges,
                   Statement::Prepare(c, absl::StrCat("SELECT stats_first, stats_last, seq "
                                                      "FROM captures WHERE id IN ",
                                                      ids)));
  ranges->Bind(1, bound);
  return ranges->ForEachRow([&](const Statement& row) {
    del->Reset();
    del->Bind(1, row.Int(0)).Bind(2, row.Int(1)).Bind(3, row.Int(2));
    return del->Run();
  });
}

// One batch, its own transaction: `what` (a DELETE ending in "IN") of up to `limit` of the
// rows `select_ids` selects with ?1 bound to `bound`. Returns how many rows went.
absl::StatusOr<int64_t> DeleteBatch(Database& db, const std::string& select_ids, int64_t bound,
                                    const char* what, int limit) {
  int64_t n = 0;
  RETURN_IF_ERROR(db.OnWriter([&](Connection& c) {
    return Transaction(c, [&]() -> absl::Status {
      const std::string ids = absl::StrCat("(", select_ids, " LIMIT ", limit, ")");
      if (absl::StrContains(what, "FROM captures")) {
        RETURN_IF_ERROR(DeleteStatRanges(c, ids, bound));
      }
      if (absl::StrContains(what, "FROM timeline_blocks")) {
        // Their files go with them (RemoveSegments, after the commit).
        ASSIGN_OR_RETURN(auto segs, Statement::Prepare(c, absl::StrCat("DELETE FROM segments "
                                                                       "WHERE kind = '",
                                                                       internal::kTimelineSegments,
                                                                       "' AND capture IN ", ids)));
        segs->Bind(1, bound);
        RETURN_IF_ERROR(segs->Run());
      }
      ASSIGN_OR_RETURN(auto st, Statement::Prepare(c, absl::StrCat(what, " ", ids)));
      st->Bind(1, bound);
      RETURN_IF_ERROR(st->Run());
      n = sqlite3_changes(c.get());
      return absl::OkStatus();
    });
  }));
  return n;
}

// Runs batches until one deletes nothing; returns how many rows went in all.
absl::StatusOr<int64_t> DeleteAll(Database& db, const std::string& select_ids, int64_t bound,
                                  const char* what, int batch) {
  int64_t total = 0;
  while (true) {
    ASSIGN_OR_RETURN(int64_t n, DeleteBatch(db, select_ids, bound, what, batch));
    if (n == 0) return total;
    total += n;
  }
}

// Gives back the pages deleted rows held, and deletes the segment files whose rows went.
absl::Status Vacuum(Database& db) {
  return db.OnWriter([&db](Connection& c) -> absl::Status {
    RETURN_IF_ERROR(c.Exec("PRAGMA incremental_vacuum"));
    return internal::RemoveUnreferencedSegments(c, db.segments()).status();
  });
}

}  // namespace

absl::StatusOr<RetentionResult> ApplyRetention(Database& db, const RetentionPolicy& p,
                                               int64_t now_ns) {
  RetentionResult result;
  const int batch = std::max(1, p.batch);
  if (p.keep_timelines_ns > 0) {
    ASSIGN_OR_RETURN(result.timelines_dropped,
                     DeleteAll(db,
                               "SELECT DISTINCT t.capture FROM timeline_blocks t JOIN "
                               "captures c ON c.seq = t.capture WHERE c.start_ns < ?1",
                               now_ns - p.keep_timelines_ns,
                               "DELETE FROM timeline_blocks WHERE capture IN", batch));
  }
  if (p.max_age_ns > 0) {
    ASSIGN_OR_RETURN(result.captures_deleted,
                     DeleteAll(db, "SELECT id FROM captures WHERE start_ns < ?1 ORDER BY start_ns",
                               now_ns - p.max_age_ns, "DELETE FROM captures WHERE id IN", batch));
  }
  if (p.max_bytes > 0) {
    while (true) {
      RETURN_IF_ERROR(Vacuum(db));
      ASSIGN_OR_RETURN(int64_t used, UsedBytes(db));
      if (used <= p.max_bytes) break;
      // Oldest first, one capture at a time: the size test runs between deletions.
      ASSIGN_OR_RETURN(int64_t n,
                       DeleteBatch(db, "SELECT id FROM captures WHERE ?1 = ?1 ORDER BY start_ns", 0,
                                   "DELETE FROM captures WHERE id IN", 1));
      if (n == 0) break;
      result.captures_deleted += n;
    }
  }
  RETURN_IF_ERROR(Vacuum(db));
  return result;
}

}  // namespace podprof::storage
