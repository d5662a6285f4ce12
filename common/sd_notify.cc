#include "common/sd_notify.h"

#include <systemd/sd-daemon.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace podprof {

ServiceNotifier::ServiceNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
  uint64_t usec = 0;
  // unset_environment = 0: children (none expected) may still see it.
  if (sd_watchdog_enabled(0, &usec) > 0) watchdog_ns_ = static_cast<int64_t>(usec) * 1000;
}

absl::Status ServiceNotifier::Notify(const std::string& state) {
  if (!enabled_) return absl::OkStatus();
  int rc = sd_notify(0, state.c_str());
  if (rc < 0) {
    return ErrnoToStatus(-rc, absl::StrCat("sd_notify to ", std::getenv("NOTIFY_SOCKET")));
  }
  return absl::OkStatus();
}

}  // namespace podprof
