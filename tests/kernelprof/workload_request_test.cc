// The options arriving at a workload exactly as sent: a test workload on loopback records the
// ProfileRequest it receives, from a podprof capture (the agent's CaptureRunner) and from an
// XProf client through the agent's facade.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "agent/capture_runner.h"
#include "agent/profiler_proxy.h"
#include "common/clock.h"
#include "google/protobuf/util/message_differencer.h"
#include "kernelprof/options.h"
#include "proto/profiler_service.grpc.pb.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

using google::protobuf::util::MessageDifferencer;
using Value = tensorflow::ProfileOptions::AdvancedConfigValue;

// A workload's profiler that records each request and captures nothing (an empty trace).
class RecordingProfiler final : public tensorflow::ProfilerService::Service {
 public:
  grpc::Status Profile(grpc::ServerContext*, const tensorflow::ProfileRequest* req,
                       tensorflow::ProfileResponse* resp) override {
    absl::MutexLock lock(&mu_);
    last_ = *req;
    resp->set_empty_trace(true);
    return grpc::Status::OK;
  }
  std::optional<tensorflow::ProfileRequest> last() {
    absl::MutexLock lock(&mu_);
    return last_;
  }

 private:
  absl::Mutex mu_;
  std::optional<tensorflow::ProfileRequest> last_ ABSL_GUARDED_BY(mu_);
};

// A gRPC server on a loopback port for `service`.
struct Loopback {
  explicit Loopback(grpc::Service* service) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(service);
    server = b.BuildAndStart();
  }
  ~Loopback() { server->Shutdown(std::chrono::system_clock::now()); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

class NullSink final : public stream::ChunkSink {
 public:
  bool Write(const v1::CaptureChunk&) override { return true; }
};

class WorkloadRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agent::AgentConfig config;
    config.workload_profiler = {workload_.address()};
    config.workload_metrics = {};
    config.sysfs_root = "/nonexistent-podprof-sysfs";
    // Where the XProf client of the facade test writes (the facade allows only such folders).
    config.xprof_allowed_roots = {"/tmp/xprof-client"};
    absl::StatusOr<std::unique_ptr<agent::Agent>> a = agent::Agent::Create(config, clock_);
    ASSERT_OK(a);
    agent_ = std::move(*a);
  }

  // Runs a podprof capture with `options` through the agent's runner; returns its status.
  absl::Status Run(const v1::CaptureOptions& options) {
    v1::CaptureRequest req;
    req.set_capture_id("cap-kernelprof");
    req.set_duration_ms(10);
    *req.mutable_options() = options;
    agent::CaptureRunner runner(clock_, agent_->workload());
    NullSink sink;
    agent::CaptureOutcome outcome;
    return runner.Run(req, v1::HostInfo(), agent::RunnerLimits(), nullptr, &sink, &outcome);
  }

  // Runs a capture with `options`; returns what the workload received.
  tensorflow::ProfileRequest Capture(const v1::CaptureOptions& options) {
    absl::Status s = Run(options);
    // The recording workload captures nothing, so the run ends there.
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    std::optional<tensorflow::ProfileRequest> got = profiler_.last();
    EXPECT_TRUE(got.has_value());
    return got.value_or(tensorflow::ProfileRequest());
  }

  // Wall time from the real clock at the start, so that gRPC deadlines are real ones.
  FakeClock clock_{absl::GetCurrentTimeNanos()};
  RecordingProfiler profiler_;
  Loopback workload_{&profiler_};
  std::unique_ptr<agent::Agent> agent_;
};

