// The database under the store: the writer thread running tasks in order, the reader pool and
// its leases (a connection given back exactly once, when its lease ends), health checks.
#include "storage/database.h"

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "storage/health.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"

namespace podprof::storage {
namespace {

namespace fs = std::filesystem;

class DatabaseTest : public ::testing::Test {
 protected:
  podprof::testing::TempDatabase db_{"database"};
};

TEST_F(DatabaseTest, OpensMigratedAndWritable) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(db_.path(), {}));
  EXPECT_EQ(db->path(), db_.path());
  EXPECT_FALSE(db->read_only());
  EXPECT_EQ(db->read_only_reason(), "");
  ASSERT_OK_AND_ASSIGN(ReaderLease c, db->Reader());
  EXPECT_OK(c->Exec("SELECT count(*) FROM captures"));
}

TEST_F(DatabaseTest, EveryWriterTaskRunsAndReadersSeeIt) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(db_.path(), {}));
  ASSERT_OK(db->OnWriter([](Connection& c) { return c.Exec("CREATE TABLE t(i INTEGER)"); }));
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&db, i] {
      EXPECT_OK(db->OnWriter(
          [i](Connection& c) { return c.Exec(absl::StrCat("INSERT INTO t VALUES (", i, ")")); }));
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_OK_AND_ASSIGN(ReaderLease c, db->Reader());
  ASSERT_OK_AND_ASSIGN(auto st, Statement::Prepare(*c, "SELECT count(*) FROM t"));
  ASSERT_OK_AND_ASSIGN(bool row, st->Step());
  ASSERT_TRUE(row);
  EXPECT_EQ(st->Int(0), 4);
  // A task's error is the caller's.
  EXPECT_THAT(db->OnWriter([](Connection& c) { return c.Exec("INSERT INTO nowhere VALUES (1)"); }),
              podprof::testing::StatusIs(absl::StatusCode::kInternal));
}

TEST_F(DatabaseTest, AReaderIsGivenBackWhenItsLeaseEnds) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(db_.path(), {}));
  Connection* first = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(ReaderLease a, db->Reader());
    first = &*a;
    // Held: a second reader is another connection.
    ASSERT_OK_AND_ASSIGN(ReaderLease b, db->Reader());
    EXPECT_NE(&*b, first);
  }
  ASSERT_OK_AND_ASSIGN(ReaderLease again, db->Reader());
  // The last given back is lent first.
  EXPECT_EQ(&*again, first);
}

TEST_F(DatabaseTest, AMovedLeaseGivesItsConnectionBackOnce) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(db_.path(), {}));
  Connection* held = nullptr;
  {
    ASSERT_OK_AND_ASSIGN(ReaderLease a, db->Reader());
    held = &*a;
    ReaderLease b = std::move(a);
    EXPECT_EQ(&*b, held);
  }  // `a`, moved from, gives nothing back; `b` gives `held` back.
  ASSERT_OK_AND_ASSIGN(ReaderLease x, db->Reader());
  EXPECT_EQ(&*x, held) << "the pool's one idle connection";
  ASSERT_OK_AND_ASSIGN(ReaderLease y, db->Reader());
  EXPECT_NE(&*y, held) << "given back once only, so the pool had no second copy of it";
  Connection* from_y = &*y;
  // Assigning over a lease gives its own connection back first.
  x = std::move(y);
  EXPECT_EQ(&*x, from_y);
  ASSERT_OK_AND_ASSIGN(ReaderLease z, db->Reader());
  EXPECT_EQ(&*z, held);
}

TEST_F(DatabaseTest, HealthOfAWritableDatabase) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Database> db, Database::Open(db_.path(), {}));
  EXPECT_OK(CheckWriter(*db, 1'000'000'000));
  EXPECT_OK(CheckIntegrity(*db));
  ASSERT_OK_AND_ASSIGN(int64_t used, UsedBytes(*db));
  EXPECT_GT(used, 0);
}

}  // namespace
}  // namespace podprof::storage
