// Child processes: the one way podprof (the demo, tests, benchmarks) starts another program.
//
// A Subprocess owns one child started with fork and execve. By default the child dies with
// its parent (PR_SET_PDEATHSIG), so a parent killed early (SIGKILL, a closed pipe) leaves no
// daemons running, and the destructor stops and reaps it. A failure to start (no such
// binary, a log file that cannot be opened, a working directory that does not exist) comes
// back from Start as an error naming the binary and the OS error, never as a child that
// exits 127.
//
// The death signal fires when the *thread* that called Start exits, not the process (see
// prctl(2)): start children from the main thread or another thread that lives as long as
// they should.

#ifndef PODPROF_COMMON_SUBPROCESS_H_
#define PODPROF_COMMON_SUBPROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"

namespace podprof {

// How a child's process group and session relate to its parent's.
enum class ProcessGroup {
  // Stays in the parent's group: a terminal's Ctrl-C reaches both.
  kInherit,
  // Leads a group of its own: a terminal's Ctrl-C reaches only the parent, which can then
  // stop its children in order.
  kOwn,
  // Leads a new session, detached from the terminal: for children meant to outlive the
  // parent (set death_signal to 0 too).
  kNewSession,
};

struct SubprocessOptions {
  // argv[0] is the path of the binary, used as given (no PATH search). Must not be empty.
  std::vector<std::string> argv;
  // "NAME=value" entries added to this process's environment for the child; an entry
  // replaces a variable of the same name.
  std::vector<std::string> env;
  // Files the child's stdout and stderr go to, created or truncated; empty = inherited
  // from this process. "/dev/null" discards. The same path for both opens the file once,
  // so the two streams interleave as written.
  std::string stdout_path;
  std::string stderr_path;
  // The child's working directory; empty = this process's.
  std::string working_dir;
  // Sent to the child when the thread that started it exits; 0 = none (the child may
  // outlive its parent). SIGTERM lets a daemon drain; SIGKILL is sure.
  int death_signal = SIGKILL;
  ProcessGroup group = ProcessGroup::kInherit;
  // >= 0 pins the child to that CPU core.
  int cpu = -1;
  // > 0 runs the child at that nice value (processes that stand for other machines); it may
  // not be below this process's own without privilege.
  int nice = 0;
  // How long the destructor waits after SIGTERM before SIGKILL.
  absl::Duration stop_timeout = absl::Seconds(10);
  // Paces the waits of Terminate; null = a process-wide RealClock. Borrowed: must outlive
  // the Subprocess.
  Clock* clock = nullptr;
};

// How a child ended, from its wait status.
class ExitStatus {
 public:
  // `wait_status` as waitpid(2) reports it; -1 when unknown (the child was reaped by
  // someone else).
  explicit ExitStatus(int wait_status) : wait_status_(wait_status) {}

  int wait_status() const { return wait_status_; }
  // Whether the child called exit; code() is its exit code.
  bool exited() const;
  // The exit code, or -1 when the child did not exit normally.
  int code() const;
  // The signal that ended the child, or 0.
  int signal() const;
  // Exited with code 0.
  bool success() const { return exited() && code() == 0; }
  // "exit 3", "killed by signal 9 (Killed)", "unknown".
  std::string ToString() const;

 private:
  int wait_status_;
};

// One child process. Movable, not copyable. Thread-compatible: calls on one Subprocess must
// not overlap (guard it with a mutex to share it between threads).
class Subprocess {
 public:
  // Starts `options.argv`. Between fork and exec the child only makes async-signal-safe
  // calls, so Start may be called from a multi-threaded process. The child starts with all
  // signals unblocked and at their default dispositions. Errors: InvalidArgument (empty
  // argv); from the OS (ErrnoToStatus codes: NotFound for a missing binary or directory,
  // PermissionDenied, ...) naming the binary and what failed, e.g.
  //   start /no/such/binary: exec: No such file or directory (errno 2)
  static absl::StatusOr<Subprocess> Start(const SubprocessOptions& options);

  Subprocess(Subprocess&& other) noexcept;
  // Stops this object's child (as the destructor does) before taking `other`'s.
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // A child still running is stopped as Terminate(options.stop_timeout) does.
  ~Subprocess();

  // The child's pid; -1 once it has been released (a reaped child keeps its pid here, and
  // the pid may since have been reused).
  pid_t pid() const { return pid_; }

  // Sends `sig` to the child. FailedPrecondition once it has been reaped or released; an
  // exited child not yet reaped takes the signal without effect.
  absl::Status Signal(int sig);

  // How the child ended if it has (reaping it), or nullopt while it runs. Never blocks.
  // Also nullopt after Release.
  std::optional<ExitStatus> TryWait();

  // Blocks until the child ends and returns how. ExitStatus(-1) after Release.
  ExitStatus Wait();

  // SIGTERM, then up to `timeout` for the child to exit, then SIGKILL; reaps it and returns
  // how it ended. A child that has already ended is only reaped.
  ExitStatus Terminate(absl::Duration timeout);

  // Gives up ownership: the child keeps running, the destructor leaves it alone and nobody
  // here reaps it. Returns its pid.
  pid_t Release();

  // Terminate for many children at once: SIGTERM to each, the last in `children` first
  // (later children usually depend on earlier ones, as agents on their aggregator), then
  // one shared `timeout` for all before SIGKILL to the rest. Reaps them all.
  static void TerminateAll(absl::Span<Subprocess> children, absl::Duration timeout);

 private:
  Subprocess(pid_t pid, Clock* clock, absl::Duration stop_timeout)
      : pid_(pid), clock_(clock), stop_timeout_(stop_timeout) {}

  // Kills with SIGKILL and reaps, if still running.
  ExitStatus Kill();
  bool running() const { return pid_ > 0 && !exit_.has_value(); }

  pid_t pid_ = -1;
  std::optional<ExitStatus> exit_;
  Clock* clock_;
  absl::Duration stop_timeout_;
};

}  // namespace podprof

#endif  // PODPROF_COMMON_SUBPROCESS_H_
