// podprof.v1.Agent for every emulated host at once, on gRPC's callback API: one server listens
// on every host's port, and a capture stream costs no thread while it waits for its window or
// for the aggregator to read it.
//
// A capture goes through three stages: the window (a timer on the service's one scheduler
// thread, at the true instant the host's clock reaches the window's end), generation (a few
// generator threads, first come first served), and writing (gRPC's own threads, one chunk
// after the other). At most `max_streaming` hosts hold generated chunks at a time. A host sends
// nothing, not even its first chunk, until it is generated; the aggregator only waits on hosts
// whose first chunk arrived, so it is never left waiting on one that cannot be generated for
// want of a slot.
#ifndef PODPROF_LOADGEN_FLEET_SERVICE_H_
#define PODPROF_LOADGEN_FLEET_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "loadgen/capture_source.h"
#include "loadgen/emulated_host.h"
#include "proto/podprof_agent.grpc.pb.h"

namespace podprof::loadgen {

struct FleetLimits {
  // Threads generating captures.
  int generator_threads = 2;
  // Hosts holding generated chunks at once (generated, not yet all written).
  int max_streaming = 128;
  // The emulated agents' own chunk limit; a request's max_chunk_bytes can only lower it.
  size_t max_chunk_bytes = 4 << 20;
  // A start further ahead than this is refused (every wait has an end).
  int64_t max_start_ahead_ns = 3'600'000'000'000;
};

// Handlers run on gRPC's threads; the scheduler and generators on the service's own. Shared
// state is guarded by mu_. Must outlive the grpc::Server it is registered with, and Stop()
// must be called before that server shuts down.
class FleetService final : public podprof::v1::Agent::CallbackService {
 public:
  // `hosts`, `source` and `truth` must outlive the service. Calls are refused until Attach().
  FleetService(std::vector<EmulatedHost*> hosts, CaptureSource& source, Clock& truth,
               FleetLimits limits);
  ~FleetService() override;
  FleetService(const FleetService&) = delete;
  FleetService& operator=(const FleetService&) = delete;

  // Serves the hosts once their ports are known (the server has started): `infos` are their
  // descriptions, in the order of `hosts`. Call once.
  void Attach(std::vector<podprof::v1::HostInfo> infos);

  // Refuses new captures, ends those not yet streaming with UNAVAILABLE and joins the threads.
  // Streams already writing go on until the server's shutdown cancels them. Idempotent.
  void Stop();

  grpc::ServerWriteReactor<podprof::v1::CaptureChunk>* Capture(
      grpc::CallbackServerContext* context, const podprof::v1::CaptureRequest* request) override;
  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context,
                                 const podprof::v1::PingRequest* request,
                                 podprof::v1::PingResponse* response) override;
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context,
                                 const podprof::v1::InfoRequest* request,
                                 podprof::v1::InfoResponse* response) override;

  // Captures streamed to the end, and failed or cancelled, so far.
  uint64_t captures_delivered() const { return delivered_.load(); }
  uint64_t captures_failed() const { return failed_.load(); }

 private:
  class CaptureStream;
  // The host a call is for: by name when the request names one, else by the port the caller
  // dialled (the call's authority). -1 when none, or before Attach().
  int FindHost(const std::string& name, grpc::string_ref authority);
  // The host a unary call was addressed to (by the address it reached), or -1 with the call
  // already finished with FAILED_PRECONDITION.
  int HostCalled(grpc::CallbackServerContext* context, grpc::ServerUnaryReactor* reactor);
  void SchedulerLoop();
  void GeneratorLoop();
  void ReleaseSlot();

  const std::vector<EmulatedHost*> hosts_;
  CaptureSource& source_;
  Clock& truth_;
  const FleetLimits limits_;
  std::atomic<uint64_t> delivered_{0}, failed_{0};

  absl::Mutex mu_;
  // Signalled whenever any of the state below changes.
  absl::CondVar changed_;
  // Guarded by mu_. The hosts' descriptions and indexes, set by Attach().
  std::vector<podprof::v1::HostInfo> infos_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> by_name_ ABSL_GUARDED_BY(mu_);
  std::map<int, int> by_port_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Waiting for their window to end, by the true instant it ends.
  std::multimap<int64_t, std::shared_ptr<CaptureStream>> windows_ ABSL_GUARDED_BY(mu_);
  // Windows over, in the order they ended: waiting for a generator and a slot.
  std::deque<std::shared_ptr<CaptureStream>> ready_ ABSL_GUARDED_BY(mu_);
  int streaming_ ABSL_GUARDED_BY(mu_) = 0;

  std::vector<std::thread> threads_;
};

}  // namespace podprof::loadgen

#endif  // PODPROF_LOADGEN_FLEET_SERVICE_H_
