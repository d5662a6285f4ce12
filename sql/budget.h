// The limits one SQL statement runs within, and what it has used of them. A statement is stopped
// by the first limit it reaches, and its error names that limit, so that a caller knows whether
// to narrow the query (time, memory) or page through it (rows).
#ifndef PODPROF_SQL_BUDGET_H_
#define PODPROF_SQL_BUDGET_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"

namespace podprof::sql {

struct Limits {
  // Wall time from the statement's start to its last row.
  int64_t time_limit_ns = 10'000'000'000;
  // Rows returned: past them the answer is cut and says so (Result::truncated), not an error.
  int64_t max_rows = 10'000;
  // What the statement may hold at once: the host the tables are reading (decoded), what a
  // table keeps for the whole statement (the capture's collective arrivals), the rows returned,
  // and SQLite's own page cache (sorts, groups and CTEs spill to temporary files past it).
  int64_t memory_bytes = 256 << 20;
  // The statement's text.
  int64_t max_statement_bytes = 64 << 10;
};

// Not thread-safe: the statement's thread alone uses it.
class Budget {
 public:
  Budget(const Limits& limits, Clock& clock)
      : limits_(limits), clock_(clock), deadline_ns_(clock.NowNs() + limits.time_limit_ns) {}

  const Limits& limits() const { return limits_; }

  // OK while the statement is within its time; else DeadlineExceeded naming the limit (and
  // remembered, for the error SQLite reports as "interrupted").
  absl::Status CheckTime();
  // Takes `bytes` more (negative gives back): ResourceExhausted naming the limit when the total
  // would pass it, and the bytes are not taken.
  absl::Status Charge(int64_t bytes);
  int64_t held() const { return held_; }
  int64_t peak() const { return peak_; }

  // The first limit that stopped the statement, for its error; OK when none did.
  const absl::Status& stopped() const { return stopped_; }

 private:
  const Limits limits_;
  Clock& clock_;
  const int64_t deadline_ns_;
  int64_t held_ = 0;
  int64_t peak_ = 0;
  absl::Status stopped_;
};

}  // namespace podprof::sql

#endif  // PODPROF_SQL_BUDGET_H_
