// One read-only SQL statement over podprof's tables, run within its limits (budget.h).
//
// The statement runs on a connection of its own to an empty in-memory database that holds
// nothing but the tables it is handed (table.h), so it can reach no file: there is nothing to
// ATTACH to (and ATTACH is refused), extensions cannot load, and an authorizer lets through
// reading and SQL's functions only: any write, schema change, PRAGMA statement or transaction is
// refused before the statement runs, with an error that names it.
#ifndef PODPROF_SQL_ENGINE_H_
#define PODPROF_SQL_ENGINE_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "sql/budget.h"
#include "sql/table.h"

namespace podprof::sql {

// A value of a result: NULL, an integer, a real or text (a blob is returned as text).
using Value = std::variant<std::monostate, int64_t, double, std::string>;

struct Result {
  std::vector<std::string> columns;
  std::vector<std::vector<Value>> rows;
  // More rows were there than Limits::max_rows: the rest were left out.
  bool truncated = false;
  // The most the statement held of its memory budget, and its time, ns.
  int64_t peak_bytes = 0;
  int64_t elapsed_ns = 0;
};

struct NamedTable {
  std::string name;
  Table* table;
};

// Runs `statement` (one SELECT, WITH ... SELECT or VALUES) over `tables`. Errors:
// InvalidArgument for a statement that does not parse, is not one read-only statement, or does
// what is refused (naming it); DeadlineExceeded and ResourceExhausted naming the limit that
// stopped it; a table's own errors as they are.
absl::StatusOr<Result> RunStatement(const std::string& statement,
                                    const std::vector<NamedTable>& tables, const Limits& limits,
                                    Clock& clock);

}  // namespace podprof::sql

#endif  // PODPROF_SQL_ENGINE_H_
