#include "common/periodic.h"

#include <pthread.h>

#include <utility>

namespace podprof {

PeriodicThread::PeriodicThread(std::string name, Clock& clock, int64_t first_ns, Task task)
    : thread_([this, name = std::move(name), &clock, first_ns, task = std::move(task)] {
        pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
        std::optional<int64_t> next = first_ns;
        while (next && clock.SleepUntilNs(*next, &stop_)) next = task();
      }) {}

void PeriodicThread::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

}  // namespace podprof
