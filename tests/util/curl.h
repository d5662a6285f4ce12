// curl for the tests of the daemons' HTTP (Debian's curl, as a user would fetch the pages).
#ifndef PODPROF_TESTS_UTIL_CURL_H_
#define PODPROF_TESTS_UTIL_CURL_H_

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/files.h"

namespace podprof::testing {

struct CurlResult {
  int status = -1;  // the HTTP status; -1 when curl got none (refused, TLS failed)
  std::string body;
};

// Runs `curl -s ARGS` (quoted by the caller) and returns the status and the body, kept in
// `out` (a file of the test's; by default one named after the test).
inline CurlResult Curl(const std::string& args, std::string out = "") {
  if (out.empty()) {
    out = absl::StrCat(::testing::TempDir(), "/curl_",
                       ::testing::UnitTest::GetInstance()->current_test_info()->name(), "_",
                       getpid());
  }
  const std::string cmd =
      absl::StrCat("curl -s -o ", out, " -w '%{http_code}' ", args, " > ", out, ".code");
  CurlResult r;
  if (std::system(cmd.c_str()) == 0) {
    r.status = std::stoi(ReadTestFile(out + ".code"));
    r.body = ReadTestFile(out);
  }
  return r;
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_CURL_H_
