// DaemonLifecycle over a real notify socket, with FakeClock driving the watchdog and periodic
// work, and real signals (or the request calls) driving reload and stop.
#include "common/daemon.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/sd_notify.h"
#include "gtest/gtest.h"
#include "tests/util/notify_socket.h"

namespace podprof {
namespace {

constexpr int64_t kWatchdogUsec = 200'000;
// The lifecycle pings at half the watchdog period.
constexpr int64_t kPingPeriodNs = kWatchdogUsec * 1000 / 2;

int Count(const std::vector<std::string>& msgs, const std::string& what) {
  int n = 0;
  for (const std::string& m : msgs) n += absl::StrContains(m, what);
  return n;
}

// Index of the first message at or after `from` that contains `what`; -1 if none.
int Index(const std::vector<std::string>& msgs, const std::string& what, int from = 0) {
  for (int i = from; i < static_cast<int>(msgs.size()); ++i) {
    if (absl::StrContains(msgs[i], what)) return i;
  }
  return -1;
}

// What the hooks saw and what they answer. Thread-safe: the hooks run on the lifecycle's
// thread, the test reads and changes it from its own.
class Daemon {
 public:
  DaemonHooks Hooks() {
    DaemonHooks hooks;
    hooks.status_line = [this] {
      absl::MutexLock l(&mu_);
      return absl::StrCat("serving generation ", generation_);
    };
    hooks.health = [this]() -> absl::Status {
      absl::MutexLock l(&mu_);
      ++health_calls_;
      return healthy_ ? absl::OkStatus() : absl::UnavailableError("store wedged");
    };
    hooks.reload = [this]() -> absl::StatusOr<std::string> {
      absl::MutexLock l(&mu_);
      ++reloads_;
      if (!reload_ok_) return absl::InvalidArgumentError("x.toml: key 'labels' must be a table");
      ++generation_;
      return ChangedSummary({"labels", "heartbeat.interval"});
    };
    hooks.drain_timeout_ns = 7'000'000'000;
    hooks.handle_signals = true;
    return hooks;
  }

  void set_healthy(bool healthy) {
    absl::MutexLock l(&mu_);
    healthy_ = healthy;
  }
  void set_reload_ok(bool ok) {
    absl::MutexLock l(&mu_);
    reload_ok_ = ok;
  }
  int health_calls() {
    absl::MutexLock l(&mu_);
    return health_calls_;
  }
  int reloads() {
    absl::MutexLock l(&mu_);
    return reloads_;
  }
  int generation() {
    absl::MutexLock l(&mu_);
    return generation_;
  }
  // Waits (real time) until health() has been called `n` times.
  bool AwaitHealthCalls(int n) {
    absl::MutexLock l(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return health_calls_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(10));
  }

 private:
  absl::Mutex mu_;
  bool healthy_ ABSL_GUARDED_BY(mu_) = true;
  bool reload_ok_ ABSL_GUARDED_BY(mu_) = true;
  int health_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int reloads_ ABSL_GUARDED_BY(mu_) = 0;
  int generation_ ABSL_GUARDED_BY(mu_) = 1;
};

class DaemonLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = absl::StrCat(::testing::TempDir(), "/daemon_notify_", getpid());
    sock_ = std::make_unique<testing::NotifySocket>(path);
    // ServiceNotifier reads WATCHDOG_USEC once, at construction; sd_notify(3) reads
    // NOTIFY_SOCKET at every message, so that stays set until the test ends.
    setenv("NOTIFY_SOCKET", path.c_str(), 1);
    setenv("WATCHDOG_USEC", std::to_string(kWatchdogUsec).c_str(), 1);
    notifier_ = std::make_unique<ServiceNotifier>();
    unsetenv("WATCHDOG_USEC");
    notifier_without_watchdog_ = std::make_unique<ServiceNotifier>();
  }

  void TearDown() override {
    if (thread_.joinable()) {
      lifecycle_->RequestStop(SIGTERM);
      thread_.join();
    }
    unsetenv("NOTIFY_SOCKET");
  }

