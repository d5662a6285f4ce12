#include "common/worker_pool.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/synchronization/blocking_counter.h"

namespace podprof {

WorkerPool::WorkerPool(int threads, int nice) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, nice] { Loop(nice); });
}

WorkerPool::~WorkerPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::Submit(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(task));
}

void WorkerPool::ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  absl::BlockingCounter left(static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) {
    Submit([&fn, &left, i] {
      fn(i);
      left.DecrementCount();
    });
  }
  left.Wait();
}

void WorkerPool::Loop(int nice) {
  // Per thread on Linux: PRIO_PROCESS with a thread id sets that thread alone. Failure (a
  // sandbox forbidding it) only costs the priority, not the work.
  if (nice != 0) {
    const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
    setpriority(PRIO_PROCESS, static_cast<id_t>(tid), getpriority(PRIO_PROCESS, tid) + nice);
  }
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](WorkerPool* p)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->stopping_ || !p->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace podprof
