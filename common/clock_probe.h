// Clock probes over UDP, the way NTP measures an offset.
//
// The aggregator learns each agent's clock offset from four timestamps: t1 when it sent a probe,
// t2 when the agent received it, t3 when the agent answered, t4 when the answer arrived. The
// true offset lies in [t3 - t4, t2 - t1], and the midpoint is exact when the two directions take
// equally long. Over gRPC they do not: the request pays for waking a server thread and the
// answer for waking the caller, a difference of tens of microseconds that no number of probes
// averages away. A datagram's path is the same kernel code both ways, and reading t2 and t4 from
// the kernel's receive timestamps (SO_TIMESTAMPNS) removes the wake-up of the reader from both,
// so the bias falls to about a microsecond.
//
// Datagram (32 bytes both ways, so an answer is never larger than what provoked it):
//   0  "PPCP"   magic
//   4  u8       version, 1
//   5  u8       kind: 1 probe, 2 answer
//   6  u16      zero
//   8  i64 LE   t1, the prober's clock (echoed in the answer)
//  16  i64 LE   t2, the responder's clock at receipt (0 in a probe)
//  24  i64 LE   t3, the responder's clock when answering (0 in a probe)

#ifndef PODPROF_COMMON_CLOCK_PROBE_H_
#define PODPROF_COMMON_CLOCK_PROBE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace podprof {

inline constexpr size_t kClockProbeSize = 32;

struct ProbeTimes {
  int64_t t1 = 0, t2 = 0, t3 = 0, t4 = 0;
};

// Answers probes on a UDP port until destroyed. Every answer carries `clock`'s time, so an
// agent running on a simulated clock answers on that clock. Datagrams that are not probes are
// dropped without an answer.
class ClockProbeResponder {
 public:
  // Binds `host`:`port` (port 0 picks a free one). `clock` must outlive the responder.
  static absl::StatusOr<std::unique_ptr<ClockProbeResponder>> Start(const std::string& host,
                                                                    int port, Clock& clock);
  ~ClockProbeResponder();
  ClockProbeResponder(const ClockProbeResponder&) = delete;
  ClockProbeResponder& operator=(const ClockProbeResponder&) = delete;

  int port() const { return port_; }
  // Probes answered so far (an answer can still be lost on the way back).
  uint64_t answered() const { return answered_.load(std::memory_order_relaxed); }

 private:
  ClockProbeResponder(int fd, int stop_fd, int port, Clock& clock);
  void Loop();

  const int fd_, stop_fd_, port_;
  Clock& clock_;
  std::atomic<uint64_t> answered_{0};
  std::thread thread_;
};

// Answers probes on many UDP sockets from one thread (epoll), each socket on its own clock: how
// one process emulating many hosts answers for all of them without a thread per host. The
// datagrams and the timestamps are exactly those of ClockProbeResponder.
class MultiClockProbeResponder {
 public:
  struct Endpoint {
    std::string host;
    int port = 0;            // 0 picks a free one
    Clock* clock = nullptr;  // must outlive the responder
  };
  // Binds every endpoint. With `fallback_to_free_port`, an endpoint whose port is taken gets a
  // free one instead (see ports()); without, that is an error naming the endpoint.
  static absl::StatusOr<std::unique_ptr<MultiClockProbeResponder>> Start(
      const std::vector<Endpoint>& endpoints, bool fallback_to_free_port);
  ~MultiClockProbeResponder();
  MultiClockProbeResponder(const MultiClockProbeResponder&) = delete;
  MultiClockProbeResponder& operator=(const MultiClockProbeResponder&) = delete;

  // The bound port of each endpoint, in the order given.
  const std::vector<int>& ports() const { return ports_; }
  uint64_t answered() const { return answered_.load(std::memory_order_relaxed); }

 private:
  MultiClockProbeResponder(int epoll_fd, int stop_fd, std::vector<int> fds,
                           std::vector<Clock*> clocks, std::vector<int> ports);
  void Loop();

  const int epoll_fd_, stop_fd_;
  const std::vector<int> fds_;
  const std::vector<Clock*> clocks_;
  const std::vector<int> ports_;
  std::atomic<uint64_t> answered_{0};
  std::thread thread_;
};

// Sends `count` probes one after another to `host`:`port`, each waiting at most `timeout_ns`
// for its answer, and returns the probes that were answered (possibly none). Fails only when
// the address cannot be resolved or no socket can be made. A lost datagram costs one timeout.
absl::StatusOr<std::vector<ProbeTimes>> ProbeClock(const std::string& host, int port, int count,
                                                   int64_t timeout_ns, Clock& clock);

// The 32-byte datagrams, exposed for tests. Decode returns false for anything else.
std::string EncodeClockProbe(uint8_t kind, int64_t t1, int64_t t2, int64_t t3);
bool DecodeClockProbe(const char* data, size_t size, uint8_t* kind, ProbeTimes* times);

}  // namespace podprof

#endif  // PODPROF_COMMON_CLOCK_PROBE_H_
