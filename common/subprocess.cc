#include "common/subprocess.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/errno_status.h"

extern char** environ;

namespace podprof {
namespace {

// The step of the child's set-up that failed, as it reports it on the error pipe.
enum class Stage : int { kDeathSignal, kGroup, kCpu, kNice, kRedirect, kChdir, kExec };

// What the child writes on the error pipe when it cannot become the program; the pipe closes
// on exec, so reading nothing means the exec succeeded.
struct ChildFailure {
  Stage stage;
  int err;
};

// Everything the child needs, prepared before fork: after fork the child may only make
// async-signal-safe calls, which rules out allocating.
struct ChildPlan {
  std::vector<char*> argv;
  std::vector<char*> envp;
  pid_t parent = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int report_fd = -1;
  const SubprocessOptions* options = nullptr;
};

// A file descriptor closed on destruction.
class ScopedFd {
 public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { Reset(); }
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

Clock& DefaultClock() {
  static RealClock* const clock = new RealClock();
  return *clock;
}

std::string StageText(Stage stage, const SubprocessOptions& options) {
  switch (stage) {
    case Stage::kDeathSignal:
      return "set the death signal";
    case Stage::kGroup:
      return options.group == ProcessGroup::kNewSession ? "setsid" : "setpgid";
    case Stage::kCpu:
      return absl::StrCat("pin to CPU ", options.cpu);
    case Stage::kNice:
      return absl::StrCat("set nice ", options.nice);
    case Stage::kRedirect:
      return "redirect output";
    case Stage::kChdir:
      return absl::StrCat("chdir ", options.working_dir);
    case Stage::kExec:
      return "exec";
  }
  return "set up";
}

// This process's environment with `extra` ("NAME=value") added, replacing same-named entries.
absl::StatusOr<std::vector<std::string>> MergedEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  for (const std::string& entry : extra) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment entry \"", entry, "\" is not NAME=value"));
    }
    const absl::string_view name_eq(entry.data(), eq + 1);
    auto same = std::find_if(env.begin(), env.end(), [&](const std::string& e) {
      return absl::string_view(e).substr(0, name_eq.size()) == name_eq;
    });
    if (same != env.end()) {
      *same = entry;
    } else {
      env.push_back(entry);
    }
  }
  return env;
}

// Null-terminated pointers into `strings`, which must outlive them.
std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Makes `fd` the child's descriptor `target`, kept across exec.
bool Redirect(int fd, int target) {
  if (fd < 0) return true;
  // dup2 onto itself would keep O_CLOEXEC.
  if (fd == target) return fcntl(fd, F_SETFD, 0) == 0;
  return dup2(fd, target) == target;
}

// The child between fork and exec: only async-signal-safe calls from here on.
[[noreturn]] void RunChild(const ChildPlan& plan) {
  const SubprocessOptions& o = *plan.options;
  auto fail = [&](Stage stage) {
    const ChildFailure failure{stage, errno};
    // Nothing more can be done if the parent does not hear it: the exit code says the rest.
    [[maybe_unused]] ssize_t n = write(plan.report_fd, &failure, sizeof(failure));
    _exit(127);
  };
  if (o.death_signal != 0) {
    if (prctl(PR_SET_PDEATHSIG, o.death_signal) != 0) fail(Stage::kDeathSignal);
    // The parent died between fork and prctl: the signal will never come.
    if (getppid() != plan.parent) _exit(127);
  }
  if (o.group == ProcessGroup::kOwn && setpgid(0, 0) != 0) fail(Stage::kGroup);
  if (o.group == ProcessGroup::kNewSession && setsid() < 0) fail(Stage::kGroup);
  if (o.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(o.cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) fail(Stage::kCpu);
  }
  if (o.nice > 0 && setpriority(PRIO_PROCESS, 0, o.nice) != 0) fail(Stage::kNice);
  if (!Redirect(plan.stdout_fd, STDOUT_FILENO) || !Redirect(plan.stderr_fd, STDERR_FILENO)) {
    fail(Stage::kRedirect);
  }
  if (!o.working_dir.empty() && chdir(o.working_dir.c_str()) != 0) fail(Stage::kChdir);
  // Handlers are reset by exec, but ignored signals and the mask would be inherited; the
  // parent blocked everything around fork (and may block signals for a thread of its own).
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);  // some are reserved
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(plan.argv[0], plan.argv.data(), plan.envp.data());
  fail(Stage::kExec);
  _exit(127);  // not reached: fail does not return
}

// Opens `path` for the child's output; an invalid fd for an empty path.
absl::StatusOr<int> OpenOutput(const std::string& path, const std::string& binary) {
  if (path.empty()) return -1;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("start ", binary, ": open ", path));
  return fd;
}

// Calls `done` with growing pauses (1 ms doubling to 10 ms) until it returns true or
// `timeout` has passed on `clock`. Returns whether `done` did.
bool PollUntil(Clock& clock, absl::Duration timeout, const std::function<bool()>& done) {
  const int64_t deadline = clock.MonotonicNs() + absl::ToInt64Nanoseconds(timeout);
  int64_t pause_ns = 1'000'000;
  while (!done()) {
    if (clock.MonotonicNs() >= deadline) return false;
    clock.SleepUntilNs(clock.NowNs() + pause_ns, nullptr);
    pause_ns = std::min<int64_t>(pause_ns * 2, 10'000'000);
  }
  return true;
}

// waitpid, retried when a signal interrupts it.
pid_t WaitPid(pid_t pid, int* status, int flags) {
  pid_t r;
  do {
    r = waitpid(pid, status, flags);
  } while (r < 0 && errno == EINTR);
  return r;
}

}  // namespace

