// The agent's registration and heartbeats (agent/registrar.h) against an in-process
// aggregator on loopback: what they carry of the workload, and their pace.
#include "agent/registrar.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "tests/util/status_matchers.h"

namespace podprof::agent {
namespace {

namespace v1 = podprof::v1;

// The real wall clock (gRPC's deadlines come from it) with a monotonic clock that moves
// `step_ns` at every read, as if each stretch between two reads took that long.
class SteppingClock final : public Clock {
 public:
  explicit SteppingClock(int64_t step_ns) : step_ns_(step_ns) {}
  int64_t NowNs() override { return real_.NowNs(); }
  int64_t MonotonicNs() override { return mono_.fetch_add(step_ns_) + step_ns_; }
  bool SleepUntilNs(int64_t wall_ns, absl::Notification* cancel) override {
    return real_.SleepUntilNs(wall_ns, cancel);
  }

 private:
  RealClock real_;
  const int64_t step_ns_;
  std::atomic<int64_t> mono_{0};
};

// Registers and heartbeats every agent, asking for a heartbeat every second.
class OneSecondAggregator final : public v1::Aggregator::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest*,
                        v1::RegisterResponse* resp) override {
    resp->set_heartbeat_interval_ms(1000);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*,
                         v1::HeartbeatResponse* resp) override {
    resp->set_heartbeat_interval_ms(1000);
    return grpc::Status::OK;
  }
};

// The workload check before each heartbeat takes time while the workload is away (a fresh
// channel is given 200 ms to connect): the wait for the next heartbeat gives it back, so the
// aggregator hears the agent at its interval and does not see it go stale.
TEST(RegistrarTest, TheWaitForTheNextHeartbeatGivesBackTheWorkloadChecksTime) {
  OneSecondAggregator service;
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);

  AgentConfig config;
  config.host_name = "host-a";
  config.sysfs_root = "/nonexistent";
  config.workload_profiler = {"127.0.0.1:1"};  // away
  config.workload_metrics = {};
  SteppingClock clock(300'000'000);  // the check "takes" 300 ms
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::Create(config, clock);
  ASSERT_OK(agent);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  Registrar registrar(
      agent->get(),
      v1::Aggregator::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
      address);
  EXPECT_EQ(registrar.Tick(), 700'000'000);  // registered
  ASSERT_TRUE(registrar.registered());
  EXPECT_EQ(registrar.Tick(), 700'000'000);  // a heartbeat
  server->Shutdown(std::chrono::system_clock::now());
}

}  // namespace
}  // namespace podprof::agent
