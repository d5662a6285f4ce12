// A database file of a test's own: named after the test and the process, and removed with the
// files SQLite keeps beside it (-wal, -shm, -journal) and the store's segment folder when made and
// when destroyed, so that a test never reads an earlier run's rows, tests run in parallel apart,
// and nothing is left.
#ifndef PODPROF_TESTS_UTIL_TEMP_DATABASE_H_
#define PODPROF_TESTS_UTIL_TEMP_DATABASE_H_

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace podprof::testing {

class TempDatabase {
 public:
  // <TempDir>/<prefix>_<test name>_<pid>.db; made inside a test (its name is the test's).
  explicit TempDatabase(const std::string& prefix)
      : path_(::testing::TempDir() + "/" + prefix + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
              std::to_string(getpid()) + ".db") {
    Remove();
  }
  ~TempDatabase() { Remove(); }
  TempDatabase(const TempDatabase&) = delete;
  TempDatabase& operator=(const TempDatabase&) = delete;

  const std::string& path() const { return path_; }
  void Remove() const {
    std::error_code ignored;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      std::filesystem::remove(path_ + suffix, ignored);
    }
    // The store's segment files (storage/segments.h).
    std::filesystem::remove_all(path_ + ".segments", ignored);
  }

 private:
  const std::string path_;
};

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_TEMP_DATABASE_H_
