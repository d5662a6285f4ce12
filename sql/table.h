// A table that SQL reads without copying it into SQLite: the glue between SQLite's virtual
// table interface and a podprof Table, which answers rows through a Cursor as it reads them
// from the store. The planner's constraints on the columns a table says it uses (a host's
// name, a chip, a time range, a kernel) are handed to Table::Open, so that a query for one
// kernel of one host reads that host alone; SQLite checks every constraint again on the rows,
// so a table may return more rows than they allow, never fewer.
#ifndef PODPROF_SQL_TABLE_H_
#define PODPROF_SQL_TABLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sql/budget.h"

struct sqlite3;
struct sqlite3_context;

namespace podprof::sql {

enum class ColumnType { kInteger, kReal, kText };

struct ColumnDef {
  const char* name;
  ColumnType type;
  // Whether Open is given this column's equality constraints (Bounds::equal) and, for an
  // integer, its range (Bounds::min / max).
  bool pushed = false;
};

// What the planner knows of the rows a query wants, for the pushed columns.
struct Bounds {
  // Column -> the value it must equal (text or integer, as SQLite holds it).
  std::map<int, std::string> equal_text;
  std::map<int, int64_t> equal_int;
  // Column -> inclusive bounds.
  std::map<int, int64_t> min, max;

  std::optional<std::string> Text(int column) const;
  std::optional<int64_t> Int(int column) const;
  int64_t Min(int column, int64_t otherwise) const;
  int64_t Max(int column, int64_t otherwise) const;
};

// The value a cursor gives SQLite for one column of its row.
class ColumnSink {
 public:
  explicit ColumnSink(sqlite3_context* ctx) : ctx_(ctx) {}
  void Int(int64_t v);
  void Real(double v);
  void Text(const std::string& v);  // copied by SQLite
  void Null();

 private:
  sqlite3_context* const ctx_;
};

// One pass over a table's rows. Not thread-safe (SQLite drives it from its thread).
class Cursor {
 public:
  virtual ~Cursor() = default;
  // Moves to the next row: false past the last. Errors stop the statement with their message.
  virtual absl::StatusOr<bool> Next() = 0;
  virtual void Column(int column, ColumnSink& out) const = 0;
};

class Table {
 public:
  virtual ~Table() = default;
  virtual const std::vector<ColumnDef>& columns() const = 0;
  // A cursor before the first row of what `bounds` allows (or more). The cursor charges what it
  // holds to `budget` and checks its time as it reads; `budget` outlives it.
  virtual absl::StatusOr<std::unique_ptr<Cursor>> Open(const Bounds& bounds, Budget& budget) = 0;
};

// Registers `table` on `db` as the eponymous virtual table `name` (`SELECT ... FROM name`,
// nothing to create). `table` and `budget` must outlive `db`.
absl::Status RegisterTable(sqlite3* db, const std::string& name, Table* table, Budget* budget);

}  // namespace podprof::sql

#endif  // PODPROF_SQL_TABLE_H_