TEST_F(WorkloadRequestTest, KernelProfilingOptionsArriveExactlyAsSent) {
  v1::CaptureOptions options;
  options.set_kernel_profiling(true);
  options.set_counter_interval_ns(1000);
  options.add_counter_sets("TC_MEMORY");
  ASSERT_OK(kernelprof::ParseCountersFlag("tc:10,11,56", &options));
  ASSERT_OK(kernelprof::ParseCountersFlag("icr:2", &options));
  ASSERT_OK(kernelprof::ParseProfilerOptionFlag("tpu_power_trace_level=2", &options));
  options.set_python_tracer_level(1);
  const tensorflow::ProfileRequest got = Capture(options);

  tensorflow::ProfileOptions want;
  auto& config = *want.mutable_advanced_configuration();
  config["tpu_enable_periodic_counter_sampling"].set_bool_value(true);
  // The set goes by name (the workload adds its indices to tc's own), as XProf documents it.
  config["tpu_perf_counter_sets"].set_string_value("TC_MEMORY");
  config["tpu_tc_perf_counter_sampling_options"].set_string_value(
      "interval_us:1 scaling:0 counter_size_bits:3 indices:10 indices:11 indices:56");
  config["tpu_icr_perf_counter_sampling_options"].set_string_value(
      "interval_us:1 scaling:0 counter_size_bits:3 indices:2");
  config["tpu_power_trace_level"].set_int64_value(2);
  // Compare the maps entry by entry: their order on the wire is not defined.
  ASSERT_EQ(got.opts().advanced_configuration().size(), config.size());
  for (const auto& [key, value] : config) {
    auto it = got.opts().advanced_configuration().find(key);
    ASSERT_NE(it, got.opts().advanced_configuration().end()) << key;
    EXPECT_TRUE(MessageDifferencer::Equals(it->second, value))
        << key << ": " << it->second.ShortDebugString();
  }
  EXPECT_EQ(got.opts().device_tracer_level(), 1u);
  EXPECT_EQ(got.opts().python_tracer_level(), 1u);
}

TEST_F(WorkloadRequestTest, WithoutKernelProfilingTheRequestIsAsBefore) {
  const tensorflow::ProfileRequest got = Capture(v1::CaptureOptions());
  EXPECT_TRUE(got.opts().advanced_configuration().empty());
  EXPECT_EQ(got.opts().device_tracer_level(), 1u);
  EXPECT_EQ(got.opts().python_tracer_level(), 0u);
  EXPECT_EQ(got.opts().host_tracer_level(), 2u);
  EXPECT_EQ(got.opts().version(), 1u);
  EXPECT_EQ(got.opts().device_type(), tensorflow::ProfileOptions::UNSPECIFIED);
  EXPECT_TRUE(got.opts().enable_hlo_proto());
}

TEST_F(WorkloadRequestTest, AnInvalidRequestNeverReachesTheWorkload) {
  v1::CaptureOptions options;
  options.set_kernel_profiling(true);
  options.set_counter_interval_ns(500);
  absl::Status s = Run(options);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_FALSE(profiler_.last().has_value());
}

TEST_F(WorkloadRequestTest, XprofFacadePassesAClientsOptionsThroughUnchanged) {
  agent::ProfilerProxy proxy(agent_.get(), /*mutual_tls=*/false, /*refusals=*/nullptr);
  Loopback facade(&proxy);
  auto stub = tensorflow::ProfilerService::NewStub(
      grpc::CreateChannel(facade.address(), grpc::InsecureChannelCredentials()));
  tensorflow::ProfileRequest sent;
  sent.set_repository_root("/tmp/xprof-client");
  sent.set_session_id("2026_01_02_03_04_05");
  sent.set_host_name("10.1.2.3:7102");
  sent.set_duration_ms(100);
  auto* opts = sent.mutable_opts();
  opts->set_version(1);
  opts->set_duration_ms(100);
  opts->set_device_tracer_level(1);
  opts->set_python_tracer_level(1);
  opts->set_host_tracer_level(3);
  auto& config = *opts->mutable_advanced_configuration();
  config["tpu_enable_periodic_counter_sampling"].set_bool_value(true);
  config["tpu_sctd_perf_counter_sampling_options"].set_string_value(
      "is_external_trigger:true scaling:0 counter_size_bits:1 indices:7");
  config["tpu_power_trace_level"].set_int64_value(1);
  // Even keys podprof would refuse from its own users are the client's business.
  config["some_future_option"].set_string_value("x");
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  tensorflow::ProfileResponse resp;
  grpc::Status st = stub->Profile(&ctx, sent, &resp);
  ASSERT_OK(st);
  EXPECT_TRUE(resp.empty_trace());
  std::optional<tensorflow::ProfileRequest> got = profiler_.last();
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(MessageDifferencer::Equals(*got, sent))
      << "sent " << sent.ShortDebugString() << "\ngot  " << got->ShortDebugString();
}

}  // namespace
}  // namespace podprof
