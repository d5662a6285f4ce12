#include "common/daemon.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <iterator>
#include <limits>
#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_join.h"
#include "common/errno_status.h"
#include "common/logging.h"

namespace podprof {
namespace {

constexpr int kSignals[] = {SIGTERM, SIGINT, SIGHUP};
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// The longest single wall-clock sleep of the wait loop. Clock sleeps to a wall time, so after
// the system time is stepped back a sleep could last as long as the step; the loop re-checks
// the monotonic clock at least this often instead.
constexpr int64_t kMaxSliceNs = 1'000'000'000;

// Write end of the pipe the signal handler writes signal numbers to; -1 while no lifecycle
// handles signals. An atomic int is lock-free, so the handler may read it.
std::atomic<int> g_signal_fd{-1};

void OnSignal(int signal) {
  const int saved_errno = errno;
  const int fd = g_signal_fd.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(signal);
    // Non-blocking: when the pipe is full, signals are already waiting to be handled.
    (void)!write(fd, &byte, 1);
  }
  errno = saved_errno;
}

// Turns SIGTERM, SIGINT and SIGHUP into calls of `deliver` on a thread of its own (a signal
// handler may do almost nothing, and nothing that takes a lock), for as long as it lives.
class SignalForwarder {
 public:
  static absl::StatusOr<std::unique_ptr<SignalForwarder>> Start(std::function<void(int)> deliver) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "signal pipe");
    fcntl(fds[1], F_SETFL, O_NONBLOCK);
    auto forwarder = std::unique_ptr<SignalForwarder>(new SignalForwarder(fds[0], fds[1]));
    g_signal_fd.store(fds[1]);
    struct sigaction action = {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (size_t i = 0; i < std::size(kSignals); ++i) {
      sigaction(kSignals[i], &action, &forwarder->previous_[i]);
    }
    forwarder->thread_ = std::thread([read_fd = fds[0], deliver = std::move(deliver)] {
      while (true) {
        unsigned char byte = 0;
        const ssize_t n = read(read_fd, &byte, 1);
        if (n < 0 && errno == EINTR) continue;
        // A 0 byte is the destructor's "stop".
        if (n <= 0 || byte == 0) return;
        deliver(byte);
      }
    });
    return forwarder;
  }

  // Restores the previous handlers, then stops the thread.
  ~SignalForwarder() {
    for (size_t i = 0; i < std::size(kSignals); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
    g_signal_fd.store(-1);
    const unsigned char stop = 0;
    // The pipe cannot be full for long: the thread keeps draining it.
    while (write(write_fd_, &stop, 1) < 0 && (errno == EINTR || errno == EAGAIN)) {
    }
    if (thread_.joinable()) thread_.join();
    close(read_fd_);
    close(write_fd_);
  }

 private:
  SignalForwarder(int read_fd, int write_fd) : read_fd_(read_fd), write_fd_(write_fd) {}

  const int read_fd_;
  const int write_fd_;
  struct sigaction previous_[std::size(kSignals)] = {};
  std::thread thread_;
};

}  // namespace

std::string ChangedSummary(const std::vector<std::string>& keys) {
  return "changed: " + (keys.empty() ? std::string("nothing") : absl::StrJoin(keys, ", "));
}

DaemonLifecycle::DaemonLifecycle(DaemonHooks hooks, Clock& clock, ServiceNotifier& notifier)
    : hooks_(std::move(hooks)), clock_(clock), notifier_(notifier) {}

