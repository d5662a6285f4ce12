// The aggregator's StreamPool over real gRPC on loopback: a bounded number of hosts streaming at
// once (the others held back by flow control), every stream ending exactly once whatever
// happens to it (a refused chunk, an agent gone mid-stream), and nothing left behind.
#include "aggregator/capture/stream_pool.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "proto/podprof_agent.grpc.pb.h"
#include "tests/util/status_matchers.h"

namespace podprof::aggregator {
namespace {

namespace v1 = podprof::v1;

// Agents that stream `chunks` event-block chunks of about 64 KiB each for any Capture call. A
// host named in `die_after` stops after that many chunks by aborting its call (an agent gone).
class StreamingAgents final : public v1::Agent::Service {
 public:
  int chunks = 40;
  std::map<std::string, int> die_after;

  grpc::Status Capture(grpc::ServerContext* ctx, const v1::CaptureRequest* req,
                       grpc::ServerWriter<v1::CaptureChunk>* writer) override {
    v1::CaptureChunk chunk;
    auto* e = chunk.mutable_event_block();
    e->set_line_name("XLA Ops");
    for (int i = 0; i < 8000; ++i) {
      e->add_start_ps(1000);
      e->add_duration_ps(500);
      e->add_kernel_id(1);
      e->add_collective_id(0);
    }
    auto it = die_after.find(req->host_name());
    for (int i = 0; i < chunks; ++i) {
      if (it != die_after.end() && i == it->second) {
        ctx->TryCancel();
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "agent went away");
      }
      if (!writer->Write(chunk)) return grpc::Status::CANCELLED;
    }
    return grpc::Status::OK;
  }
};

// Counts what the pool hands over, and may refuse a chunk.
class Counting final : public StreamPool::Handler {
 public:
  Counting(absl::BlockingCounter& left, int refuse_at = -1) : left_(left), refuse_at_(refuse_at) {}
  bool OnChunk(v1::CaptureChunk&) override { return ++chunks != refuse_at_; }
  void OnDone(const grpc::Status& s) override {
    status = s;
    ++done;
    left_.DecrementCount();
  }
  int chunks = 0;
  std::atomic<int> done{0};
  grpc::Status status;

 private:
  absl::BlockingCounter& left_;
  const int refuse_at_;
};

class StreamPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&agents_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = v1::Agent::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
  }
  void Start(StreamPool& pool, const std::string& host, Counting* handler) {
    auto ctx = std::make_shared<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::CaptureRequest req;
    req.set_capture_id("c");
    req.set_host_name(host);
    pool.Start(stub_.get(), std::move(ctx), req, handler);
  }

  StreamingAgents agents_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

TEST_F(StreamPoolTest, AtMostMaxActiveHostsStreamAndAllComplete) {
  constexpr int kHosts = 12;
  absl::BlockingCounter left(kHosts);
  std::vector<std::unique_ptr<Counting>> handlers;
  {
    StreamPool pool(/*threads=*/2, /*max_active=*/3);
    for (int i = 0; i < kHosts; ++i) {
      handlers.push_back(std::make_unique<Counting>(left));
      Start(pool, absl::StrCat("host-", i), handlers.back().get());
    }
    left.Wait();
    EXPECT_LE(pool.peak_active(), 3);
    EXPECT_GE(pool.peak_active(), 2) << "the pool did stream hosts side by side";
    EXPECT_EQ(pool.active(), 0);
  }
  for (const auto& h : handlers) {
    EXPECT_OK(h->status);
    EXPECT_EQ(h->chunks, agents_.chunks);
    EXPECT_EQ(h->done, 1);
  }
}

TEST_F(StreamPoolTest, AnAgentGoneMidStreamWhileThePoolIsFullLeavesTheOthersWhole) {
  constexpr int kHosts = 8;
  agents_.die_after = {{"host-1", 5}, {"host-6", 0}};
  absl::BlockingCounter left(kHosts);
  std::vector<std::unique_ptr<Counting>> handlers;
  {
    StreamPool pool(2, /*max_active=*/2);
    for (int i = 0; i < kHosts; ++i) {
      // host-3 is refused by its handler at its tenth chunk (a bad chunk): cancelled.
      handlers.push_back(std::make_unique<Counting>(left, i == 3 ? 10 : -1));
      Start(pool, absl::StrCat("host-", i), handlers.back().get());
    }
    left.Wait();
    EXPECT_EQ(pool.active(), 0) << "every slot given back";
  }
  for (int i = 0; i < kHosts; ++i) {
    const Counting& h = *handlers[i];
    EXPECT_EQ(h.done, 1) << "host-" << i;
    if (i == 1) {
      EXPECT_FALSE(h.status.ok());
      EXPECT_EQ(h.chunks, 5);
    } else if (i == 6) {
      EXPECT_FALSE(h.status.ok());
      EXPECT_EQ(h.chunks, 0);
    } else if (i == 3) {
      EXPECT_EQ(h.status.error_code(), grpc::StatusCode::CANCELLED);
      EXPECT_EQ(h.chunks, 10);
    } else {
      EXPECT_OK(h.status) << "host-" << i;
      EXPECT_EQ(h.chunks, agents_.chunks) << "host-" << i;
    }
  }
}

}  // namespace
}  // namespace podprof::aggregator
