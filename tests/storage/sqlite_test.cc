// The SQLite wrappers on a real database file: opening and creating, prepared statements with
// every kind of bind, stepping and resetting, transactions, and how SQLite's errors become
// Status (the one place they do).
#include "storage/sqlite.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"

namespace podprof::storage {
namespace {

namespace fs = std::filesystem;
using ::podprof::testing::StatusIs;

class SqliteTest : public ::testing::Test {
 protected:
  // A new database with one table t(k INTEGER PRIMARY KEY, i, d, s, b).
  std::unique_ptr<Connection> CreateWithTable() {
    auto c = Connection::Open(db_.path(), /*create=*/true);
    EXPECT_OK(c);
    if (!c.ok()) return nullptr;
    EXPECT_OK(
        (*c)->Exec("CREATE TABLE t(k INTEGER PRIMARY KEY, i INTEGER, d REAL, s TEXT, "
                   "b BLOB)"));
    return std::move(*c);
  }
  int64_t Count(Connection& c) {
    auto st = Statement::Prepare(c, "SELECT count(*) FROM t");
    EXPECT_OK(st);
    if (!st.ok()) return -1;
    absl::StatusOr<bool> row = (*st)->Step();
    EXPECT_TRUE(row.ok() && *row);
    return (*st)->Int(0);
  }
  podprof::testing::TempDatabase db_{"sqlite"};
};

TEST_F(SqliteTest, OpenWithoutCreateOfAMissingFileIsNotFound) {
  auto c = Connection::Open(db_.path(), /*create=*/false);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound) << c.status();
  EXPECT_NE(c.status().message().find(db_.path()), std::string::npos) << c.status();
  EXPECT_FALSE(fs::exists(db_.path())) << "nothing created";
}

TEST_F(SqliteTest, ReadOnlyOpenOfAMissingFileIsNotFound) {
  auto c = Connection::OpenReadOnly(db_.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound) << c.status();
  EXPECT_NE(c.status().message().find(db_.path()), std::string::npos) << c.status();
  EXPECT_FALSE(fs::exists(db_.path()));
}

TEST_F(SqliteTest, CreateThenReopenSeesTheData) {
  {
    auto c = CreateWithTable();
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->path(), db_.path());
    ASSERT_OK(c->Exec("INSERT INTO t(i) VALUES (1), (2)"));
  }
  auto again = Connection::Open(db_.path(), /*create=*/false);
  ASSERT_OK(again);
  EXPECT_EQ(Count(**again), 2);
  auto ro = Connection::OpenReadOnly(db_.path());
  ASSERT_OK(ro);
  EXPECT_EQ(Count(**ro), 2);
  // podprof's SQL functions are there on a read-only connection too.
  auto st = Statement::Prepare(**ro, "SELECT 'abc' REGEXP 'b+'");
  ASSERT_OK(st);
  ASSERT_TRUE(*(*st)->Step());
  EXPECT_EQ((*st)->Int(0), 1);
}

// dds_merge and dds_quantile read their blob the one way: what is not a sketch is the
// statement's error, in either.
TEST_F(SqliteTest, SketchFunctionsRefuseABlobThatIsNotASketch) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  for (const char* sql : {"SELECT dds_quantile(X'FF00', 0.5)", "SELECT dds_merge(X'FF00')"}) {
    auto st = Statement::Prepare(*c, sql);
    ASSERT_OK(st);
    EXPECT_FALSE((*st)->Step().ok()) << sql;
  }
}

TEST_F(SqliteTest, RegexpWithABadPatternIsAnErrorNotACrash) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  auto bad = Statement::Prepare(*c, "SELECT 'abc' REGEXP '(['");
  ASSERT_OK(bad);
  absl::StatusOr<bool> row = (*bad)->Step();
  ASSERT_FALSE(row.ok());
  EXPECT_TRUE(absl::StrContains(row.status().message(), "is not a regular expression"))
      << row.status();
  // 20,000 nested groups overflowed std::regex's stack: now the length cap refuses them.
  auto nested = Statement::Prepare(*c, "SELECT 'abc' REGEXP ?1");
  ASSERT_OK(nested);
  (*nested)->Bind(1, std::string(20'000, '(') + std::string(20'000, ')'));
  row = (*nested)->Step();
  ASSERT_FALSE(row.ok());
  EXPECT_TRUE(absl::StrContains(row.status().message(), "pattern is 40000 bytes, at most 4096"))
      << row.status();
}

