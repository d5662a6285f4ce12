// What a daemon says when it refuses someone: a caller denied a role or a host, or a TLS
// handshake that failed. An operator needs to see these (a misconfigured agent, an expired
// certificate, a scanner), but a refused agent or a scanner repeats itself, so each reason is
// logged at most once per window, and the next line for it counts what was left out.
#ifndef PODPROF_SECURITY_REFUSAL_LOG_H_
#define PODPROF_SECURITY_REFUSAL_LOG_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"

namespace podprof::security {

class RefusalLog {
 public:
  // Lines go to `sink` (default: the log, as warnings).
  using Sink = std::function<void(const std::string& line)>;
  explicit RefusalLog(Clock& clock, int64_t window_ns = kDefaultWindowNs, Sink sink = nullptr);

  static constexpr int64_t kDefaultWindowNs = 60'000'000'000;

  // "refused PEER: REASON", unless REASON was logged less than a window ago. `peer` is gRPC's
  // address ("ipv4:10.0.0.7:51234"), or empty where the library does not say.
  void Note(absl::string_view peer, absl::string_view reason) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Seen {
    int64_t logged_ns = 0;
    int64_t suppressed = 0;
  };
  Clock& clock_;
  const int64_t window_ns_;
  Sink sink_;
  absl::Mutex mu_;
  std::map<std::string, Seen, std::less<>> seen_ ABSL_GUARDED_BY(mu_);
};

// Sends gRPC's own log lines through PODPROF_LOG (one format, journal priorities), and a failed
// TLS handshake to `refusals` as a refusal saying what the TLS library's words mean for a
// podprof deployment. gRPC 1.51 names neither the peer nor the direction of a failed handshake
// (both daemons serve and dial), so those lines say what failed, not with whom. Process-wide;
// `refusals` must outlive every gRPC object (a daemon's main owns it). Null (the CLI) drops
// those lines: a client explains its own failed dial.
void RouteGrpcLogs(RefusalLog* refusals);

// The meaning of a TLS library error in a failed handshake (exposed for tests), e.g.
// "wrong version number" -> "the other side spoke plaintext ...".
std::string ExplainHandshakeFailure(absl::string_view library_message);

}  // namespace podprof::security

#endif  // PODPROF_SECURITY_REFUSAL_LOG_H_