  // Runs the lifecycle on a thread of its own and waits for READY.
  std::vector<std::string> Start(DaemonHooks hooks, bool watchdog = true) {
    lifecycle_ = std::make_unique<DaemonLifecycle>(
        std::move(hooks), clock_, watchdog ? *notifier_ : *notifier_without_watchdog_);
    thread_ = std::thread([this] { stopped_by_ = lifecycle_->Run(); });
    return sock_->ReadUntil("READY=1");
  }

  // Moves time on by one ping period once the lifecycle waits for it, and waits until the
  // health check of that period has run.
  void Beat(Daemon& daemon) {
    const int calls = daemon.health_calls();
    ASSERT_TRUE(clock_.AwaitSleepers(1, absl::Seconds(10)));
    clock_.AdvanceNs(kPingPeriodNs);
    ASSERT_TRUE(daemon.AwaitHealthCalls(calls + 1));
  }

  FakeClock clock_{1'700'000'000'000'000'000};
  std::unique_ptr<testing::NotifySocket> sock_;
  std::unique_ptr<ServiceNotifier> notifier_;
  std::unique_ptr<ServiceNotifier> notifier_without_watchdog_;
  std::unique_ptr<DaemonLifecycle> lifecycle_;
  std::thread thread_;
  int stopped_by_ = 0;
};

TEST_F(DaemonLifecycleTest, ReadyWithTheStatusLineComesFirst) {
  Daemon daemon;
  std::vector<std::string> msgs = Start(daemon.Hooks());
  ASSERT_FALSE(msgs.empty());
  EXPECT_EQ(msgs[0], "READY=1\nSTATUS=serving generation 1");
}

TEST_F(DaemonLifecycleTest, WatchdogPingsOnlyWhileHealthy) {
  Daemon daemon;
  Start(daemon.Hooks());
  Beat(daemon);
  EXPECT_EQ(Count(sock_->ReadFor(300), "WATCHDOG=1"), 1);

  daemon.set_healthy(false);
  ::testing::internal::CaptureStderr();
  Beat(daemon);
  Beat(daemon);
  EXPECT_EQ(Count(sock_->ReadFor(300), "WATCHDOG=1"), 0);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(
      absl::StrContains(log, "health check failed, withholding the watchdog ping: store wedged"))
      << log;

  daemon.set_healthy(true);
  Beat(daemon);
  EXPECT_EQ(Count(sock_->ReadFor(300), "WATCHDOG=1"), 1) << "the pings did not come back";
}

