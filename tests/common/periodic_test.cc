#include "common/periodic.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "gtest/gtest.h"

namespace podprof {
namespace {

TEST(PeriodicThreadTest, RunsAtTheTimesTheTaskAsksForAndEndsWhenItSaysSo) {
  FakeClock clock(1000);
  absl::Mutex mu;
  std::vector<int64_t> ran;
  PeriodicThread t(clock, 1500, [&]() -> std::optional<int64_t> {
    absl::MutexLock lock(&mu);
    ran.push_back(clock.NowNs());
    if (ran.size() == 3) return std::nullopt;
    return clock.NowNs() + 100;
  });
  // Waits (in real time, bounded) until the task has run `n` times.
  const auto await_runs = [&](size_t n) {
    const auto enough = [&] { return ran.size() >= n; };
    const bool reached = mu.LockWhenWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    const size_t got = ran.size();
    mu.Unlock();
    return reached ? got : 0;
  };
  ASSERT_TRUE(clock.AwaitSleepers(1, absl::Seconds(10)));
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(ran.empty());  // not before its first time
  }
  clock.SetNs(1500);
  EXPECT_EQ(await_runs(1), 1u);
  clock.SetNs(1600);
  EXPECT_EQ(await_runs(2), 2u);
  clock.SetNs(1700);
  EXPECT_EQ(await_runs(3), 3u);
  t.Stop();  // the task ended the thread after its third run: Stop only joins
  absl::MutexLock lock(&mu);
  EXPECT_EQ(ran, (std::vector<int64_t>{1500, 1600, 1700}));
}

TEST(PeriodicThreadTest, StopCutsTheSleepShort) {
  FakeClock clock(0);
  std::atomic<int> runs{0};
  PeriodicThread t(clock, 1'000'000'000, [&] {
    ++runs;
    return PeriodicThread::Every(clock, 1'000'000'000);
  });
  ASSERT_TRUE(clock.AwaitSleepers(1, absl::Seconds(10)));
  t.Stop();  // returns although fake time never reaches the first run
  EXPECT_EQ(runs.load(), 0);
  EXPECT_TRUE(t.stopping());
  t.Stop();  // idempotent
}

}  // namespace
}  // namespace podprof
