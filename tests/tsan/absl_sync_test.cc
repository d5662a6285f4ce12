// tests/tsan/absl_sync.cc's annotations, one test per way podprof hands data from one thread to
// another through Abseil. Each writes a plain int in one thread and reads it in another after the
// hand-over: correct code, which ThreadSanitizer reports as a data race (and the TSan build's
// halt_on_error fails) unless the hand-over is annotated. The test tsan_reports_real_race checks
// the other half, that a real race is still reported.

#include <thread>
#include <vector>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace {

// Long enough never to expire: the waits below return when their condition holds.
constexpr absl::Duration kNever = absl::Hours(1);

TEST(TsanAbslSyncTest, MutexLockOrdersTwoWritersOfAGuardedCounter) {
  absl::Mutex mu;
  int count = 0;
  auto add = [&] {
    for (int i = 0; i < 1000; ++i) {
      absl::MutexLock lock(&mu);
      ++count;
    }
  };
  std::thread a(add), b(add);
  a.join();
  b.join();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(count, 2000);
}

TEST(TsanAbslSyncTest, ReaderLockSeesWhatAWriterPublished) {
  absl::Mutex mu;
  bool ready = false;
  int data = 0;
  std::thread writer([&] {
    absl::WriterMutexLock lock(&mu);
    data = 7;
    ready = true;
  });
  int seen = 0;
  while (seen == 0) {
    absl::ReaderMutexLock lock(&mu);
    if (ready) seen = data;
  }
  writer.join();
  EXPECT_EQ(seen, 7);
}

TEST(TsanAbslSyncTest, TryLockThatSucceedsOrdersLikeLock) {
  absl::Mutex mu;
  bool ready = false;
  int data = 0;
  std::thread writer([&] {
    data = 7;  // outside the lock: published by the Unlock that follows
    absl::MutexLock lock(&mu);
    ready = true;
  });
  int seen = 0;
  while (seen == 0) {
    if (!mu.TryLock()) continue;
    if (ready) seen = data;
    mu.Unlock();
  }
  writer.join();
  EXPECT_EQ(seen, 7);
}

TEST(TsanAbslSyncTest, AwaitSeesWritesBeforeTheConditionTurnedTrue) {
  absl::Mutex mu;
  bool ready = false;
  int data = 0;
  std::thread writer([&] {
    data = 7;  // outside the lock: published by the Unlock that follows
    absl::MutexLock lock(&mu);
    ready = true;
  });
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&ready));
  }
  EXPECT_EQ(data, 7);
  writer.join();
}

TEST(TsanAbslSyncTest, AwaitWithTimeoutAndLockWhenSeeThePublishedWrite) {
  absl::Mutex mu;
  bool ready = false;
  int data = 0;
  std::thread writer([&] {
    data = 7;
    absl::MutexLock lock(&mu);
    ready = true;
  });
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&ready), kNever));
  }
  EXPECT_EQ(data, 7);
  writer.join();
  std::thread second([&] {
    absl::MutexLock lock(&mu);
    data = 8;
    ready = false;
  });
  mu.LockWhen(absl::Condition(
      +[](bool* r) { return !*r; }, &ready));
  EXPECT_EQ(data, 8);
  mu.Unlock();
  second.join();
}

TEST(TsanAbslSyncTest, CondVarWaitSeesTheSignalledWrite) {
  absl::Mutex mu;
  absl::CondVar cv;
  bool ready = false;
  int data = 0;
  std::thread writer([&] {
    data = 7;
    absl::MutexLock lock(&mu);
    ready = true;
    cv.Signal();
  });
  {
    absl::MutexLock lock(&mu);
    while (!ready) cv.WaitWithTimeout(&mu, kNever);
  }
  EXPECT_EQ(data, 7);
  writer.join();
}

TEST(TsanAbslSyncTest, NotificationPublishesOnItsInlineFastPath) {
  absl::Notification done;
  int data = 0;
  std::thread writer([&] {
    data = 7;
    done.Notify();
  });
  // HasBeenNotified() is inline: its acquire-load pairs with a store TSan does not see.
  while (!done.HasBeenNotified()) std::this_thread::yield();
  EXPECT_EQ(data, 7);
  writer.join();
}

TEST(TsanAbslSyncTest, NotificationPublishesToItsWaiter) {
  absl::Notification done;
  int data = 0;
  std::thread writer([&] {
    data = 7;
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kNever));
  EXPECT_EQ(data, 7);
  writer.join();
}

TEST(TsanAbslSyncTest, BlockingCounterPublishesEveryDecrementersWrites) {
  constexpr int kThreads = 4;
  absl::BlockingCounter left(kThreads);
  std::vector<int> out(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      out[i] = i + 1;  // only the last decrement goes through the counter's Mutex
      left.DecrementCount();
    });
  }
  left.Wait();
  EXPECT_EQ(out, (std::vector<int>{1, 2, 3, 4}));
  for (std::thread& t : threads) t.join();
}

TEST(TsanAbslSyncTest, BarrierPublishesToEveryThreadPastIt) {
  constexpr int kThreads = 3;
  auto* barrier = new absl::Barrier(kThreads);
  std::vector<int> out(kThreads, 0);
  std::vector<int> sums(kThreads, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      out[i] = i + 1;
      if (barrier->Block()) delete barrier;  // the last one out deletes it
      sums[i] = out[0] + out[1] + out[2];
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(sums, (std::vector<int>{6, 6, 6}));
}

}  // namespace
