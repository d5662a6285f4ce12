// The agent's one reader of the runtime metric services (agent/runtime_metrics.h) against a fake
// service on loopback (tests/agent/fake_metric_service.h), on a FakeClock: both ways a runtime
// names a chip, the chips a workload holds, the deadline taken on the agent's clock; and what
// the agent asks of the runtime for Info and for a Prometheus scrape.
#include "agent/runtime_metrics.h"

#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_metrics.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "metrics/registry.h"
#include "proto/tpu_metric_names.h"
#include "tests/agent/fake_metric_service.h"
#include "tests/util/status_matchers.h"

namespace podprof::agent {
namespace {

std::vector<std::pair<int, double>> Values(const std::vector<ChipValue>& in) {
  std::vector<std::pair<int, double>> out;
  for (const ChipValue& v : in) out.emplace_back(v.chip, v.value);
  return out;
}

class RuntimeMetricsTest : public ::testing::Test {
 protected:
  // The reader turns its clock's readings into gRPC deadlines: a clock set in 2096 gives
  // deadlines no test outlives, one set in 2023 deadlines long past, whatever the real time.
  static constexpr int64_t kAhead = 4'000'000'000LL * 1'000'000'000;
  static constexpr int64_t kLongAgo = 1'700'000'000LL * 1'000'000'000;
  FakeClock clock_{kAhead};
  FakeMetricService service_;
  const std::unique_ptr<RuntimeMetrics> metrics_ = service_.Reader(clock_);
};

TEST_F(RuntimeMetricsTest, AGaugeNamesItsChipEitherWayTheRuntimeNamesIt) {
  const std::vector<std::pair<int, double>> served = {{2, 40.5}, {5, 7}};
  for (ChipNaming naming :
       {ChipNaming::kIntAttr, ChipNaming::kOrdinalString, ChipNaming::kOrdinalInt}) {
    service_.Set(GaugeOf(tpu_metrics::kQueueSize, served, naming));
    ASSERT_OK_AND_ASSIGN(std::vector<ChipValue> read,
                         metrics_->ReadGauge(0, tpu_metrics::kQueueSize));
    EXPECT_EQ(Values(read), served) << static_cast<int>(naming);
  }
  // Scaled as the caller asks (a percentage as a ratio).
  service_.Set(GaugeOf(tpu_metrics::kDutyCyclePercent, {{1, 50}}));
  ASSERT_OK_AND_ASSIGN(std::vector<ChipValue> ratio,
                       metrics_->ReadGauge(0, tpu_metrics::kDutyCyclePercent, 0.01));
  EXPECT_EQ(Values(ratio), (std::vector<std::pair<int, double>>{{1, 0.5}}));
}

TEST_F(RuntimeMetricsTest, AMetricTheRuntimeDoesNotKeepIsNotFound) {
  absl::StatusOr<std::vector<ChipValue>> none = metrics_->ReadGauge(0, tpu_metrics::kIdleSeconds);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
}

TEST_F(RuntimeMetricsTest, TheChipsAreThoseWithHbmOnEveryServiceEachOnce) {
  FakeMetricService other;
  service_.Set(GaugeOf(tpu_metrics::kHbmTotalBytes, {{0, 1e9}, {1, 1e9}}));
  other.Set(GaugeOf(tpu_metrics::kHbmTotalBytes, {{1, 1e9}, {3, 1e9}}));
  FakeMetricService silent;  // serves no HBM: adds none
  std::unique_ptr<RuntimeMetrics> three =
      RuntimeMetrics::Dial({service_.address(), other.address(), silent.address()}, clock_);
  EXPECT_EQ(three->Chips(), (std::vector<int>{0, 1, 3}));
}

TEST_F(RuntimeMetricsTest, TheDeadlineIsTakenOnTheAgentsClock) {
  service_.Set(GaugeOf(tpu_metrics::kHbmUsageBytes, {{0, 1}}));
  ASSERT_OK(metrics_->Read(0, tpu_metrics::kHbmUsageBytes).status());
  // The agent's clock in the past: the call's deadline passed before it was made.
  clock_.SetNs(kLongAgo);
  EXPECT_EQ(metrics_->Read(0, tpu_metrics::kHbmUsageBytes).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(metrics_->Check(0).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

// An agent on no sysfs whose workload serves runtime metrics (and whose "profiler" is the same
// fake, which answers Monitor UNIMPLEMENTED: reachable).
class AgentOverMetricsTest : public RuntimeMetricsTest {
 protected:
  void SetUp() override {
    service_.Set(GaugeOf(tpu_metrics::kHbmTotalBytes, {{0, 1e9}, {1, 1e9}}));
    service_.Set(GaugeOf(tpu_metrics::kHbmUsageBytes, {{0, 100}, {1, 200}}));
    service_.Set(GaugeOf(tpu_metrics::kDutyCyclePercent, {{0, 50}, {1, 25}}));
    AgentConfig c;
    c.workload_profiler = {service_.address()};
    c.workload_metrics = {service_.address()};
    c.sysfs_root = "/nonexistent/podprof-no-sysfs";
    ASSERT_OK_AND_ASSIGN(agent_, Agent::Create(c, clock_));
  }
  std::unique_ptr<Agent> agent_;
};

// Regression: HostInfo() asked the runtime for its chips whenever none were known, and a
// Prometheus scrape reads it; learning them is a step of its own now.
TEST_F(AgentOverMetricsTest, HostInfoMakesNoCallAndLearningTheChipsIsAStepOfItsOwn) {
  EXPECT_EQ(agent_->HostInfo().chips_size(), 0);
  EXPECT_EQ(service_.calls(), 0);
  agent_->LearnChipsFromMetrics();
  EXPECT_EQ(service_.calls(), 1);
  ASSERT_EQ(agent_->HostInfo().chips_size(), 2);
  EXPECT_EQ(agent_->HostInfo().chips(1).ordinal(), 1);
  // Known now: no more calls.
  agent_->LearnChipsFromMetrics();
  EXPECT_EQ(service_.calls(), 1);
}

TEST_F(AgentOverMetricsTest, AScrapeAsksTheRuntimeForItsGaugesAndWhetherItAnswersOnly) {
  metrics::Registry registry;
  AddAgentMetrics(registry, *agent_);
  const std::string text = registry.Render();
  // Duty cycle and HBM in use, and the service check (ListSupportedMetrics): not the chips.
  EXPECT_EQ(service_.calls(), 3);
  EXPECT_NE(text.find("podprof_agent_chips 0"), std::string::npos) << text;
  EXPECT_NE(text.find("podprof_tpu_duty_cycle_ratio{chip=\"1\"} 0.25"), std::string::npos) << text;
  EXPECT_NE(text.find("podprof_tpu_hbm_used_bytes{chip=\"1\"} 200"), std::string::npos) << text;
  EXPECT_NE(text.find("podprof_agent_workload_up{service=\"runtime_metrics\""), std::string::npos)
      << text;
}

}  // namespace
}  // namespace podprof::agent
