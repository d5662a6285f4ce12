// Retention: captures deleted by age and size, timelines dropped earlier, in bounded batches.
#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "storage/store.h"
#include "storage/store_internal.h"
#include "trace/kernel_stats.h"

namespace podprof::storage {

using internal::Transaction;

absl::StatusOr<RetentionResult> Store::ApplyRetention(const RetentionPolicy& p, int64_t now_ns) {
  RetentionResult result;
  const int batch = std::max(1, p.batch);
  // Each batch is its own transaction: a long retention pass never holds the writer for long.
  auto delete_batch = [&](const std::string& select_ids, int64_t bound, const char* what,
                          int limit) -> absl::StatusOr<int64_t> {
    int64_t n = 0;
    absl::Status s = OnWriter([&](Connection& c) {
      return Transaction(c, [&]() -> absl::Status {
        const std::string ids = absl::StrCat("(", select_ids, " LIMIT ", limit, ")");
        if (absl::StrContains(what, "FROM captures")) {
          // Per-chip statistics have no cascade (see the schema): delete their rowid ranges.
          ASSIGN_OR_RETURN(auto del, Statement::Prepare(c,
                                                        "DELETE FROM kernel_stats WHERE rowid "
                                                        "BETWEEN ?1 AND ?2"));
          ASSIGN_OR_RETURN(auto ranges,
                           Statement::Prepare(c, absl::StrCat("SELECT stats_first, stats_last "
                                                              "FROM captures WHERE id IN ",
                                                              ids)));
          ranges->Bind(1, bound);
          while (true) {
            ASSIGN_OR_RETURN(bool row, ranges->Step());
            if (!row) break;
            del->Reset();
            del->Bind(1, ranges->Int(0)).Bind(2, ranges->Int(1));
            RETURN_IF_ERROR(del->Run());
          }
        }
        ASSIGN_OR_RETURN(auto st, Statement::Prepare(c, absl::StrCat(what, " ", ids)));
        st->Bind(1, bound);
        RETURN_IF_ERROR(st->Run());
        n = sqlite3_changes(c.get());
        return absl::OkStatus();
      });
    });
    if (!s.ok()) return s;
    return n;
  };
  if (p.keep_timelines_ns > 0) {
    while (true) {
      ASSIGN_OR_RETURN(int64_t n,
                       delete_batch("SELECT DISTINCT t.capture FROM timeline_blocks t JOIN "
                                    "captures c ON c.seq = t.capture WHERE c.start_ns < ?1",
                                    now_ns - p.keep_timelines_ns,
                                    "DELETE FROM timeline_blocks WHERE capture IN", batch));
      if (n == 0) break;
      result.timelines_dropped += n;
    }
  }
  if (p.max_age_ns > 0) {
    while (true) {
      ASSIGN_OR_RETURN(
          int64_t n,
          delete_batch("SELECT id FROM captures WHERE start_ns < ?1 ORDER BY start_ns",
                       now_ns - p.max_age_ns, "DELETE FROM captures WHERE id IN", batch));
      if (n == 0) break;
      result.captures_deleted += n;
    }
  }
  if (p.max_bytes > 0) {
    while (true) {
      RETURN_IF_ERROR(OnWriter([](Connection& c) { return c.Exec("PRAGMA incremental_vacuum"); }));
      ASSIGN_OR_RETURN(int64_t used, UsedBytes());
      if (used <= p.max_bytes) break;
      // Oldest first, one capture at a time: the size test runs between deletions.
      ASSIGN_OR_RETURN(int64_t n,
                       delete_batch("SELECT id FROM captures WHERE ?1 = ?1 ORDER BY start_ns", 0,
                                    "DELETE FROM captures WHERE id IN", 1));
      if (n == 0) break;
      result.captures_deleted += n;
    }
  }
  RETURN_IF_ERROR(OnWriter([](Connection& c) { return c.Exec("PRAGMA incremental_vacuum"); }));
  return result;
}

}  // namespace podprof::storage
