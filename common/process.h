// Settings every podprof process applies first thing in main().
#ifndef PODPROF_COMMON_PROCESS_H_
#define PODPROF_COMMON_PROCESS_H_

#include <unistd.h>

#include <string>

#include "absl/synchronization/mutex.h"

namespace podprof {

inline void InitProcess() {
  // Debian's Abseil is built without NDEBUG, so every Mutex lock and unlock also updates a
  // process-wide lock-order graph under a global lock. That bookkeeping showed up in profiles
  // of every daemon, on every RPC and every wake-up; lock order is checked by the thread
  // safety annotations and the sanitizer build instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

// This host's name (gethostname), or "localhost" when it cannot be read.
inline std::string LocalHostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

}  // namespace podprof

#endif  // PODPROF_COMMON_PROCESS_H_