TEST_F(SqliteTest, ForEachRowVisitsEveryRowInOrder) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Exec("INSERT INTO t(k, i, s) VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c')"));
  ASSERT_OK_AND_ASSIGN(auto st, Statement::Prepare(*c, "SELECT i, s FROM t ORDER BY k"));
  std::vector<std::string> seen;
  ASSERT_OK(st->ForEachRow([&](const Statement& row) {
    seen.push_back(absl::StrCat(row.Int(0), row.Text(1)));
    return absl::OkStatus();
  }));
  EXPECT_EQ(seen, (std::vector<std::string>{"10a", "20b", "30c"}));
  // After Reset the statement runs again, from its first row.
  int again = 0;
  st->Reset();
  ASSERT_OK(st->ForEachRow([&](const Statement&) {
    ++again;
    return absl::OkStatus();
  }));
  EXPECT_EQ(again, 3);
}

TEST_F(SqliteTest, ForEachRowStopsAtTheFirstErrorOfTheCallback) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Exec("INSERT INTO t(k) VALUES (1), (2), (3)"));
  ASSERT_OK_AND_ASSIGN(auto st, Statement::Prepare(*c, "SELECT k FROM t ORDER BY k"));
  int calls = 0;
  absl::Status s = st->ForEachRow([&](const Statement& row) {
    ++calls;
    return row.Int(0) == 2 ? absl::DataLossError("row 2") : absl::OkStatus();
  });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_EQ(calls, 2);
}

TEST_F(SqliteTest, ForEachRowReturnsAnErrorOfAStepAfterRows) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Exec("INSERT INTO t(k, s) VALUES (1, 'b+'), (2, '(['), (3, 'c')"));
  // The second row's pattern fails sqlite3_step itself, after a first good row.
  ASSERT_OK_AND_ASSIGN(auto st, Statement::Prepare(*c, "SELECT 'abc' REGEXP s FROM t ORDER BY k"));
  int calls = 0;
  absl::Status s = st->ForEachRow([&](const Statement&) {
    ++calls;
    return absl::OkStatus();
  });
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "is not a regular expression")) << s;
  EXPECT_EQ(calls, 1);
}

TEST_F(SqliteTest, ForEachRowWhileEndsWhenTheCallbackSaysSo) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Exec("INSERT INTO t(k) VALUES (1), (2), (3)"));
  ASSERT_OK_AND_ASSIGN(auto st, Statement::Prepare(*c, "SELECT k FROM t ORDER BY k"));
  std::vector<int64_t> seen;
  ASSERT_OK(st->ForEachRowWhile([&](const Statement& row) -> absl::StatusOr<bool> {
    seen.push_back(row.Int(0));
    return row.Int(0) < 2;
  }));
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2}));
  st->Reset();
  EXPECT_THAT(st->ForEachRowWhile([](const Statement&) -> absl::StatusOr<bool> {
    return absl::InternalError("no");
  }),
              StatusIs(absl::StatusCode::kInternal));
}

TEST_F(SqliteTest, RowReaderTakesTheColumnsInOrder) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  ASSERT_OK_AND_ASSIGN(auto st,
                       Statement::Prepare(*c, "SELECT 7, -1, 1, 2.5, 'text', x'00ff', NULL, 9"));
  ASSERT_OK_AND_ASSIGN(bool row, st->Step());
  ASSERT_TRUE(row);
  RowReader col(*st);
  EXPECT_EQ(col.Int(), 7);
  EXPECT_EQ(col.Uint64(), UINT64_MAX) << "stored ids and hashes are unsigned";
  EXPECT_TRUE(col.Bool());
  EXPECT_EQ(col.Double(), 2.5);
  EXPECT_EQ(col.Text(), "text");
  EXPECT_EQ(col.Blob(), std::string("\x00\xff", 2));
  EXPECT_TRUE(col.NextIsNull());
  col.Skip();
  EXPECT_FALSE(col.NextIsNull());
  EXPECT_EQ(col.Int32(), 9);
  RowReader from_two(*st, 2);
  EXPECT_TRUE(from_two.Bool());
}

