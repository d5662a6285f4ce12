#include "sql/engine.h"

#include <sqlite3.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace podprof::sql {
namespace {

// SQLite's page cache for the statement's sorts, groups and temporary tables; past it they
// spill to temporary files. Charged to the budget from the start.
constexpr int64_t kCacheBytes = 32 << 20;
// The longest text or blob one value may be (SQLITE_LIMIT_LENGTH).
constexpr int kMaxValueBytes = 16 << 20;
// How many virtual machine steps between two checks of the time limit.
constexpr int kProgressSteps = 4096;

// What the authorizer refused, for the statement's error: SQLite's own says only "not
// authorized".
struct Refusal {
  std::string why;
};

const char* ActionName(int action) {
  switch (action) {
    case SQLITE_ATTACH:
      return "ATTACH";
    case SQLITE_DETACH:
      return "DETACH";
    case SQLITE_PRAGMA:
      return "PRAGMA";
    case SQLITE_INSERT:
      return "INSERT";
    case SQLITE_UPDATE:
      return "UPDATE";
    case SQLITE_DELETE:
      return "DELETE";
    case SQLITE_TRANSACTION:
      return "a transaction";
    case SQLITE_SAVEPOINT:
      return "SAVEPOINT";
    case SQLITE_ANALYZE:
      return "ANALYZE";
    case SQLITE_REINDEX:
      return "REINDEX";
    case SQLITE_ALTER_TABLE:
      return "ALTER TABLE";
    default:
      return "a schema change";
  }
}

// Functions that reach past the statement's own data: extensions, and the file functions of
// SQLite's shell should a build carry them.
bool RefusedFunction(const char* name) {
  if (name == nullptr) return false;
  const std::string f = absl::AsciiStrToLower(name);
  return f == "load_extension" || f == "readfile" || f == "writefile" || f == "edit" ||
         f == "fts3_tokenizer" || f == "fsdir" || f == "sqlar_compress" || f == "sqlar_uncompress";
}

int Authorize(void* arg, int action, const char* a, const char* b, const char*, const char*) {
  auto* refusal = static_cast<Refusal*>(arg);
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_UPDATE:
      // SQLite asks this of its own schema table when it connects a virtual table; the schema
      // is not writable all the same (SQLITE_DBCONFIG_DEFENSIVE), and a statement that writes
      // is refused as not read-only.
      if (a != nullptr &&
          (std::string_view(a) == "sqlite_master" || std::string_view(a) == "sqlite_temp_master")) {
        return SQLITE_OK;
      }
      break;
    case SQLITE_FUNCTION:
      if (!RefusedFunction(b)) return SQLITE_OK;
      refusal->why = absl::StrCat("sql: the function ", b, "() is refused: it reaches files");
      return SQLITE_DENY;
    default:
      break;
  }
  const bool schema = a != nullptr && (std::string_view(a) == "sqlite_master" ||
                                       std::string_view(a) == "sqlite_temp_master");
  refusal->why = absl::StrCat(
      "sql: ", schema ? "a schema change" : ActionName(action),
      " is refused: only one read-only statement (SELECT, WITH ... SELECT or VALUES) may run",
      a != nullptr && action == SQLITE_PRAGMA ? absl::StrCat(" (PRAGMA ", a, ")") : "");
  return SQLITE_DENY;
}

int Progress(void* arg) { return static_cast<Budget*>(arg)->CheckTime().ok() ? 0 : 1; }

