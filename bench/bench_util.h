// Helpers shared by the benchmarks that run podprof's daemons as real processes.
#ifndef PODPROF_BENCH_BENCH_UTIL_H_
#define PODPROF_BENCH_BENCH_UTIL_H_

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// In a forked child: becomes `args` (args[0] is the binary), or exits 127.
[[noreturn]] inline void Exec(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  _exit(127);
}

// Starts `args` (args[0] is the binary) as a child process; `cpu` >= 0 pins it to that core;
// `nice` > 0 lowers its priority (processes that stand for other machines).
inline pid_t Spawn(std::vector<std::string> args, int cpu = -1, int nice = 0) {
  pid_t pid = fork();
  if (pid == 0) {
    if (cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    if (nice > 0) setpriority(PRIO_PROCESS, 0, nice);
    Exec(args);
  }
  return pid;
}

// Starts `args` as a child process that the kernel kills when this process dies (a benchmark
// that crashes or is killed leaves no daemons behind).
inline pid_t SpawnOwned(std::vector<std::string> args) {
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the parent died before prctl
    Exec(args);
  }
  return pid;
}

// SIGTERM, then up to `grace_ms` for the child to exit, then SIGKILL; reaps it.
inline void StopChild(pid_t pid, int grace_ms = 10'000) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  for (int waited = 0; waited < grace_ms; waited += 20) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// utime + stime of `pid`, in clock ticks (sysconf(_SC_CLK_TCK) per second).
inline long CpuTicks(pid_t pid) {
  std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
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

// A "Field:   N kB" line of /proc/<pid>/status (e.g. "VmRSS:"), in kB; 0 if absent.
inline long StatusKb(pid_t pid, const char* field) {
  std::istringstream in(Slurp("/proc/" + std::to_string(pid) + "/status"));
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
