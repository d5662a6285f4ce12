// A real child process for integration tests: started with fork/exec, optionally with extra
// environment, waited for through a "ready file" it writes once listening, stopped with SIGTERM.
#ifndef PODPROF_TESTS_UTIL_CHILD_PROCESS_H_
#define PODPROF_TESTS_UTIL_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"

namespace podprof::testing {

inline std::string SlurpFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ChildProcess {
 public:
  // Runs `argv` (argv[0] is the binary's path) with `env` added ("KEY=value") and waits up to
  // 20 s for `ready_file` to appear (skipped when empty).
  ChildProcess(std::vector<std::string> argv, const std::string& ready_file,
               std::vector<std::string> env = {}) {
    pid_ = fork();
    if (pid_ == 0) {
      for (std::string& e : env) putenv(e.data());
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    if (ready_file.empty()) return;
    for (int i = 0; i < 1000 && !std::filesystem::exists(ready_file); ++i) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_status_ = status;
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (std::filesystem::exists(ready_file)) ready_ = nlohmann::json::parse(SlurpFile(ready_file));
  }
  ~ChildProcess() { Stop(); }

  bool ready() const { return !ready_.is_null(); }
  const nlohmann::json& info() const { return ready_; }
  pid_t pid() const { return pid_; }
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  // SIGTERM, then waits; returns the wait status (or the earlier one).
  int Stop() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      return Wait();
    }
    return exit_status_;
  }
  int Wait() {
    if (pid_ > 0) {
      waitpid(pid_, &exit_status_, 0);
      pid_ = -1;
    }
    return exit_status_;
  }

 private:
  pid_t pid_ = -1;
  int exit_status_ = -1;
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
                               "--listen=" + listen, "--db=" + in("pod.db"),
                               "--ready-file=" + in("agg.json")},
      in("agg.json"));
}

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_UTIL_CHILD_PROCESS_H_
