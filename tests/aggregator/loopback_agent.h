// An agent's gRPC surface on loopback, in process, for the aggregator's unit tests: it answers
// clock probes (Ping) with its own clock `offset_ns` ahead of a given Clock, and holds every
// Capture call open, sending nothing, until the caller cancels it or the test releases it.
#ifndef PODPROF_TESTS_AGGREGATOR_LOOPBACK_AGENT_H_
#define PODPROF_TESTS_AGGREGATOR_LOOPBACK_AGENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "proto/podprof_agent.grpc.pb.h"

namespace podprof::testing {

class LoopbackAgent final : public podprof::v1::Agent::Service {
 public:
  // `clock` must outlive the agent.
  LoopbackAgent(Clock& clock, int64_t offset_ns) : clock_(clock), offset_ns_(offset_ns) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~LoopbackAgent() override {
    release_ = true;
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
      server_->Wait();  // every handler has returned: none reads a member after this
    }
  }

  bool started() const { return server_ != nullptr; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  // Capture calls received, and those that ended because the caller cancelled them.
  int captures() const { return captures_; }
  int cancelled() const { return cancelled_; }
  // The options of the last Capture call received.
  podprof::v1::CaptureOptions last_options() {
    absl::MutexLock lock(&mu_);
    return last_options_;
  }
  // The start instant (its own clock) of the last Capture call received.
  int64_t last_start_ns() const { return last_start_ns_; }
  // Ends every held Capture call with OK (no chunks: the aggregator finds no trailer).
  void Release() { release_ = true; }

  grpc::Status Ping(grpc::ServerContext*, const podprof::v1::PingRequest* req,
                    podprof::v1::PingResponse* resp) override {
    resp->set_client_send_ns(req->client_send_ns());
    resp->set_agent_receive_ns(clock_.NowNs() + offset_ns_);
    resp->set_agent_send_ns(clock_.NowNs() + offset_ns_);
    return grpc::Status::OK;
  }

  grpc::Status Capture(grpc::ServerContext* ctx, const podprof::v1::CaptureRequest* req,
                       grpc::ServerWriter<podprof::v1::CaptureChunk>*) override {
    {
      absl::MutexLock lock(&mu_);
      last_options_ = req->options();
    }
    last_start_ns_ = req->start_ns();
    ++captures_;
    // Polls: a held call has nothing to wait on but its own cancellation.
    while (!release_) {
      if (ctx->IsCancelled()) {
        ++cancelled_;
        return grpc::Status::CANCELLED;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return grpc::Status::OK;
  }

 private:
  Clock& clock_;
  const int64_t offset_ns_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> captures_{0};
  std::atomic<int> cancelled_{0};
  std::atomic<int64_t> last_start_ns_{0};
  absl::Mutex mu_;
  podprof::v1::CaptureOptions last_options_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> release_{false};
};

}  // namespace podprof::testing

#endif  // PODPROF_TESTS_AGGREGATOR_LOOPBACK_AGENT_H_
