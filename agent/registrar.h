// The agent's registration with the aggregator and its heartbeats, on the daemon lifecycle's
// thread.
#ifndef PODPROF_AGENT_REGISTRAR_H_
#define PODPROF_AGENT_REGISTRAR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "agent/agent.h"
#include "proto/podprof_aggregator.grpc.pb.h"

namespace podprof::agent {

// Registration with the aggregator: Register until it works, then Heartbeat; the caller's
// timer calls Tick() and waits the delay it returns.
class Registrar {
 public:
  Registrar(Agent* agent, std::unique_ptr<podprof::v1::Aggregator::StubInterface> stub,
            std::string address)
      : agent_(agent), stub_(std::move(stub)), address_(std::move(address)) {}
  // One registration or heartbeat attempt; returns ns until the next one (the interval, or a
  // doubling backoff capped at heartbeat.max_backoff while the aggregator is away).
  int64_t Tick();
  bool registered() const { return registered_; }
  // What Tick() returns while refused: it only looks whether Retry() was called, and a reload
  // ticks at once anyway.
  static constexpr int64_t kRefusedWaitNs = int64_t{3600} * 1'000'000'000;
  // Lets the next Tick() ask again after a refusal (called on reload).
  void Retry() { retry_.store(true); }

 private:
  Agent* const agent_;
  std::unique_ptr<podprof::v1::Aggregator::StubInterface> stub_;
  const std::string address_;
  // The address this agent registered, repeated in heartbeats.
  std::string registered_address_;
  bool registered_ = false;
  // The aggregator answered PERMISSION_DENIED: a lasting answer, so no more attempts until a
  // reload sets retry_ (from the lifecycle's thread, as Tick runs on it too; atomic anyway).
  bool refused_ = false;
  std::atomic<bool> retry_{false};
  int64_t backoff_ns_ = 0;
  int64_t aggregator_interval_ns_ = 0;
};

// Next retry delay: double the last one (starting at 1 s), never above `max_ns`.
int64_t NextBackoffNs(int64_t last_ns, int64_t max_ns);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_REGISTRAR_H_
