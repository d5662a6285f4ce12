// The simulated runtime's `megascale.dcn_transfer_latencies` of a multi-slice job (issue #56,
// sim/dcn_metric.h): each received DCN transfer's transit, cumulative since start-up, served
// per buffer-size class in podprof's bucket layout, with an injected DCN delay in it.
#include "sim/dcn_metric.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gtest/gtest.h"
#include "proto/tpu_metric_names.h"
#include "sim/pod_model.h"
#include "sim/services.h"
#include "sim/sim_host.h"
#include "tests/util/status_matchers.h"

namespace podprof::sim {
namespace {

namespace rt = tpu::monitoring::runtime;

PodConfig Pod(int hosts, int slices, int index = 0) {
  PodConfig c;
  c.generation = "v5e";
  c.chips = 4;
  c.hosts = hosts;
  c.slices = slices;
  c.host_index = index;
  c.pod_seed = 23;
  return c;
}

TEST(DcnMetricTest, BucketsAreExponentialFromTheScale) {
  EXPECT_EQ(DcnLatencyBucket(0.5), 0);
  EXPECT_EQ(DcnLatencyBucket(1), 1);
  EXPECT_EQ(DcnLatencyBucket(1.24), 1);
  EXPECT_EQ(DcnLatencyBucket(1.26), 2);
  // 40 us: 1.25^16 = 35.5, 1.25^17 = 44.4.
  EXPECT_EQ(DcnLatencyBucket(40), 17);
  EXPECT_EQ(DcnLatencyBucket(1e12), kDcnLatencyBuckets + 1);
  EXPECT_EQ(DcnLatencyBucket(std::nan("")), 0);
  EXPECT_EQ(BufferSizeClass(1 << 20), "1MB+");
  EXPECT_EQ(BufferSizeClass(3 << 20), "2MB+");
  EXPECT_EQ(BufferSizeClass(512), "512B+");
}

// The transit is what the schedule says: the data's arrival at the receiver less the moment
// its sender's buffer left (the end of the sender's send-done, where it waited for the buffer).
TEST(DcnMetricTest, TransitIsArrivalLessTheSendersBufferLeaving) {
  PodConfig pod = Pod(4, 2);
  pod.dcn_delays.push_back({1, 300'000, INT64_MIN});
  std::vector<PodModel> hosts;
  for (int h = 0; h < pod.hosts; ++h) {
    PodConfig c = pod;
    c.host_index = h;
    ASSERT_OK_AND_ASSIGN(PodModel m, PodModel::Create(c));
    hosts.push_back(std::move(m));
  }
  const PodModel& m = hosts[0];
  int checked = 0;
  for (int64_t step = 100; step < 104; ++step) {
    const StepSchedule schedule = m.Schedule(step);
    for (int64_t chip = 0; chip < int64_t{pod.hosts} * m.chips(); ++chip) {
      const int64_t src = m.DcnSource(chip);
      const PodModel& sender = hosts[src / m.chips()];
      const ChipStep cs = sender.Step(step, schedule)[src % m.chips()];
      for (int r = 0; r < kDcnRendezvous; ++r) {
        const int64_t transit = m.DcnTransitPs(step, chip, r);
        // 34-46 us of network, and the delayed slice's 300 us on what slice 1 sends.
        const int64_t extra = m.SliceOf(static_cast<int>(src / m.chips())) == 1 ? 300'000'000 : 0;
        EXPECT_GE(transit, 34'000'000 + extra);
        EXPECT_LE(transit, 46'000'000 + extra);
        const OpRun* done = nullptr;
        for (const OpRun& run : cs.runs) {
          const OpTemplate& op = sender.ops()[run.op];
          if (op.dcn == DcnRole::kSendDone && op.rendezvous == r) done = &run;
        }
        ASSERT_NE(done, nullptr);
        // A send-done whose buffer had left before it began lasts its minimum: no instant of
        // leaving to read there.
        if (done->duration_ps <= 1'000'000) continue;
        const int64_t arrival =
            schedule.dcn_arrivals[static_cast<size_t>(chip) * kDcnRendezvous + r];
        EXPECT_EQ(arrival - transit, done->start_ps + done->duration_ps) << chip << " " << r;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 16);
}

TEST(DcnMetricTest, OneSliceHasNone) {
  ASSERT_OK_AND_ASSIGN(PodModel m, PodModel::Create(Pod(2, 1)));
  EXPECT_EQ(m.DcnTransitPs(10, 0, 0), 0);
  DcnLatencyCounter counter(m, 0, 0);
  counter.CountThrough(50);
  EXPECT_TRUE(counter.classes().empty());
}

TEST(DcnMetricTest, CountsEveryReceivedTransferAndTheDelayFromItsStep) {
  PodConfig pod = Pod(4, 2, /*index=*/2);  // a host of slice 1, which receives from slice 0
  // The step period leaves room for a configured delay, whenever it starts.
  pod.dcn_delays.push_back({0, 300'000, INT64_MAX});
  ASSERT_OK_AND_ASSIGN(PodModel probe, PodModel::Create(pod));
  pod.dcn_delays[0].from_ns = 20 * probe.step_period_ns();  // slice 0's link, from step 20
  ASSERT_OK_AND_ASSIGN(PodModel m, PodModel::Create(pod));
  DcnLatencyCounter counter(m, /*counted_through=*/9, /*start_host_ns=*/777);
  counter.CountThrough(19);
  ASSERT_EQ(counter.classes().size(), 1u);
  const DcnLatencyClass before = counter.classes().at("1MB+");
  EXPECT_EQ(before.start_host_ns, 777);
  EXPECT_EQ(before.count, 10 * 4 * kDcnRendezvous);  // steps 10..19, 4 chips, 2 rendezvous
  EXPECT_GE(before.min, 34);
  EXPECT_LE(before.max, 46);
  counter.CountThrough(29);
  const DcnLatencyClass after = counter.classes().at("1MB+");
  EXPECT_EQ(after.count, 20 * 4 * kDcnRendezvous);
  EXPECT_GE(after.max, 334);
  EXPECT_LE(after.max, 346);
  // The delayed half lies in the buckets of 334-346 us (1.25^26 = 330.9 .. 1.25^27 = 413.6).
  EXPECT_EQ(after.buckets[27], 10 * 4 * kDcnRendezvous);
  int64_t total = 0;
  for (int64_t b : after.buckets) total += b;
  EXPECT_EQ(total, after.count);
  // Asked again for steps already counted: nothing changes.
  counter.CountThrough(29);
  EXPECT_EQ(counter.classes().at("1MB+").count, after.count);

  // Slice 0's hosts receive from slice 1, whose link is not delayed.
  PodConfig other = pod;
  other.host_index = 0;
  ASSERT_OK_AND_ASSIGN(PodModel m0, PodModel::Create(other));
  DcnLatencyCounter counter0(m0, 9, 0);
  counter0.CountThrough(29);
  EXPECT_LE(counter0.classes().at("1MB+").max, 46);
}

// Served as tpu-info reads it: kvlist `buffer-size`, exponential buckets, cumulative since a
// start that stays, counts that grow with the steps the host clock passes.
TEST(DcnMetricTest, TheMetricServiceServesItCumulativeForAMultiSliceJob) {
  FakeClock clock(int64_t{1'800'000'000} * 1'000'000'000);
  SimHostOptions options;
  options.pod = Pod(2, 2, /*index=*/1);
  options.host_name = "sim-1";
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SimHost> host, SimHost::Create(options, clock));
  MetricServiceImpl service(host.get());
  auto read = [&] {
    rt::MetricRequest req;
    req.set_metric_name(tpu_metrics::kDcnTransferUs);
    rt::MetricResponse resp;
    grpc::ServerContext ctx;
    EXPECT_TRUE(service.GetRuntimeMetric(&ctx, &req, &resp).ok());
    return resp;
  };
  const int64_t period = host->model().step_period_ns();
  clock.AdvanceNs(10 * period);
  const rt::MetricResponse first = read();
  ASSERT_EQ(first.metric().metrics_size(), 1);
  const rt::Metric& m = first.metric().metrics(0);
  EXPECT_EQ(m.attribute().key(), tpu_metrics::kMegascaleKey);
  ASSERT_EQ(m.attribute().value().kvlist_attr().attributes_size(), 1);
  EXPECT_EQ(m.attribute().value().kvlist_attr().attributes(0).key(), tpu_metrics::kBufferSizeKey);
  EXPECT_EQ(m.attribute().value().kvlist_attr().attributes(0).value().string_attr(), "1MB+");
  const auto& exp = m.distribution().bucket_options().exponential_buckets();
  EXPECT_EQ(exp.num_finite_buckets(), kDcnLatencyBuckets);
  EXPECT_DOUBLE_EQ(exp.growth_factor(), kDcnLatencyGrowth);
  EXPECT_DOUBLE_EQ(exp.scale(), kDcnLatencyScaleUs);
  EXPECT_EQ(m.distribution().bucket_counts_size(), kDcnLatencyBuckets + 2);
  // Steps that ended since start-up: 9 or 10 of them (start-up fell inside a step).
  const int64_t n1 = m.distribution().count();
  EXPECT_GE(n1, 9 * 4 * kDcnRendezvous);
  EXPECT_LE(n1, 10 * 4 * kDcnRendezvous);
  EXPECT_GT(m.distribution().mean(), 34);
  EXPECT_LT(m.distribution().mean(), 46);

  clock.AdvanceNs(5 * period);
  const rt::MetricResponse second = read();
  const rt::Metric& m2 = second.metric().metrics(0);
  EXPECT_EQ(m2.distribution().count(), n1 + 5 * 4 * kDcnRendezvous);
  EXPECT_EQ(m2.start_timestamp().seconds(), m.start_timestamp().seconds());
  EXPECT_EQ(m2.start_timestamp().nanos(), m.start_timestamp().nanos());
  EXPECT_GT(m2.timestamp().seconds() * 1'000'000'000 + m2.timestamp().nanos(),
            m.timestamp().seconds() * 1'000'000'000 + m.timestamp().nanos());
}

TEST(DcnMetricTest, OneSliceKeepsTheCollectivesStandIn) {
  FakeClock clock(int64_t{1'800'000'000} * 1'000'000'000);
  SimHostOptions options;
  options.pod = Pod(1, 1);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<SimHost> host, SimHost::Create(options, clock));
  clock.AdvanceNs(3 * host->model().step_period_ns());
  MetricServiceImpl service(host.get());
  rt::MetricRequest req;
  req.set_metric_name(tpu_metrics::kDcnTransferUs);
  rt::MetricResponse resp;
  grpc::ServerContext ctx;
  ASSERT_TRUE(service.GetRuntimeMetric(&ctx, &req, &resp).ok());
  ASSERT_GT(resp.metric().metrics_size(), 0);
  // The stand-in's layout (1 us x 2^i), not the DCN one.
  EXPECT_DOUBLE_EQ(resp.metric()
                       .metrics(0)
                       .distribution()
                       .bucket_options()
                       .exponential_buckets()
                       .growth_factor(),
                   2);
}

}  // namespace
}  // namespace podprof::sim
