// Thin RAII wrappers over SQLite's C API, and the one place SQLite result codes become Status.
#ifndef PODPROF_STORAGE_SQLITE_H_
#define PODPROF_STORAGE_SQLITE_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace podprof::storage {

// Converts a SQLite result code: SQLITE_FULL -> ResourceExhausted, SQLITE_BUSY/LOCKED ->
// Unavailable, SQLITE_CORRUPT/NOTADB -> DataLoss, SQLITE_CONSTRAINT -> FailedPrecondition,
// SQLITE_CANTOPEN -> NotFound, SQLITE_READONLY -> FailedPrecondition, else Internal; the message
// names `context` and SQLite's text.
absl::Status SqliteStatus(sqlite3* db, int rc, absl::string_view context);

// One connection. Not thread-safe: one thread uses a connection at a time.
class Connection {
 public:
  // Opens (creating if `create`) the database file and registers podprof's SQL functions.
  static absl::StatusOr<std::unique_ptr<Connection>> Open(const std::string& path, bool create);
  // Opens an existing database for reading only. Where SQLite cannot keep its WAL index beside
  // the file (a read-only mount, a folder it may not write), opens it as immutable: nothing
  // else may write it then, which is the case on such a file system.
  static absl::StatusOr<std::unique_ptr<Connection>> OpenReadOnly(const std::string& path);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one or more statements without results.
  absl::Status Exec(absl::string_view sql);
  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }

 private:
  Connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* const db_;
  const std::string path_;
};

// A prepared statement; bind from index 1 as SQLite does. Not thread-safe.
class Statement {
 public:
  // Errors (as SqliteStatus) quote the statement's start and name the database.
  static absl::StatusOr<std::unique_ptr<Statement>> Prepare(Connection& db, absl::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int i, int64_t v);
  Statement& Bind(int i, double v);
  Statement& Bind(int i, absl::string_view text);
  Statement& BindBlob(int i, absl::string_view blob);
  // Binds `blob` without copying it: it must stay valid until the statement is finalized or
  // this parameter is bound again (SQLite may read it at any step until then).
  // For the megabytes of a capture's timelines, which SQLite would otherwise copy once more
  // before writing them.
  Statement& BindBlobInPlace(int i, absl::string_view blob);
  Statement& BindNull(int i);
  // Advances: true with a row, false when done; errors as SqliteStatus.
  absl::StatusOr<bool> Step();
  // Steps through the remaining rows, calling `fn` on each with the statement on it; returns
  // the first error, SQLite's (as Step) or `fn`'s, and stops there. The loop every query would
  // otherwise copy, written once so that no step's error is dropped.
  absl::Status ForEachRow(absl::FunctionRef<absl::Status(const Statement&)> fn);
  // The same, where `fn` also says whether to go on: false ends the walk early (the statement
  // stays where it is; Reset it to run it again).
  absl::Status ForEachRowWhile(absl::FunctionRef<absl::StatusOr<bool>(const Statement&)> fn);
  // Steps to completion of a statement without rows.
  absl::Status Run();
  // Rewinds the statement for new bindings (old ones stay until rebound).
  void Reset();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const;
  std::string Blob(int col) const;
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  Statement(Connection& db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  Connection& db_;
  sqlite3_stmt* const stmt_;
};

// The current row of a statement read left to right: each call takes the next column, so a
// reader names the fields it fills in the order its SELECT lists them, not by index.
class RowReader {
 public:
  explicit RowReader(const Statement& s, int first_column = 0) : s_(s), col_(first_column) {}

  int64_t Int() { return s_.Int(col_++); }
  int Int32() { return static_cast<int>(s_.Int(col_++)); }
  uint64_t Uint64() { return static_cast<uint64_t>(s_.Int(col_++)); }
  bool Bool() { return s_.Int(col_++) != 0; }
  double Double() { return s_.Double(col_++); }
  std::string Text() { return s_.Text(col_++); }
  std::string Blob() { return s_.Blob(col_++); }
  // Whether the next column is NULL (without taking it).
  bool NextIsNull() const { return s_.IsNull(col_); }
  void Skip(int columns = 1) { col_ += columns; }

 private:
  const Statement& s_;
  int col_;
};

// Registers dds_merge(blob) (aggregate), dds_quantile(blob, q) and regexp(pattern, text) (for
// `text REGEXP pattern`) on a connection.
absl::Status RegisterFunctions(sqlite3* db);

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_SQLITE_H_