TEST_F(SqliteTest, RegexpIsRe2AndLinearInTheText) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  auto st = Statement::Prepare(*c,
                               "SELECT ?1 REGEXP '(.*)*#', ?2 REGEXP '^fusion\\.[0-9]+$', "
                               "NULL REGEXP ''");
  ASSERT_OK(st);
  (*st)->Bind(1, std::string(100'000, 'x')).Bind(2, std::string("fusion.17"));
  absl::StatusOr<bool> row = (*st)->Step();
  ASSERT_OK(row);
  ASSERT_TRUE(*row);
  EXPECT_EQ((*st)->Int(0), 0);
  EXPECT_EQ((*st)->Int(1), 1);
  EXPECT_EQ((*st)->Int(2), 0);
}

TEST_F(SqliteTest, WritingThroughAReadOnlyConnectionIsFailedPrecondition) {
  ASSERT_NE(CreateWithTable(), nullptr);
  auto ro = Connection::OpenReadOnly(db_.path());
  ASSERT_OK(ro);
  absl::Status s = (*ro)->Exec("INSERT INTO t(i) VALUES (1)");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s;
}

TEST_F(SqliteTest, BindsOfEveryTypeRoundTrip) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  auto ins = Statement::Prepare(*c, "INSERT INTO t(k, i, d, s, b) VALUES (?, ?, ?, ?, ?)");
  ASSERT_OK(ins);
  const std::string blob("\0\1\2\xff", 4);  // NULs and high bytes survive
  ASSERT_OK((*ins)
                ->Bind(1, int64_t{1})
                .Bind(2, int64_t{-(int64_t{1} << 62)})
                .Bind(3, 2.5)
                .Bind(4, absl::string_view("h\xc3\xa9llo"))
                .BindBlob(5, blob)
                .Run());
  // Run() rewinds: the same statement inserts again with new bindings.
  ASSERT_OK((*ins)->Bind(1, int64_t{2}).BindNull(2).BindNull(3).BindNull(4).BindNull(5).Run());

  auto sel = Statement::Prepare(*c, "SELECT i, d, s, b FROM t WHERE k = ?");
  ASSERT_OK(sel);
  Statement& q = **sel;
  q.Bind(1, int64_t{1});
  absl::StatusOr<bool> row = q.Step();
  ASSERT_TRUE(row.ok() && *row) << row.status();
  EXPECT_EQ(q.Int(0), -(int64_t{1} << 62));
  EXPECT_DOUBLE_EQ(q.Double(1), 2.5);
  EXPECT_EQ(q.Text(2), "h\xc3\xa9llo");
  EXPECT_EQ(q.Blob(3), blob);
  for (int col = 0; col < 4; ++col) EXPECT_FALSE(q.IsNull(col)) << col;
  row = q.Step();
  ASSERT_OK(row);
  EXPECT_FALSE(*row) << "one row per key";

  q.Reset();
  q.Bind(1, int64_t{2});
  row = q.Step();
  ASSERT_TRUE(row.ok() && *row) << row.status();
  for (int col = 0; col < 4; ++col) EXPECT_TRUE(q.IsNull(col)) << col;
  EXPECT_EQ(q.Text(2), "") << "NULL text reads as empty";
  EXPECT_EQ(q.Blob(3), "") << "NULL blob reads as empty";
}

TEST_F(SqliteTest, ResetKeepsTheBindings) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Exec("INSERT INTO t(k, i) VALUES (7, 70)"));
  auto sel = Statement::Prepare(*c, "SELECT i FROM t WHERE k = ?");
  ASSERT_OK(sel);
  (*sel)->Bind(1, int64_t{7});
  for (int pass = 0; pass < 2; ++pass) {
    absl::StatusOr<bool> row = (*sel)->Step();
    ASSERT_TRUE(row.ok() && *row) << "pass " << pass;
    EXPECT_EQ((*sel)->Int(0), 70);
    (*sel)->Reset();
  }
}

TEST_F(SqliteTest, TransactionsCommitAndRollBack) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  ASSERT_OK(c->Exec("BEGIN"));
  ASSERT_OK(c->Exec("INSERT INTO t(i) VALUES (1)"));
  ASSERT_OK(c->Exec("COMMIT"));
  EXPECT_EQ(Count(*c), 1);

  ASSERT_OK(c->Exec("BEGIN"));
  auto ins = Statement::Prepare(*c, "INSERT INTO t(i) VALUES (?)");
  ASSERT_OK(ins);
  for (int64_t i = 0; i < 5; ++i) ASSERT_OK((*ins)->Bind(1, i).Run());
  EXPECT_EQ(Count(*c), 6) << "the transaction sees its own rows";
  ASSERT_OK(c->Exec("ROLLBACK"));
  EXPECT_EQ(Count(*c), 1);

  // Another connection sees committed rows only.
  auto other = Connection::Open(db_.path(), false);
  ASSERT_OK(other);
  EXPECT_EQ(Count(**other), 1);
}

TEST_F(SqliteTest, AConstraintViolationIsFailedPrecondition) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  auto ins = Statement::Prepare(*c, "INSERT INTO t(k) VALUES (?)");
  ASSERT_OK(ins);
  ASSERT_OK((*ins)->Bind(1, int64_t{1}).Run());
  absl::Status s = (*ins)->Bind(1, int64_t{1}).Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("UNIQUE"), std::string::npos) << s;
  EXPECT_NE(s.message().find(db_.path()), std::string::npos) << s;
  // The statement is usable after the failure (Run rewound it).
  EXPECT_OK((*ins)->Bind(1, int64_t{2}).Run());
  EXPECT_EQ(Count(*c), 2);
}

