#include "storage/sqlite.h"

#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "trace/ddsketch.h"

namespace podprof::storage {

absl::Status SqliteStatus(sqlite3* db, int rc, absl::string_view context) {
  const char* text = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  std::string msg = absl::StrCat(context, ": ", text);
  switch (rc & 0xFF) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
      return absl::OkStatus();
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(
          absl::StrCat(msg, " (the disk or the database's size limit is full)"));
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(msg);
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(msg);
    case SQLITE_CANTOPEN:
      return absl::NotFoundError(msg);
    case SQLITE_READONLY:
      return absl::FailedPreconditionError(
          absl::StrCat(msg, " (the database file or its folder is read-only)"));
    default:
      return absl::InternalError(msg);
  }
}

namespace {

// `path` as a file: URI with SQLite's query parameters (percent-encoding what a URI reserves).
std::string FileUri(const std::string& path, absl::string_view params) {
  std::string uri = "file:";
  for (unsigned char ch : path) {
    if (ch == '%' || ch == '?' || ch == '#' || ch < 0x20 || ch >= 0x7f) {
      absl::StrAppend(&uri, "%", absl::Hex(ch, absl::kZeroPad2));
    } else {
      uri.push_back(static_cast<char>(ch));
    }
  }
  return absl::StrCat(uri, "?", params);
}

sqlite3* OpenRaw(const std::string& name, int flags, absl::Status* status,
                 const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(name.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    *status = SqliteStatus(db, rc, absl::StrCat("open database ", path));
    sqlite3_close(db);
    return nullptr;
  }
  return db;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Connection>> Connection::OpenReadOnly(const std::string& path) {
  const int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
  absl::Status status;
  for (const char* params : {"mode=ro", "immutable=1"}) {
    sqlite3* db = OpenRaw(FileUri(path, params), flags, &status, path);
    if (db == nullptr) continue;
    std::unique_ptr<Connection> c(new Connection(db, path));
    // A WAL database whose -shm SQLite cannot create opens but fails at the first read.
    status = c->Exec("SELECT count(*) FROM sqlite_schema");
    if (!status.ok()) continue;
    sqlite3_busy_timeout(db, 5000);
    RETURN_IF_ERROR(RegisterFunctions(db));
    return c;
  }
  return status;
}

absl::StatusOr<std::unique_ptr<Connection>> Connection::Open(const std::string& path, bool create) {
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  absl::Status status;
  sqlite3* db = OpenRaw(path, flags, &status, path);
  if (db == nullptr) return status;
  std::unique_ptr<Connection> c(new Connection(db, path));
  // Readers wait briefly for a checkpoint rather than failing.
  sqlite3_busy_timeout(db, 5000);
  absl::Status s = RegisterFunctions(db);
  if (!s.ok()) return s;
  s = c->Exec("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;");
  if (!s.ok()) return s;
  return c;
}

Connection::~Connection() { sqlite3_close_v2(db_); }

absl::Status Connection::Exec(absl::string_view sql) {
  char* err = nullptr;
  std::string text(sql);
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (err != nullptr) sqlite3_free(err);
  if (rc != SQLITE_OK) return SqliteStatus(db_, rc, absl::StrCat("database ", path_));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Statement>> Statement::Prepare(Connection& db,
                                                              absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db.get(), sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    // SQLite's text says what is wrong ("no such column: x") but not in which of the many
    // statements a store prepares: quote its start.
    constexpr size_t kQuoted = 80;
    const absl::string_view text = absl::StripLeadingAsciiWhitespace(sql);
    std::string quoted(text.substr(0, kQuoted));
    for (char& ch : quoted) {
      if (ch == '\n' || ch == '\t') ch = ' ';
    }
    if (text.size() > kQuoted) quoted += "...";
    return SqliteStatus(db.get(), rc, absl::StrCat("prepare \"", quoted, "\" on ", db.path()));
  }
  return std::unique_ptr<Statement>(new Statement(db, stmt));
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::Bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
Statement& Statement::Bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}
Statement& Statement::Bind(int i, absl::string_view text) {
  sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindBlob(int i, absl::string_view blob) {
  sqlite3_bind_blob(stmt_, i, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindBlobInPlace(int i, absl::string_view blob) {
  sqlite3_bind_blob(stmt_, i, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
  return *this;
}
Statement& Statement::BindNull(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteStatus(db_.get(), rc, absl::StrCat("database ", db_.path()));
}

absl::Status Statement::ForEachRow(absl::FunctionRef<absl::Status(const Statement&)> fn) {
  while (true) {
    ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return absl::OkStatus();
    RETURN_IF_ERROR(fn(*this));
  }
}

absl::Status Statement::ForEachRowWhile(
    absl::FunctionRef<absl::StatusOr<bool>(const Statement&)> fn) {
  while (true) {
    ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return absl::OkStatus();
    ASSIGN_OR_RETURN(bool more, fn(*this));
    if (!more) return absl::OkStatus();
  }
}

absl::Status Statement::Run() {
  absl::StatusOr<bool> r = Step();
  sqlite3_reset(stmt_);
  return r.status();
}

void Statement::Reset() {
  // Bindings stay: every caller binds all parameters again, and clearing costs per row.
  sqlite3_reset(stmt_);
}

std::string Statement::Text(int col) const {
  const unsigned char* t = sqlite3_column_text(stmt_, col);
  return t == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(t));
}

std::string Statement::Blob(int col) const {
  const void* b = sqlite3_column_blob(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return b == nullptr ? std::string() : std::string(static_cast<const char*>(b), n);
}

namespace {

// The sketch a blob argument holds; nullopt, with the statement's error set, if it holds none.
std::optional<trace::DDSketch> SketchArg(sqlite3_context* ctx, sqlite3_value* v) {
  absl::string_view blob(static_cast<const char*>(sqlite3_value_blob(v)), sqlite3_value_bytes(v));
  absl::StatusOr<trace::DDSketch> s = trace::DDSketch::Deserialize(blob);
  if (!s.ok()) {
    sqlite3_result_error(ctx, std::string(s.status().message()).c_str(), -1);
    return std::nullopt;
  }
  return *std::move(s);
}

void MergeStep(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto** acc =
      static_cast<trace::DDSketch**>(sqlite3_aggregate_context(ctx, sizeof(trace::DDSketch*)));
  if (acc == nullptr) return;
  if (*acc == nullptr) *acc = new trace::DDSketch();
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return;
  if (std::optional<trace::DDSketch> s = SketchArg(ctx, argv[0])) (*acc)->Merge(*s);
}

void MergeFinal(sqlite3_context* ctx) {
  auto** acc = static_cast<trace::DDSketch**>(sqlite3_aggregate_context(ctx, 0));
  if (acc == nullptr || *acc == nullptr) {
    sqlite3_result_null(ctx);
    return;
  }
  std::string blob = (*acc)->Serialize();
  delete *acc;
  sqlite3_result_blob(ctx, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
}

void Quantile(sqlite3_context* ctx, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  if (std::optional<trace::DDSketch> s = SketchArg(ctx, argv[0])) {
    sqlite3_result_double(ctx, s->Quantile(sqlite3_value_double(argv[1])));
  }
}

// The text of `v` (empty for NULL), with its length: SQLite texts may hold NULs.
absl::string_view TextOf(sqlite3_value* v) {
  const char* text = reinterpret_cast<const char*>(sqlite3_value_text(v));
  if (text == nullptr) return {};
  return absl::string_view(text, static_cast<size_t>(sqlite3_value_bytes(v)));
}

// `text REGEXP pattern` calls regexp(pattern, text): whether RE2 finds the pattern anywhere in
// the text (common/pattern.h; a NULL text never matches). The compiled pattern is cached per
// statement as auxiliary data, so a query compiles it once. A pattern that CompileUserPattern
// refuses fails the statement with its message.
void Regexp(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const bool null_text = sqlite3_value_type(argv[1]) == SQLITE_NULL;
  auto* cached = static_cast<UserPattern*>(sqlite3_get_auxdata(ctx, 0));
  if (cached != nullptr) {
    sqlite3_result_int(ctx, !null_text && cached->Search(TextOf(argv[1])) ? 1 : 0);
    return;
  }
  absl::StatusOr<UserPattern> re = CompileUserPattern("REGEXP", TextOf(argv[0]));
  if (!re.ok()) {
    sqlite3_result_error(ctx, std::string(re.status().message()).c_str(), -1);
    return;
  }
  auto* owned = new UserPattern(*std::move(re));
  sqlite3_result_int(ctx, !null_text && owned->Search(TextOf(argv[1])) ? 1 : 0);
  // SQLite owns it from here, and may free it at once.
  sqlite3_set_auxdata(ctx, 0, owned, [](void* p) { delete static_cast<UserPattern*>(p); });
}

}  // namespace

absl::Status RegisterFunctions(sqlite3* db) {
  int rc = sqlite3_create_function(db, "dds_merge", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr,
                                   nullptr, MergeStep, MergeFinal);
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "dds_quantile", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr,
                                 Quantile, nullptr, nullptr);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "regexp", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr,
                                 Regexp, nullptr, nullptr);
  }
  return rc == SQLITE_OK ? absl::OkStatus() : SqliteStatus(db, rc, "register SQL functions");
}

}  // namespace podprof::storage
