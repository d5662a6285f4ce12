// The systemd service-manager notification protocol (sd_notify(3)): readiness, status,
// watchdog and stopping messages, sent as datagrams to $NOTIFY_SOCKET. Outside systemd (no
// NOTIFY_SOCKET) every call is a successful no-op, so daemons run the same way by hand.
#ifndef PODPROF_COMMON_SD_NOTIFY_H_
#define PODPROF_COMMON_SD_NOTIFY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace podprof {

// Thread-safe (each call sends one datagram).
class ServiceNotifier {
 public:
  // Reads NOTIFY_SOCKET and WATCHDOG_USEC once, at construction.
  ServiceNotifier();

  // Sends `state` (e.g. "READY=1\nSTATUS=listening"). Fails naming the socket when the
  // datagram cannot be sent.
  absl::Status Notify(const std::string& state);
  absl::Status Ready(const std::string& status) { return Notify("READY=1\nSTATUS=" + status); }
  absl::Status Status(const std::string& status) { return Notify("STATUS=" + status); }
  absl::Status Stopping(const std::string& status) {
    return Notify("STOPPING=1\nSTATUS=" + status);
  }
  absl::Status Watchdog() { return Notify("WATCHDOG=1"); }
  absl::Status Reloading() { return Notify("RELOADING=1"); }

  // The watchdog period systemd expects pings within, ns; 0 when the watchdog is off.
  int64_t watchdog_ns() const { return watchdog_ns_; }
  bool enabled() const { return enabled_; }

 private:
  bool enabled_ = false;
  int64_t watchdog_ns_ = 0;
};

}  // namespace podprof

#endif  // PODPROF_COMMON_SD_NOTIFY_H_
