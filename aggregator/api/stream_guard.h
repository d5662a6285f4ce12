// Bounds on the aggregator's long gRPC calls (ExportCapture, WatchCapture, ImportXSpace), as the
// HTTP server bounds its downloads: how many a client may hold at once and in all, and how long
// one may sit without progress. A sync gRPC server gives each call a thread and lets a Write
// block for as long as its client does not read, so without them one client held 64 unread
// exports (695 MiB), 600 watch streams (624 threads), or idle imports with a spool file each.
#ifndef PODPROF_AGGREGATOR_API_STREAM_GUARD_H_
#define PODPROF_AGGREGATOR_API_STREAM_GUARD_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/periodic.h"

namespace podprof::aggregator {

// Slots for long calls, per client and in all. Thread-safe.
class StreamSlots {
 public:
  StreamSlots(int max_in_all, int max_per_client)
      : max_in_all_(max_in_all), max_per_client_(max_per_client) {}

  // A slot held for as long as the ticket lives.
  class Ticket {
   public:
    Ticket(StreamSlots* slots, std::string client) : slots_(slots), client_(std::move(client)) {}
    Ticket(Ticket&& o) noexcept : slots_(o.slots_), client_(std::move(o.client_)) {
      o.slots_ = nullptr;
    }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket() {
      if (slots_ != nullptr) slots_->Release(client_);
    }

   private:
    StreamSlots* slots_;
    std::string client_;
  };

  // A slot for `client`, or ResourceExhausted saying which bound is reached.
  absl::StatusOr<Ticket> Take(const std::string& client) ABSL_LOCKS_EXCLUDED(mu_);
  int held() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Release(const std::string& client) ABSL_LOCKS_EXCLUDED(mu_);

  const int max_in_all_;
  const int max_per_client_;
  mutable absl::Mutex mu_;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> by_client_ ABSL_GUARDED_BY(mu_);
};

// Who a gRPC caller is for StreamSlots: its certificate's names under TLS, else its address
// without the port (one host's connections are one client).
std::string ClientOf(const grpc::ServerContextBase& context);

// Cancels a call whose client keeps it waiting longer than `limit_ns` on `clock`: a Write the
// client does not take, or a Read it never sends. The call arms the watchdog around each such
// wait; time spent otherwise (a watch waiting for news, an export planning) does not count.
// The watchdog's thread lives as long as it does.
class ClientWaitWatchdog {
 public:
  ClientWaitWatchdog(grpc::ServerContextBase* context, Clock& clock, int64_t limit_ns);
  ~ClientWaitWatchdog();
  ClientWaitWatchdog(const ClientWaitWatchdog&) = delete;
  ClientWaitWatchdog& operator=(const ClientWaitWatchdog&) = delete;

  // Around one wait on the client.
  void Arm() { armed_ns_ = clock_.NowNs(); }
  void Disarm() { armed_ns_ = kDisarmed; }
  // Whether it cancelled the call.
  bool fired() const { return fired_; }

 private:
  static constexpr int64_t kDisarmed = -1;
  // When the armed wait would pass the limit (disarmed: a limit from now).
  int64_t Due() const;
  // Cancels the call if the armed wait passed the limit (and ends); else when to look again.
  std::optional<int64_t> Look();

  grpc::ServerContextBase* const context_;
  Clock& clock_;
  const int64_t limit_ns_;
  std::atomic<int64_t> armed_ns_{kDisarmed};
  std::atomic<bool> fired_{false};
  PeriodicThread thread_;  // last: stopped before the members it uses go
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_STREAM_GUARD_H_