int DaemonLifecycle::Run() {
  std::unique_ptr<SignalForwarder> signals;
  if (hooks_.handle_signals) {
    absl::StatusOr<std::unique_ptr<SignalForwarder>> started =
        SignalForwarder::Start([this](int signal) { Deliver(signal); });
    if (started.ok()) {
      signals = std::move(*started);
    } else {
      PODPROF_LOG(ERROR) << "signals will not stop or reload the daemon: "
                         << started.status().message();
    }
  }
  const std::string status = hooks_.status_line();
  PODPROF_LOG(INFO) << status;
  absl::Status ready = notifier_.Ready(status);
  if (!ready.ok()) PODPROF_LOG(WARNING) << ready.message();

  // Systemd restarts the daemon when a period passes without a ping; pinging at half the
  // period leaves room for one slow health check.
  const int64_t watchdog_period_ns = notifier_.watchdog_ns() / 2;
  int64_t next_watchdog_ns =
      watchdog_period_ns > 0 ? clock_.MonotonicNs() + watchdog_period_ns : kNever;
  int64_t next_tick_ns = hooks_.tick ? clock_.MonotonicNs() + hooks_.first_tick_ns : kNever;
  int stop_signal = 0;
  while (stop_signal == 0) {
    const Request request = WaitForRequest(std::min(next_watchdog_ns, next_tick_ns));
    if (request == SIGHUP) {
      // Periodic work sees a new configuration at once (an agent refused before asks again).
      if (Reload() && hooks_.tick) next_tick_ns = clock_.MonotonicNs();
    } else if (request != 0) {
      stop_signal = request;
    } else if (clock_.MonotonicNs() >= next_watchdog_ns) {
      CheckHealth();
      next_watchdog_ns = clock_.MonotonicNs() + watchdog_period_ns;
    } else if (clock_.MonotonicNs() >= next_tick_ns) {
      next_tick_ns = clock_.MonotonicNs() + hooks_.tick();
    }
  }
  PODPROF_LOG(INFO) << "signal " << stop_signal << ": draining";
  notifier_.Stopping("draining").IgnoreError();
  if (hooks_.drain) hooks_.drain(clock_.NowNs() + hooks_.drain_timeout_ns);
  PODPROF_LOG(INFO) << "stopped";
  return stop_signal;
}

void DaemonLifecycle::RequestStop(int signal) {
  // 0 stands for "no request" and SIGHUP for a reload, so neither can name a stop.
  Deliver(signal == 0 || signal == SIGHUP ? SIGTERM : signal);
}

void DaemonLifecycle::RequestReload() { Deliver(SIGHUP); }

void DaemonLifecycle::Deliver(Request request) {
  if (request == 0) return;
  absl::MutexLock lock(&mu_);
  pending_.push_back(request);
  if (wake_ != nullptr) wake_->Notify();
  wake_ = nullptr;
}

DaemonLifecycle::Request DaemonLifecycle::WaitForRequest(int64_t due_ns) {
  while (true) {
    absl::Notification wake;
    int64_t left_ns;
    {
      absl::MutexLock lock(&mu_);
      if (!pending_.empty()) {
        const Request request = pending_.front();
        pending_.pop_front();
        return request;
      }
      left_ns = due_ns == kNever ? kNever : due_ns - clock_.MonotonicNs();
      if (left_ns <= 0) return 0;
      wake_ = &wake;
    }
    clock_.SleepUntilNs(clock_.NowNs() + std::min(left_ns, kMaxSliceNs), &wake);
    // Deliver forgets `wake` once it has notified it; otherwise it is forgotten here, before
    // it goes out of scope.
    absl::MutexLock lock(&mu_);
    if (wake_ == &wake) wake_ = nullptr;
  }
}

bool DaemonLifecycle::Reload() {
  notifier_.Reloading().IgnoreError();
  absl::StatusOr<std::string> summary =
      hooks_.reload ? hooks_.reload() : absl::StatusOr<std::string>(ChangedSummary({}));
  if (!summary.ok()) {
    PODPROF_LOG(ERROR) << "reload refused, keeping the running configuration: "
                       << summary.status().message();
    notifier_.Notify("READY=1\nSTATUS=reload refused: bad configuration").IgnoreError();
    return false;
  }
  PODPROF_LOG(INFO) << "reloaded; " << *summary;
  notifier_.Ready(hooks_.status_line()).IgnoreError();
  return true;
}

void DaemonLifecycle::CheckHealth() {
  absl::Status healthy = hooks_.health ? hooks_.health() : absl::OkStatus();
  if (healthy.ok()) {
    notifier_.Watchdog().IgnoreError();
  } else {
    PODPROF_LOG(ERROR) << "health check failed, withholding the watchdog ping: "
                       << healthy.message();
  }
}

}  // namespace podprof
