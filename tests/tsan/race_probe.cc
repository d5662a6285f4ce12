// A real data race beside correctly locked code, for the test tsan_reports_real_race: TSan must
// report it with tests/tsan/absl_sync.cc linked in (the annotations must not hide races).

#include <thread>

#include "absl/synchronization/mutex.h"

namespace {

absl::Mutex mu;

}  // namespace

int main() {
  int count = 0;
  // One side increments under the lock, the other forgets it: no happens-before between them.
  std::thread locked([&count] {
    for (int i = 0; i < 1000; ++i) {
      absl::MutexLock lock(&mu);
      ++count;
    }
  });
  for (int i = 0; i < 1000; ++i) ++count;
  locked.join();
  return count > 0 ? 0 : 1;
}
