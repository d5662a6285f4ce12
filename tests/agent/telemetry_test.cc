// The telemetry sampler against a runtime metric service on loopback, in process, whose
// cumulative distributions the test sets between reads: what one interval's steps and
// collectives come to, read by buffer-size class, across a restart of the runtime's counts, and
// when the runtime does not serve the collective metric at all.
#include "agent/telemetry.h"

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/workload_channel.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "proto/profiler_service.grpc.pb.h"
#include "proto/tpu_metric_names.h"
#include "tests/agent/fake_metric_service.h"

namespace podprof::agent {
namespace {

namespace rt = tpu::monitoring::runtime;

constexpr int64_t kSecondNs = 1'000'000'000;

// A distribution as the runtime keeps one: `count` observations summing to `sum`, counted since
// `start_ns`, under attribute `attribute` = `label`.
struct Served {
  std::string attribute, label;
  int64_t count = 0;
  double sum = 0;
  int64_t start_ns = 0;
};

// The metric `name` holding `values`, as the runtime serves its distributions: a chip's by
// `device_ordinal` in the attribute's key-value list, a size class's by `buffer-size`.
rt::TPUMetric Distributions(const std::string& name, const std::vector<Served>& values) {
  rt::TPUMetric out;
  out.set_name(name);
  for (const Served& v : values) {
    rt::Metric* m = out.add_metrics();
    m->mutable_attribute()->set_key(v.attribute);
    rt::Attribute* a =
        m->mutable_attribute()->mutable_value()->mutable_kvlist_attr()->add_attributes();
    a->set_key(v.attribute == tpu_metrics::kDeviceAttributeKey ? tpu_metrics::kDeviceOrdinalKey
                                                               : tpu_metrics::kBufferSizeKey);
    a->mutable_value()->set_string_attr(v.label);
    m->mutable_start_timestamp()->set_seconds(v.start_ns / kSecondNs);
    m->mutable_start_timestamp()->set_nanos(static_cast<int32_t>(v.start_ns % kSecondNs));
    rt::Distribution* d = m->mutable_distribution();
    d->set_count(v.count);
    d->set_mean(v.count > 0 ? v.sum / static_cast<double>(v.count) : 0);
    d->mutable_bucket_options()->mutable_exponential_buckets()->set_num_finite_buckets(24);
    d->mutable_bucket_options()->mutable_exponential_buckets()->set_growth_factor(2);
    d->mutable_bucket_options()->mutable_exponential_buckets()->set_scale(1);
  }
  return out;
}

class TelemetrySamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two chips, each with one program run so far (a chip appears once a metric names it).
    Programs(1);
  }
  void Programs(int64_t runs) {
    service_.Set(Distributions(tpu_metrics::kProgramTimingUs,
                               {{"device", "0", runs, 90'000.0 * runs, started_},
                                {"device", "1", runs, 90'000.0 * runs, started_}}));
  }
  void Collectives(const std::vector<Served>& classes) {
    service_.Set(Distributions(tpu_metrics::kCollectiveEndToEndUs, classes));
  }
  // One sample a second after the last.
  podprof::v1::TelemetrySample Next(TelemetrySampler& s) {
    clock_.AdvanceNs(kSecondNs);
    return s.Sample();
  }

  // Near the real time: the sampler turns its clock's readings into gRPC deadlines.
  FakeClock clock_{RealClock().NowNs()};
  const int64_t started_ = clock_.NowNs() - 60 * kSecondNs;
  FakeMetricService service_;
  const std::unique_ptr<RuntimeMetrics> metrics_ = service_.Reader(clock_);
};

// A workload's metric service answers as it likes: on the agent's channel an answer past
// kMaxMetricResponseBytes fails its call before it is parsed, and one within is read.
TEST(WorkloadChannelTest, AMetricAnswerPastTheLimitIsRefusedBeforeItIsParsed) {
  FakeMetricService service;
  service.Set(
      Distributions("huge", {{"device", std::string(kMaxMetricResponseBytes + 1, 'x'), 1, 1, 0}}));
  service.Set(Distributions("small", {{"device", "0", 1, 1, 0}}));
  auto stub = rt::RuntimeMetricService::NewStub(
      NewWorkloadChannel(service.address(), /*own_connections=*/false, kMaxMetricResponseBytes));
  for (const char* name : {"huge", "small"}) {
    grpc::ClientContext ctx;
    rt::MetricRequest req;
    req.set_metric_name(name);
    rt::MetricResponse resp;
    const grpc::Status s = stub->GetRuntimeMetric(&ctx, req, &resp);
    if (std::string(name) == "huge") {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    } else {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
  }
}

// A workload's profiler answers a capture's Profile call as it likes; the answer is small (the
// XSpace goes to a file), and on the agent's capture channel one past kMaxCaptureResponseBytes
// fails before it is parsed.
TEST(WorkloadChannelTest, AProfileAnswerPastTheLimitIsRefusedBeforeItIsParsed) {
  class Bloated final : public tensorflow::ProfilerService::Service {
   public:
    grpc::Status Profile(grpc::ServerContext*, const tensorflow::ProfileRequest* req,
                         tensorflow::ProfileResponse* resp) override {
      const int bytes = req->session_id() == "huge" ? kMaxCaptureResponseBytes + 1 : 10;
      resp->add_tool_data()->set_data(std::string(bytes, 'x'));
      return grpc::Status::OK;
    }
  } service;
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.SetMaxSendMessageSize(-1);
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = tensorflow::ProfilerService::NewStub(NewWorkloadChannel(
      absl::StrCat("127.0.0.1:", port), /*own_connections=*/false, kMaxCaptureResponseBytes));
  for (const char* session : {"huge", "small"}) {
    grpc::ClientContext ctx;
    tensorflow::ProfileRequest req;
    req.set_session_id(session);
    tensorflow::ProfileResponse resp;
    const grpc::Status s = stub->Profile(&ctx, req, &resp);
    if (std::string(session) == "huge") {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    } else {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
  }
  server->Shutdown();
}

TEST_F(TelemetrySamplerTest, CollectivesAreTheGrowthOfEverySizeClassOnEveryChip) {
  TelemetrySampler sampler(*metrics_, clock_);
  Collectives(
      {{"megascale", "4MB+", 10, 10'000, started_}, {"megascale", "512B+", 100, 5'000, started_}});
  podprof::v1::TelemetrySample first = Next(sampler);
  ASSERT_EQ(first.chips_size(), 2);
  // Nothing earlier to difference against: none counted, though the metric is there.
  EXPECT_EQ(first.chips(0).collectives(), 0);
  EXPECT_EQ(first.chips(0).collective_mean_us(), 0);

  Programs(11);
  Collectives(
      {{"megascale", "4MB+", 30, 40'000, started_}, {"megascale", "512B+", 100, 5'000, started_}});
  podprof::v1::TelemetrySample second = Next(sampler);
  ASSERT_EQ(second.chips_size(), 2);
  for (const auto& c : second.chips()) {
    EXPECT_EQ(c.steps(), 10) << c.chip();
    // 20 more of 4 MB (30,000 us between them), none of 512 B: the host's, on each chip.
    EXPECT_EQ(c.collectives(), 20) << c.chip();
    EXPECT_DOUBLE_EQ(c.collective_mean_us(), 1'500) << c.chip();
  }
}

TEST_F(TelemetrySamplerTest, ARuntimeThatRestartsItsCountsCountsFromTheRestart) {
  TelemetrySampler sampler(*metrics_, clock_);
  Collectives({{"megascale", "4MB+", 50, 50'000, started_}});
  Next(sampler);
  // Restarted half a second ago, after the last read: everything it holds is new.
  const int64_t restarted = clock_.NowNs() + kSecondNs / 2;
  Collectives({{"megascale", "4MB+", 4, 8'000, restarted}});
  podprof::v1::TelemetrySample after = Next(sampler);
  ASSERT_GT(after.chips_size(), 0);
  EXPECT_EQ(after.chips(0).collectives(), 4);
  EXPECT_DOUBLE_EQ(after.chips(0).collective_mean_us(), 2'000);
  // Read again unchanged: nothing new.
  podprof::v1::TelemetrySample again = Next(sampler);
  EXPECT_EQ(again.chips(0).collectives(), 0);
  EXPECT_EQ(again.chips(0).collective_mean_us(), 0);
  // Restarted before the last read (it was missed): part of it may be counted already, so
  // none of it is; the next read differences it.
  const int64_t missed = clock_.NowNs() - 1;
  Collectives({{"megascale", "4MB+", 6, 6'000, missed}});
  EXPECT_EQ(Next(sampler).chips(0).collectives(), 0);
  Collectives({{"megascale", "4MB+", 9, 12'000, missed}});
  podprof::v1::TelemetrySample next = Next(sampler);
  EXPECT_EQ(next.chips(0).collectives(), 3);
  EXPECT_DOUBLE_EQ(next.chips(0).collective_mean_us(), 2'000);
}

TEST_F(TelemetrySamplerTest, ARuntimeWithoutTheCollectiveMetricReportsNone) {
  TelemetrySampler sampler(*metrics_, clock_);
  Next(sampler);
  Programs(3);
  podprof::v1::TelemetrySample s = Next(sampler);
  ASSERT_EQ(s.chips_size(), 2);
  EXPECT_EQ(s.chips(1).steps(), 2);
  EXPECT_EQ(s.chips(1).collectives(), 0);
  EXPECT_EQ(s.chips(1).collective_mean_us(), -1);
}

}  // namespace
}  // namespace podprof::agent
