#include "aggregator/api/stream_guard.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "security/tls.h"

namespace podprof::aggregator {

absl::StatusOr<StreamSlots::Ticket> StreamSlots::Take(const std::string& client) {
  absl::MutexLock lock(&mu_);
  if (held_ >= max_in_all_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the aggregator holds ", held_,
                     " long calls (exports, watches, imports), the most it "
                     "takes at once; try again"));
  }
  int& mine = by_client_[client];
  if (mine >= max_per_client_) {
    return absl::ResourceExhaustedError(absl::StrCat("client ", client, " holds ", mine,
                                                     " long calls (exports, watches, imports), "
                                                     "the most one client may; finish one first"));
  }
  ++mine;
  ++held_;
  return Ticket(this, client);
}

int StreamSlots::held() const {
  absl::MutexLock lock(&mu_);
  return held_;
}

void StreamSlots::Release(const std::string& client) {
  absl::MutexLock lock(&mu_);
  --held_;
  auto it = by_client_.find(client);
  if (it != by_client_.end() && --it->second <= 0) by_client_.erase(it);
}

std::string ClientOf(const grpc::ServerContextBase& context) {
  std::vector<std::string> names = security::PeerIdentities(context);
  if (!names.empty()) return absl::StrJoin(names, "/");
  // "ipv4:127.0.0.1:43210", "ipv6:[::1]:43210": the address without the port.
  std::string peer = context.peer();
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon != std::string::npos && colon != scheme) peer.resize(colon);
  return peer;
}

ClientWaitWatchdog::ClientWaitWatchdog(grpc::ServerContextBase* context, Clock& clock,
                                       int64_t limit_ns)
    : context_(context),
      clock_(clock),
      limit_ns_(limit_ns),
      thread_("podprof-waitdog", clock, Due(), [this] { return Look(); }) {}

int64_t ClientWaitWatchdog::Due() const {
  const int64_t armed = armed_ns_.load();
  return (armed == kDisarmed ? clock_.NowNs() : armed) + limit_ns_;
}

std::optional<int64_t> ClientWaitWatchdog::Look() {
  // Sleeps until the armed wait would pass the limit (or a limit's length while disarmed),
  // then looks again: a wait that ended, or began later, moves the deadline on.
  const int64_t armed = armed_ns_.load();
  if (armed == kDisarmed || armed + limit_ns_ > clock_.NowNs()) return Due();
  fired_ = true;
  context_->TryCancel();
  return std::nullopt;
}

ClientWaitWatchdog::~ClientWaitWatchdog() { thread_.Stop(); }

}  // namespace podprof::aggregator
