// Reads agents' capture streams (podprof.v1.Agent/Capture) on a fixed set of threads, however
// many hosts stream: gRPC's asynchronous API on one completion queue, polled by `threads`
// threads. They bound ingest's share of the CPU by their number, not by a lowered priority:
// they poll gRPC's connections and hold its locks, so a thread the scheduler holds back would
// hold back every thread waiting on those locks (measured: requests of a capture dispatched
// 5 ms apart behind such threads, arriving after the start instant).
//
// Backpressure: a stream's next chunk is asked for only once the last one is handled, and at
// most `max_active` hosts are past their first chunk at a time; the others wait with their
// data in the agents (gRPC flow control holds it there), so the aggregator holds the active
// hosts' captures, not the pod's. A host becomes active when its first chunk arrives, so hosts
// still converting their trace take no slot from those ready to stream.
#ifndef PODPROF_AGGREGATOR_CAPTURE_STREAM_POOL_H_
#define PODPROF_AGGREGATOR_CAPTURE_STREAM_POOL_H_

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/podprof_agent.grpc.pb.h"

namespace podprof::aggregator {

class StreamPool {
 public:
  // One host's stream as its owner sees it. Callbacks run on a pool thread, one at a time for
  // a given stream.
  class Handler {
   public:
    virtual ~Handler() = default;
    // A chunk arrived; what the handler keeps it may move out of `chunk`, which the pool
    // reads the next one into. False cancels the stream; OnDone follows.
    virtual bool OnChunk(podprof::v1::CaptureChunk& chunk) = 0;
    // The stream is over, with gRPC's status. The pool does not touch the handler afterwards.
    virtual void OnDone(const grpc::Status& status) = 0;
  };

  // `threads` <= 0: one per core.
  StreamPool(int threads, int max_active);
  // Every started stream must have ended (OnDone called) before the pool is destroyed.
  ~StreamPool();
  StreamPool(const StreamPool&) = delete;
  StreamPool& operator=(const StreamPool&) = delete;

  // Starts the call; the pool keeps `context` until the stream is over.
  void Start(podprof::v1::Agent::Stub* stub, std::shared_ptr<grpc::ClientContext> context,
             const podprof::v1::CaptureRequest& request, Handler* handler);

  // Hosts past their first chunk now, and the most there have been at once (for tests).
  int active() const;
  int peak_active() const;

 private:
  struct Call;
  void Loop();
  void Handle(Call* call, bool ok);
  // Hands the call's chunk to its handler and asks for the next one (or finishes).
  void Deliver(Call* call);
  void Read(Call* call);
  void Finish(Call* call);

  const int max_active_;
  grpc::CompletionQueue cq_;
  mutable absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  int peak_active_ ABSL_GUARDED_BY(mu_) = 0;
  // Calls holding their first chunk, waiting for a slot.
  std::deque<Call*> parked_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CAPTURE_STREAM_POOL_H_
