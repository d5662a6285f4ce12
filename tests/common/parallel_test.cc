#include "common/parallel.h"

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace podprof {
namespace {

TEST(ParallelForTest, CallsEveryIndexOnce) {
  std::vector<std::atomic<int>> calls(1000);
  ParallelFor(calls.size(), 4, [&](size_t i) { ++calls[i]; });
  for (size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(calls[i].load(), 1) << "index " << i;
}

TEST(ParallelForTest, NothingToDoCallsNothing) {
  int calls = 0;
  ParallelFor(0, 8, [&](size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ParallelForTest, OneThreadRunsInOrderOnTheCaller) {
  std::vector<size_t> order;
  std::set<std::thread::id> ran_on;
  ParallelFor(5, 1, [&](size_t i) {  // one thread: no lock needed
    order.push_back(i);
    ran_on.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(ran_on, std::set<std::thread::id>{std::this_thread::get_id()});
}

// Every call waits (in real time, bounded) until all `threads` calls have begun: they can only
// all arrive if they run at once, one of them on the calling thread.
TEST(ParallelForTest, RunsOnTheThreadsGivenTheCallerAmongThem) {
  constexpr size_t kThreads = 3;
  absl::Mutex mu;
  size_t arrived = 0;
  size_t met = 0;
  std::set<std::thread::id> ran_on;
  ParallelFor(kThreads, kThreads, [&](size_t) {
    absl::MutexLock lock(&mu);
    ++arrived;
    ran_on.insert(std::this_thread::get_id());
    const auto all_here = [&] { return arrived == kThreads; };
    if (mu.AwaitWithTimeout(absl::Condition(&all_here), absl::Seconds(10))) ++met;
  });
  EXPECT_EQ(met, kThreads);
  EXPECT_EQ(ran_on.size(), kThreads);
  EXPECT_EQ(ran_on.count(std::this_thread::get_id()), 1u);
}

TEST(ParallelForTest, NeverMoreThreadsThanAskedOrThanIndices) {
  absl::Mutex mu;
  std::set<std::thread::id> ran_on;
  auto record = [&](size_t) {
    absl::MutexLock lock(&mu);
    ran_on.insert(std::this_thread::get_id());
  };
  ParallelFor(200, 3, record);
  EXPECT_LE(ran_on.size(), 3u);
  ran_on.clear();
  ParallelFor(2, 16, record);
  EXPECT_LE(ran_on.size(), 2u);
}

TEST(ParallelForTest, CoresUpToIsBetweenOneAndTheMost) {
  EXPECT_EQ(CoresUpTo(1), 1u);
  EXPECT_EQ(CoresUpTo(0), 1u);
  EXPECT_GE(CoresUpTo(8), 1u);
  EXPECT_LE(CoresUpTo(8), 8u);
}

}  // namespace
}  // namespace podprof