TEST_F(SqliteTest, ForeignKeysAreEnforced) {
  auto c = Connection::Open(db_.path(), true);
  ASSERT_OK(c);
  ASSERT_OK(
      (*c)->Exec("CREATE TABLE p(id INTEGER PRIMARY KEY); "
                 "CREATE TABLE ch(p INTEGER REFERENCES p(id))"));
  absl::Status s = (*c)->Exec("INSERT INTO ch VALUES (42)");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

TEST_F(SqliteTest, ALockedDatabaseIsUnavailable) {
  auto a = CreateWithTable();
  ASSERT_NE(a, nullptr);
  auto b = Connection::Open(db_.path(), false);
  ASSERT_OK(b);
  // Fail at once rather than after the wrapper's five-second busy wait.
  sqlite3_busy_timeout((*b)->get(), 0);
  ASSERT_OK(a->Exec("BEGIN IMMEDIATE"));
  absl::Status s = (*b)->Exec("BEGIN IMMEDIATE");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  ASSERT_OK(a->Exec("COMMIT"));
  EXPECT_OK((*b)->Exec("BEGIN IMMEDIATE; COMMIT")) << "free once the writer commits";
}

TEST_F(SqliteTest, BadSqlNamesTheStatementAndTheDatabase) {
  auto c = CreateWithTable();
  ASSERT_NE(c, nullptr);
  auto st = Statement::Prepare(*c, "SELECT no_such_column FROM t");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), absl::StatusCode::kInternal) << st.status();
  const std::string msg(st.status().message());
  EXPECT_NE(msg.find("SELECT no_such_column FROM t"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no such column"), std::string::npos) << msg;
  EXPECT_NE(msg.find(db_.path()), std::string::npos) << msg;

  // A long statement is quoted by its start only, on one line.
  std::string long_sql = "SELECT\n  nope";
  for (int i = 0; i < 40; ++i) long_sql += ", nope";
  st = Statement::Prepare(*c, long_sql + " FROM t");
  ASSERT_FALSE(st.ok());
  const std::string long_msg(st.status().message());
  EXPECT_NE(long_msg.find("\"SELECT   nope, nope"), std::string::npos) << long_msg;
  EXPECT_NE(long_msg.find("...\""), std::string::npos) << long_msg;
  EXPECT_EQ(long_msg.find(" FROM t"), std::string::npos) << long_msg;

  absl::Status s = c->Exec("THIS IS NOT SQL");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("syntax error"), std::string::npos) << s;
}

TEST_F(SqliteTest, NotADatabaseIsDataLoss) {
  {
    std::FILE* f = std::fopen(db_.path().c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::string junk(4096, 'x');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  absl::Status s;
  auto c = Connection::Open(db_.path(), false);
  if (c.ok()) {
    s = (*c)->Exec("SELECT count(*) FROM sqlite_schema");  // SQLite reads the header lazily
  } else {
    s = c.status();
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
}

TEST(SqliteStatusTest, EveryResultCodeMapsAsDocumented) {
  struct Case {
    int rc;
    absl::StatusCode code;
  };
  const Case cases[] = {
      {SQLITE_OK, absl::StatusCode::kOk},
      {SQLITE_ROW, absl::StatusCode::kOk},
      {SQLITE_DONE, absl::StatusCode::kOk},
      {SQLITE_FULL, absl::StatusCode::kResourceExhausted},
      {SQLITE_BUSY, absl::StatusCode::kUnavailable},
      {SQLITE_LOCKED, absl::StatusCode::kUnavailable},
      {SQLITE_CORRUPT, absl::StatusCode::kDataLoss},
      {SQLITE_NOTADB, absl::StatusCode::kDataLoss},
      {SQLITE_CONSTRAINT, absl::StatusCode::kFailedPrecondition},
      // Extended codes map by their primary code.
      {SQLITE_CONSTRAINT_UNIQUE, absl::StatusCode::kFailedPrecondition},
      {SQLITE_BUSY_SNAPSHOT, absl::StatusCode::kUnavailable},
      {SQLITE_CANTOPEN, absl::StatusCode::kNotFound},
      {SQLITE_READONLY, absl::StatusCode::kFailedPrecondition},
      {SQLITE_IOERR, absl::StatusCode::kInternal},
      {SQLITE_MISUSE, absl::StatusCode::kInternal},
  };
  for (const Case& c : cases) {
    absl::Status s = SqliteStatus(nullptr, c.rc, "the context");
    EXPECT_EQ(s.code(), c.code) << "rc " << c.rc << ": " << s;
    if (!s.ok()) {
      EXPECT_EQ(s.message().rfind("the context: ", 0), 0u) << s;
      EXPECT_NE(s.message().find(sqlite3_errstr(c.rc)), std::string::npos) << s;
    }
  }
}

}  // namespace
}  // namespace podprof::storage
