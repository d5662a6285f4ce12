// A real child process for integration tests: a Subprocess (common/subprocess.h, so it dies
// with the test) waited for through a "ready file" it writes once listening, stopped with
// SIGTERM. Create it from the test's main thread: the child's death signal fires when the
// thread that started it exits.
#ifndef PODPROF_TESTS_UTIL_CHILD_PROCESS_H_
#define PODPROF_TESTS_UTIL_CHILD_PROCESS_H_

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/util/files.h"

namespace podprof::testing {

class ChildProcess {
 public:
  // Runs `argv` (argv[0] is the binary's path) with `env` added ("KEY=value") and waits up to
  // 20 s for `ready_file` to appear (skipped when empty). Its stderr goes to `stderr_path` when
  // given (for tests that read the log), else to the test's. A child that cannot be started is
  // a test failure naming the binary and why.
  ChildProcess(std::vector<std::string> argv, const std::string& ready_file,
               std::vector<std::string> env = {}, const std::string& stderr_path = "") {
    SubprocessOptions options;
    options.argv = std::move(argv);
    options.env = std::move(env);
    options.stderr_path = stderr_path;
    absl::StatusOr<Subprocess> started = Subprocess::Start(options);
    if (!started.ok()) {
      ADD_FAILURE() << started.status();
      return;
    }
    process_.emplace(*std::move(started));
    if (ready_file.empty()) return;
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (!std::filesystem::exists(ready_file) && absl::Now() < give_up) {
      if (process_->TryWait().has_value()) return;  // exited before it was ready
      absl::SleepFor(absl::Milliseconds(20));
    }
    if (std::filesystem::exists(ready_file)) {
      ready_ = nlohmann::json::parse(ReadTestFile(ready_file), nullptr, false);
      if (ready_.is_discarded()) ready_ = nullptr;
    }
  }

  bool ready() const { return !ready_.is_null(); }
  const nlohmann::json& info() const { return ready_; }
  // The child's pid; -1 when it could not be started.
  pid_t pid() const { return process_ ? process_->pid() : -1; }
  void Signal(int sig) {
    if (process_) process_->Signal(sig).IgnoreError();  // a reaped child takes no signals
  }
  // SIGTERM (SIGKILL after 10 s), then waits; returns the wait status (or the earlier one;
  // -1 when the child could not be started).
  int Stop() { return process_ ? process_->Terminate(absl::Seconds(10)).wait_status() : -1; }
  // Waits for the child to exit; returns its wait status as Stop does.
  int Wait() { return process_ ? process_->Wait().wait_status() : -1; }

 private:
  std::optional<Subprocess> process_;
  nlohmann::json ready_;
};

// A plaintext podprof-aggregator (`binary`) on loopback with its configuration, database and
// ready file in `dir` (agg.toml, which the caller writes first; pod.db; agg.json); `listen`
// defaults to a free port.
inline std::unique_ptr<ChildProcess> StartAggregator(const std::string& binary,
                                                     const std::filesystem::path& dir,
                                                     const std::string& listen = "127.0.0.1:0") {
  auto in = [&](const char* f) { return (dir / f).string(); };
  return std::make_unique<ChildProcess>(
      std::vector<std::string>{binary, "--insecure", "--config=" + in("agg.toml"),
                               "--listen=" + listen, "--http-listen=127.0.0.1:0",
                               "--db=" + in("pod.db"), "--ready-file=" + in("agg.json")},
      in("agg.json"));
}

#ifdef PODPROF_BIN_DIR
// The build's podprof-aggregator, plaintext on a free loopback port, with an empty
// configuration and its files in `dir` (made if missing).
inline std::unique_ptr<ChildProcess> StartBuiltAggregator(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "agg.toml") << "";
  return StartAggregator(std::string(PODPROF_BIN_DIR) + "/podprof-aggregator", dir);
}
#endif

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_CHILD_PROCESS_H_
