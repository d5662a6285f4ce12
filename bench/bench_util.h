// Helpers shared by the benchmarks that run podprof's daemons as real processes.
#ifndef PODPROF_BENCH_BENCH_UTIL_H_
#define PODPROF_BENCH_BENCH_UTIL_H_

#include <sys/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/file_util.h"
#include "common/subprocess.h"

namespace podprof::bench {

// A benchmark's `--name value` flags, each read by its setter. Returns -1 to go on, or the exit
// code to stop with: 0 after printing `usage` for --help or -h, 2 after naming an unknown flag
// or one without its value (a mistyped flag must not start a long run with the defaults).
using FlagSetters = std::map<std::string, std::function<void(const char* value)>>;
inline int ParseFlags(int argc, char** argv, const char* usage, const FlagSetters& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(usage, stdout);
      return 0;
    }
    auto it = flags.find(a);
    if (it == flags.end() || i + 1 >= argc) {
      std::fprintf(
          stderr, "%s: %s\n%s", argv[0],
          it == flags.end() ? ("unknown flag " + a).c_str() : (a + " needs a value").c_str(),
          usage);
      return 2;
    }
    it->second(argv[++i]);
  }
  return -1;
}

// Starts `args` (args[0] is the binary) as a child process that dies with this one, so a
// benchmark that crashes or is killed (a closed pipe included) leaves no daemons behind; the
// returned object stops it when destroyed. `cpu` >= 0 pins it to that core; `nice` > 0 lowers
// its priority (processes that stand for other machines). Call it from the main thread (see
// common/subprocess.h). A child that cannot be started ends the benchmark with a message
// naming it and why.
inline Subprocess StartChild(std::vector<std::string> args, int cpu = -1, int nice = 0) {
  SubprocessOptions options;
  options.argv = std::move(args);
  options.cpu = cpu;
  options.nice = nice;
  absl::StatusOr<Subprocess> child = Subprocess::Start(options);
  if (!child.ok()) {
    std::fprintf(stderr, "%s\n", child.status().ToString().c_str());
    std::exit(2);
  }
  return *std::move(child);
}

// utime + stime of `pid`, in clock ticks (sysconf(_SC_CLK_TCK) per second).
inline long CpuTicks(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat").value_or("");
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream in(stat.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::atol(field.c_str());
    if (i == 15) stime = std::atol(field.c_str());
  }
  return utime + stime;
}

// CPU time of `pid`'s threads named `name` (their comm), ns, from the scheduler's own count
// (/proc/<pid>/task/<tid>/schedstat): finer than ticks, and a thread's share of its process.
inline int64_t ThreadCpuNs(pid_t pid, const std::string& name) {
  int64_t ns = 0;
  std::error_code ec;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
    std::string comm = ReadFile(t.path().string() + "/comm").value_or("");
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm != name) continue;
    ns += std::atoll(ReadFile(t.path().string() + "/schedstat").value_or("0").c_str());
  }
  return ns;
}

// A "Field:   N kB" line of /proc/<pid>/status (e.g. "VmRSS:"), in kB; 0 if absent.
inline long StatusKb(pid_t pid, const char* field) {
  std::istringstream in(ReadFile("/proc/" + std::to_string(pid) + "/status").value_or(""));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field));
  }
  return 0;
}

// The q-quantile (0..1) of `v` by rank; 0 for no values.
inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

// Waits up to 20 s for a daemon's ready file.
inline bool WaitForFile(const std::string& path) {
  for (int i = 0; i < 1000 && !std::filesystem::exists(path); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::filesystem::exists(path);
}

}  // namespace podprof::bench

#endif  // PODPROF_BENCH_BENCH_UTIL_H_