struct Closer {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Db = std::unique_ptr<sqlite3, Closer>;

absl::StatusOr<Db> OpenConnection() {
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(":memory:", &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  Db db(raw);
  if (rc != SQLITE_OK) {
    return absl::InternalError(
        absl::StrCat("sql: opening a connection: ", raw ? sqlite3_errmsg(raw) : "out of memory"));
  }
  sqlite3_db_config(raw, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_ENABLE_VIEW, 0, nullptr);
  sqlite3_db_config(raw, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, nullptr);
  sqlite3_limit(raw, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_limit(raw, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
  sqlite3_limit(raw, SQLITE_LIMIT_EXPR_DEPTH, 200);
  sqlite3_limit(raw, SQLITE_LIMIT_COMPOUND_SELECT, 64);
  sqlite3_limit(raw, SQLITE_LIMIT_FUNCTION_ARG, 32);
  sqlite3_limit(raw, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1000);
  // The cache bounds what sorts and temporary tables keep in memory; and the temporary
  // database's pages (a materialized CTE, a large GROUP BY) are bounded on disk too.
  const std::string pragmas =
      absl::StrCat("PRAGMA cache_size = -", kCacheBytes >> 10, "; PRAGMA temp.cache_size = -",
                   kCacheBytes >> 10, "; PRAGMA temp.max_page_count = 262144;");
  char* err = nullptr;
  if (sqlite3_exec(raw, pragmas.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = err ? err : "?";
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("sql: setting up a connection: ", message));
  }
  return db;
}

Value ReadValue(sqlite3_stmt* stmt, int i, int64_t* bytes) {
  switch (sqlite3_column_type(stmt, i)) {
    case SQLITE_INTEGER:
      *bytes += 8;
      return sqlite3_column_int64(stmt, i);
    case SQLITE_FLOAT:
      *bytes += 8;
      return sqlite3_column_double(stmt, i);
    case SQLITE_NULL:
      return std::monostate();
    default: {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
      const int n = sqlite3_column_bytes(stmt, i);
      *bytes += n + 32;
      return std::string(text ? text : "", n);
    }
  }
}

}  // namespace

// Long: the statement's life in order (checks, connection, tables, authorizer, prepare, rows),
// each step's failure named where it happens; split, the connection and budget would travel.
absl::StatusOr<Result> RunStatement(const std::string& statement,
                                    const std::vector<NamedTable>& tables, const Limits& limits,
                                    Clock& clock) {
  const int64_t started = clock.NowNs();
  if (static_cast<int64_t>(statement.size()) > limits.max_statement_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("sql: the statement is ", statement.size(),
                                                   " bytes, over its limit of ",
                                                   limits.max_statement_bytes));
  }
  Budget budget(limits, clock);
  RETURN_IF_ERROR(budget.Charge(kCacheBytes));
  ASSIGN_OR_RETURN(Db db, OpenConnection());
  for (const NamedTable& t : tables)
    RETURN_IF_ERROR(RegisterTable(db.get(), t.name, t.table, &budget));
  Refusal refusal;
  sqlite3_set_authorizer(db.get(), Authorize, &refusal);
  sqlite3_progress_handler(db.get(), kProgressSteps, Progress, &budget);

  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v3(db.get(), statement.data(), static_cast<int>(statement.size()), 0,
                              &raw, &tail);
  std::unique_ptr<sqlite3_stmt, Closer> stmt(raw);
  if (rc != SQLITE_OK) {
    if (!refusal.why.empty()) return absl::InvalidArgumentError(refusal.why);
    return absl::InvalidArgumentError(absl::StrCat("sql: ", sqlite3_errmsg(db.get())));
  }
  if (stmt == nullptr) return absl::InvalidArgumentError("sql: the statement is empty");
  const std::string rest = tail ? std::string(absl::StripAsciiWhitespace(absl::string_view(
                                      tail, statement.data() + statement.size() - tail)))
                                : "";
  if (!rest.empty() && rest.find_first_not_of("; \t\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        "sql: one statement at a time (text follows the first statement's end)");
  }
  if (!sqlite3_stmt_readonly(stmt.get())) {
    return absl::InvalidArgumentError("sql: only read-only statements may run");
  }

  Result result;
  const int n = sqlite3_column_count(stmt.get());
  for (int i = 0; i < n; ++i) {
    const char* name = sqlite3_column_name(stmt.get(), i);
    result.columns.push_back(name ? name : "");
  }
  while (true) {
    rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if (!budget.stopped().ok()) return budget.stopped();
      if (!refusal.why.empty()) return absl::InvalidArgumentError(refusal.why);
      const std::string message = sqlite3_errmsg(db.get());
      // A table's own error reaches here as its message; SQLite's runtime errors (a value too
      // long, an integer overflow) are the statement's fault too.
      return absl::InvalidArgumentError(
          absl::StrCat(absl::StartsWith(message, "sql: ") ? "" : "sql: ", message));
    }
    if (static_cast<int64_t>(result.rows.size()) >= limits.max_rows) {
      result.truncated = true;
      break;
    }
    std::vector<Value> row;
    row.reserve(n);
    int64_t bytes = 24 + 32 * n;
    for (int i = 0; i < n; ++i) row.push_back(ReadValue(stmt.get(), i, &bytes));
    RETURN_IF_ERROR(budget.Charge(bytes));
    result.rows.push_back(std::move(row));
  }
  result.peak_bytes = budget.peak();
  result.elapsed_ns = clock.NowNs() - started;
  return result;
}

}  // namespace podprof::sql