TEST_F(DaemonLifecycleTest, NoHealthChecksWithoutAWatchdog) {
  Daemon daemon;
  Start(daemon.Hooks(), /*watchdog=*/false);
  ASSERT_TRUE(clock_.AwaitSleepers(1, absl::Seconds(10)));
  clock_.AdvanceNs(10'000'000'000);
  EXPECT_EQ(Count(sock_->ReadFor(300), "WATCHDOG=1"), 0);
  EXPECT_EQ(daemon.health_calls(), 0);
}

TEST_F(DaemonLifecycleTest, SighupReloadsLogsTheSummaryAndAnnouncesReadyAgain) {
  Daemon daemon;
  Start(daemon.Hooks());
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(kill(getpid(), SIGHUP), 0);
  std::vector<std::string> msgs = sock_->ReadUntil("STATUS=serving generation 2");
  const std::string log = ::testing::internal::GetCapturedStderr();
  const int reloading = Index(msgs, "RELOADING=1");
  ASSERT_GT(reloading, 0);
  const int ready_again = Index(msgs, "READY=1", reloading + 1);
  ASSERT_GT(ready_again, reloading);
  EXPECT_EQ(msgs[ready_again], "READY=1\nSTATUS=serving generation 2");
  EXPECT_EQ(daemon.reloads(), 1);
  EXPECT_TRUE(absl::StrContains(log, "reloaded; changed: labels, heartbeat.interval")) << log;
}

TEST_F(DaemonLifecycleTest, AFailedReloadKeepsTheDaemonRunning) {
  Daemon daemon;
  daemon.set_reload_ok(false);
  Start(daemon.Hooks());
  ::testing::internal::CaptureStderr();
  lifecycle_->RequestReload();
  std::vector<std::string> msgs = sock_->ReadUntil("reload refused");
  const std::string log = ::testing::internal::GetCapturedStderr();
  const int reloading = Index(msgs, "RELOADING=1");
  ASSERT_GT(reloading, 0);
  const int refused = Index(msgs, "READY=1", reloading + 1);
  ASSERT_GT(refused, reloading);
  EXPECT_EQ(msgs[refused], "READY=1\nSTATUS=reload refused: bad configuration");
  EXPECT_TRUE(absl::StrContains(log,
                                "reload refused, keeping the running configuration: x.toml: key "
                                "'labels' must be a table"))
      << log;
  EXPECT_EQ(daemon.generation(), 1);
  // Still serving: the watchdog keeps coming.
  Beat(daemon);
  EXPECT_EQ(Count(sock_->ReadFor(300), "WATCHDOG=1"), 1);
}

TEST_F(DaemonLifecycleTest, SigtermAnnouncesStoppingThenDrainsByTheDeadline) {
  struct sigaction before = {};
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &before), 0);
  Daemon daemon;
  DaemonHooks hooks = daemon.Hooks();
  int64_t deadline_ns = 0;
  std::vector<std::string> seen_by_drain;
  // The test thread is in join() meanwhile, so the socket is the drain's alone.
  hooks.drain = [&](int64_t deadline) {
    deadline_ns = deadline;
    seen_by_drain = sock_->ReadUntil("STOPPING=1");
  };
  Start(std::move(hooks));
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  thread_.join();
  EXPECT_EQ(stopped_by_, SIGTERM);
  EXPECT_EQ(deadline_ns, clock_.NowNs() + 7'000'000'000);
  ASSERT_FALSE(seen_by_drain.empty());
  EXPECT_EQ(seen_by_drain.back(), "STOPPING=1\nSTATUS=draining");
  // The handlers Run() installed are gone again.
  struct sigaction after = {};
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST_F(DaemonLifecycleTest, TickRunsFirstAfterItsDelayThenAfterWhatItReturns) {
  absl::Mutex mu;
  int ticks = 0;
  Daemon daemon;
  DaemonHooks hooks = daemon.Hooks();
  hooks.first_tick_ns = 2'000'000'000;
  hooks.tick = [&] {
    absl::MutexLock l(&mu);
    ++ticks;
    return int64_t{5'000'000'000};
  };
  auto await_ticks = [&](int n) {
    absl::MutexLock l(&mu);
    auto reached = [&ticks, n] { return ticks >= n; };
    return mu.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(10));
  };
  auto tick_count = [&] {
    absl::MutexLock l(&mu);
    return ticks;
  };
  Start(std::move(hooks), /*watchdog=*/false);
  ASSERT_TRUE(clock_.AwaitSleepers(1, absl::Seconds(10)));
  clock_.AdvanceNs(1'500'000'000);
  // A tick that is not due must not come: real time lets a wrongly woken tick show, and no
  // condition can say that nothing happened.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(tick_count(), 0);
  clock_.AdvanceNs(500'000'000);
  ASSERT_TRUE(await_ticks(1));
  ASSERT_TRUE(clock_.AwaitSleepers(1, absl::Seconds(10)));
  clock_.AdvanceNs(4'000'000'000);
  absl::SleepFor(absl::Milliseconds(100));  // as above: nothing is due
  EXPECT_EQ(tick_count(), 1);
  clock_.AdvanceNs(1'000'000'000);
  ASSERT_TRUE(await_ticks(2));
}

TEST(ChangedSummaryTest, NamesTheKeysOrNothing) {
  EXPECT_EQ(ChangedSummary({}), "changed: nothing");
  EXPECT_EQ(ChangedSummary({"labels"}), "changed: labels");
  EXPECT_EQ(ChangedSummary({"a", "b"}), "changed: a, b");
}

}  // namespace
}  // namespace podprof
