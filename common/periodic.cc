#include "common/periodic.h"

#include <utility>

namespace podprof {

PeriodicThread::PeriodicThread(Clock& clock, int64_t first_ns, Task task)
    : thread_([this, &clock, first_ns, task = std::move(task)] {
        std::optional<int64_t> next = first_ns;
        while (next && clock.SleepUntilNs(*next, &stop_)) next = task();
      }) {}

void PeriodicThread::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

}  // namespace podprof