bool ExitStatus::exited() const { return wait_status_ >= 0 && WIFEXITED(wait_status_); }

int ExitStatus::code() const { return exited() ? WEXITSTATUS(wait_status_) : -1; }

int ExitStatus::signal() const {
  return wait_status_ >= 0 && WIFSIGNALED(wait_status_) ? WTERMSIG(wait_status_) : 0;
}

std::string ExitStatus::ToString() const {
  if (exited()) return absl::StrCat("exit ", code());
  if (signal() != 0)
    return absl::StrCat("killed by signal ", signal(), " (", strsignal(signal()), ")");
  return "unknown";
}

absl::StatusOr<Subprocess> Subprocess::Start(const SubprocessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty()) {
    return absl::InvalidArgumentError("start: no program given");
  }
  const std::string& binary = options.argv[0];
  std::vector<std::string> args = options.argv;
  absl::StatusOr<std::vector<std::string>> env = MergedEnvironment(options.env);
  if (!env.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("start ", binary, ": ", env.status().message()));
  }
  ChildPlan plan;
  plan.argv = CStrings(args);
  plan.envp = CStrings(*env);
  plan.options = &options;

  absl::StatusOr<int> out_fd = OpenOutput(options.stdout_path, binary);
  if (!out_fd.ok()) return out_fd.status();
  ScopedFd out(*out_fd);
  const bool shared = options.stderr_path == options.stdout_path;
  absl::StatusOr<int> err_fd = shared ? -1 : OpenOutput(options.stderr_path, binary);
  if (!err_fd.ok()) return err_fd.status();
  ScopedFd err(*err_fd);
  plan.stdout_fd = out.get();
  plan.stderr_fd = shared ? out.get() : err.get();

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("start ", binary, ": pipe"));
  }
  ScopedFd report_read(pipe_fds[0]), report_write(pipe_fds[1]);
  plan.report_fd = report_write.get();
  plan.parent = getpid();

  // No signal handler of this process may run in the child before exec.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = fork();
  if (pid == 0) RunChild(plan);
  const int fork_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  report_write.Reset();
  if (pid < 0) return ErrnoToStatus(fork_errno, absl::StrCat("start ", binary, ": fork"));

  ChildFailure failure;
  ssize_t n;
  do {
    n = read(report_read.get(), &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(failure))) {
    WaitPid(pid, nullptr, 0);
    return ErrnoToStatus(failure.err,
                         absl::StrCat("start ", binary, ": ", StageText(failure.stage, options)));
  }
  Clock* clock = options.clock != nullptr ? options.clock : &DefaultClock();
  return Subprocess(pid, clock, options.stop_timeout);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      exit_(std::move(other.exit_)),
      clock_(other.clock_),
      stop_timeout_(other.stop_timeout_) {
  other.exit_.reset();
}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    if (running()) Terminate(stop_timeout_);
    pid_ = std::exchange(other.pid_, -1);
    exit_ = std::move(other.exit_);
    other.exit_.reset();
    clock_ = other.clock_;
    stop_timeout_ = other.stop_timeout_;
  }
  return *this;
}

Subprocess::~Subprocess() {
  if (running()) Terminate(stop_timeout_);
}

absl::Status Subprocess::Signal(int sig) {
  if (!running()) {
    return absl::FailedPreconditionError(
        absl::StrCat("signal ", sig, " to pid ", pid_, ": the process was already reaped"));
  }
  if (kill(pid_, sig) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("signal ", sig, " to pid ", pid_));
  }
  return absl::OkStatus();
}

std::optional<ExitStatus> Subprocess::TryWait() {
  if (pid_ <= 0 || exit_.has_value()) return exit_;
  int status = 0;
  const pid_t r = WaitPid(pid_, &status, WNOHANG);
  if (r == 0) return std::nullopt;
  // r < 0 (ECHILD): someone else reaped it, and how it ended is lost.
  exit_ = ExitStatus(r == pid_ ? status : -1);
  return exit_;
}

ExitStatus Subprocess::Wait() {
  if (pid_ <= 0) return ExitStatus(-1);
  if (!exit_.has_value()) {
    int status = 0;
    exit_ = ExitStatus(WaitPid(pid_, &status, 0) == pid_ ? status : -1);
  }
  return *exit_;
}

ExitStatus Subprocess::Kill() {
  if (running() && !TryWait().has_value()) kill(pid_, SIGKILL);
  return Wait();
}

ExitStatus Subprocess::Terminate(absl::Duration timeout) {
  if (!running() || TryWait().has_value()) return Wait();
  kill(pid_, SIGTERM);
  PollUntil(*clock_, timeout, [this] { return TryWait().has_value(); });
  return Kill();
}

pid_t Subprocess::Release() {
  const pid_t pid = pid_;
  pid_ = -1;
  exit_.reset();
  return pid;
}

void Subprocess::TerminateAll(absl::Span<Subprocess> children, absl::Duration timeout) {
  Clock* clock = nullptr;
  for (auto it = children.rbegin(); it != children.rend(); ++it) {
    if (it->running() && !it->TryWait().has_value()) {
      kill(it->pid_, SIGTERM);
      clock = it->clock_;
    }
  }
  if (clock == nullptr) return;  // nothing was running
  PollUntil(*clock, timeout, [&] {
    return std::all_of(children.begin(), children.end(),
                       [](Subprocess& c) { return !c.running() || c.TryWait().has_value(); });
  });
  for (Subprocess& c : children) c.Kill();
}

}  // namespace podprof
