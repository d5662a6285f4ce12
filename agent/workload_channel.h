// Channels from the agent to its workload's profiler, and reconnecting to it.
//
// gRPC holds a channel whose connection failed in TRANSIENT_FAILURE for a backoff (about 1 s,
// growing to 2 min while the failures go on) and fails every call in it at once. A profiler
// that was restarted meanwhile would look unreachable for that long: a JAX job that stopped
// its profiler server for a moment, or a capture right after a failed one. Before a capture is
// failed as unreachable, the agent makes a fresh channel and waits a short deadline for it to
// connect (ReconnectWorkload); channels with the same target and arguments share their
// connections and with them the backoff, so the fresh one keeps connections of its own.
#ifndef PODPROF_AGENT_WORKLOAD_CHANNEL_H_
#define PODPROF_AGENT_WORKLOAD_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace podprof::agent {

// The most one answer of the workload's runtime metric service may take (a real one answers
// in kilobytes): a larger one fails its call RESOURCE_EXHAUSTED before it is parsed, so that
// no workload's metric service can make the agent allocate what it likes.
inline constexpr int kMaxMetricResponseBytes = 16 << 20;

// The most a capture's Profile answer may take: the workload writes the XSpace to a file (read
// in pieces), so the answer itself is small; one larger fails RESOURCE_EXHAUSTED before it is
// parsed. (The XProf facade's calls pass XProf's own answers through, on the unlimited channel.)
inline constexpr int kMaxCaptureResponseBytes = 64 << 20;

// How long the agent waits for a fresh channel to the workload to connect before it says the
// workload is unreachable, ns: a live profiler on the same host answers in milliseconds.
inline constexpr int64_t kReconnectDeadlineNs = 2'000'000'000;

// How long a heartbeat's check of the workload waits for a fresh channel, ns: shorter, so that
// heartbeats keep their pace while the workload is away.
inline constexpr int64_t kCheckReconnectDeadlineNs = 200'000'000;

// A plaintext channel to a workload's service at `address` (the workload listens on this
// host: its profiler, libtpu's metric service), with no receive limit below protobuf's own: a
// snapshot is one message holding an XSpace, hundreds of MB on a busy TPU host, as XLA's own
// profiler client allows. While the workload is away the channel tries again at most every 5 s
// (gRPC's default grows to 2 min). With `own_connections`, the channel shares no connection (and no
// backoff) with any other, and tries again every 100-250 ms. `max_receive_bytes` lowers the
// receive limit: a message past it fails its call RESOURCE_EXHAUSTED before it is parsed.
std::shared_ptr<grpc::Channel> NewWorkloadChannel(
    const std::string& address, bool own_connections,
    int max_receive_bytes = std::numeric_limits<int32_t>::max());

// A fresh channel to `address` (own connections, receiving at most `max_receive_bytes` a
// message), connected: waits until it is, at most `deadline_ns` on `clock`. On success also ends
// the backoff of `shared` (the channel the agent keeps to the same address; may be null), so that
// its next call connects at once instead of failing until the backoff ends. Unavailable, naming the
// address and the deadline, when it did not connect in time. Thread-safe; blocks the calling
// thread.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ReconnectWorkload(
    const std::string& address, grpc::Channel* shared, Clock& clock, int64_t deadline_ns,
    int max_receive_bytes = std::numeric_limits<int32_t>::max());

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_WORKLOAD_CHANNEL_H_
