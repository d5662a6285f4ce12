// Runs the real `podprof` binary as a child process, for the tests of its subcommands and the
// integration tests that check what the CLI prints.
#ifndef PODPROF_TESTS_UTIL_RUN_PODPROF_H_
#define PODPROF_TESTS_UTIL_RUN_PODPROF_H_

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/util/files.h"

namespace podprof::testing {

struct PodprofResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs build/bin/podprof with `args` (shell-quoted by the caller) and captures its output;
// `env` (e.g. "NAME=value") is put before the command.
inline PodprofResult RunPodprof(const std::string& args, const std::string& env = "") {
  // ctest runs tests in parallel and a test may run the CLI from several threads: each call
  // gets its own output files.
  static std::atomic<int> calls{0};
  std::string stem = ::testing::TempDir() + "/podprof_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                     std::to_string(::getpid()) + "_" + std::to_string(calls++);
  std::string out_path = stem + ".out", err_path = stem + ".err";
  std::string cmd = (env.empty() ? "" : env + " ") + std::string(PODPROF_BIN_DIR) + "/podprof " +
                    args + " >" + out_path + " 2>" + err_path;
  int status = std::system(cmd.c_str());
  PodprofResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadTestFile(out_path);
  r.err = ReadTestFile(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  return r;
}

// The non-empty lines of `s`.
inline std::vector<std::string> Lines(const std::string& s) {
  return absl::StrSplit(s, '\n', absl::SkipEmpty());
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_RUN_PODPROF_H_
