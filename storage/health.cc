#include "storage/health.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/segment_index.h"

namespace podprof::storage {

absl::StatusOr<int64_t> UsedBytes(Database& db) {
  ASSIGN_OR_RETURN(ReaderLease c, db.Reader());
  ASSIGN_OR_RETURN(
      auto s, Statement::Prepare(
                  *c,
                  "SELECT (SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count "
                  "FROM pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())"));
  ASSIGN_OR_RETURN(bool row, s->Step());
  const int64_t pages = row ? s->Int(0) * s->Int(1) : 0;
  ASSIGN_OR_RETURN(const int64_t segments, db.segments().DiskBytes());
  return pages + segments;
}

absl::Status CheckIntegrity(Database& db) {
  ASSIGN_OR_RETURN(ReaderLease c, db.Reader());
  ASSIGN_OR_RETURN(auto s, Statement::Prepare(*c, "PRAGMA integrity_check"));
  ASSIGN_OR_RETURN(bool row, s->Step());
  if (!row || s->Text(0) != "ok") {
    return absl::DataLossError(
        absl::StrCat("integrity check of ", db.path(), ": ", row ? s->Text(0) : "no answer"));
  }
  s.reset();
  return internal::VerifySegments(*c, db.segments());
}

absl::Status CheckWriter(Database& db, int64_t timeout_ns) {
  if (db.read_only()) {
    // No writer to check: healthy while the file answers a query.
    ASSIGN_OR_RETURN(ReaderLease c, db.Reader());
    return c->Exec("SELECT count(*) FROM captures");
  }
  // Shared with the task: the caller may give up before the writer gets to it.
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> result = done->get_future();
  const int lock_ms = static_cast<int>(std::clamp<int64_t>(timeout_ns / 2'000'000, 1, 5000));
  RETURN_IF_ERROR(db.Post([done, lock_ms](Connection& c) {
    sqlite3_busy_timeout(c.get(), lock_ms);
    absl::Status s = c.Exec("BEGIN IMMEDIATE");
    if (s.ok()) s = c.Exec("ROLLBACK");
    sqlite3_busy_timeout(c.get(), 5000);
    if (!s.ok()) {
      s = absl::UnavailableError(
          absl::StrCat("the database's write lock is held elsewhere: ", s.message()));
    }
    done->set_value(s);
  }));
  if (result.wait_for(std::chrono::nanoseconds(timeout_ns)) != std::future_status::ready) {
    return absl::DeadlineExceededError(
        absl::StrCat("the store's writer did not answer within ", timeout_ns / 1'000'000, " ms"));
  }
  return result.get();
}

}  // namespace podprof::storage
