// A fixed set of threads that run submitted tasks: the aggregator's bound on ingest work (a pod
// of thousands of hosts gets as many threads as cores, not a thread per host), at a lowered
// scheduling priority so that queries keep their share of the CPU while a capture lands.
#ifndef PODPROF_COMMON_WORKER_POOL_H_
#define PODPROF_COMMON_WORKER_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace podprof {

class WorkerPool {
 public:
  // `threads` <= 0 means one per core. Each thread's nice value is raised by `nice` (Linux
  // schedules threads by their own nice value), so the pool's work yields to the process's
  // other threads.
  explicit WorkerPool(int threads, int nice = 0);
  // Runs every task already submitted, then joins the threads.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task`; tasks start in submission order. Thread-safe.
  void Submit(std::function<void()> task);
  // Runs fn(0) .. fn(n - 1) on the pool and returns when all have. Must not be called from a
  // task of this pool (it would wait for threads that are waiting for it).
  void ParallelFor(size_t n, const std::function<void(size_t)>& fn);
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void Loop(int nice);

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace podprof

#endif  // PODPROF_COMMON_WORKER_POOL_H_
