// File reads for tests: common/file_util.h's ReadFile, with a failure reported to the test.
#ifndef PODPROF_TESTS_UTIL_FILES_H_
#define PODPROF_TESTS_UTIL_FILES_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "common/file_util.h"
#include "gtest/gtest.h"

namespace podprof::testing {

// The bytes of `path`; a test failure naming the path and the OS error (and "") when it
// cannot be read. For files that may rightly be missing, call ReadFile itself.
inline std::string ReadTestFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) {
    ADD_FAILURE() << bytes.status();
    return "";
  }
  return *std::move(bytes);
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_FILES_H_
