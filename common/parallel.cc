#include "common/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace podprof {

void ParallelFor(size_t n, size_t threads, absl::FunctionRef<void(size_t)> fn) {
  const size_t workers = std::min(n, threads);
  if (workers < 2) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  // Each thread takes the next index until none is left; every thread overshoots n once.
  std::atomic<size_t> next{0};
  auto drain = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(workers - 1);
  for (size_t t = 1; t < workers; ++t) pool.emplace_back(drain);
  drain();
  for (std::thread& t : pool) t.join();
}

size_t CoresUpTo(size_t most) {
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, std::max<size_t>(1, most));
}

}  // namespace podprof
