// The DCN trigger (issue #56): a multi-slice host's DCN transfer latency p50 against its own
// baseline, on the telemetry hub as agents feed it and through the trigger loop's gate on a
// fake clock: a regression fires once naming the host and its slice, noise and a short spike do
// not, a recovered link re-arms; and the hub keeps the DCN figures per host and in its roll-ups.
#include <cstdint>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "aggregator/recorder/telemetry.h"
#include "aggregator/recorder/triggers.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/util/status_matchers.h"

namespace podprof::aggregator {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kT0 = 1'800'000'000 * kS;

// One second `s` of host `host` (2 chips, healthy steps) whose DCN transfers had p50 `p50_us`
// (p99 1.2x), as its agent reports it: the same DCN figures on each chip.
podprof::v1::ReportTelemetryRequest Report(const std::string& host, int64_t s, double p50_us,
                                           int64_t transfers = 800) {
  podprof::v1::ReportTelemetryRequest r;
  r.set_host_name(host);
  r.set_sent_ns(kT0 + s * kS + 200'000'000);
  podprof::v1::TelemetrySample* sample = r.add_samples();
  sample->set_time_ns(kT0 + s * kS + 100'000'000);
  sample->set_interval_ns(kS);
  for (int c = 0; c < 2; ++c) {
    podprof::v1::ChipTelemetry* t = sample->add_chips();
    t->set_chip(c);
    t->set_steps(100);
    t->set_step_mean_us(9'000);
    t->set_step_max_us(9'100);
    t->set_duty_cycle_percent(80);
    t->set_hbm_used_bytes(1 << 30);
    t->set_queued(1);
    t->set_collective_mean_us(-1);
    t->set_dcn_transfers(transfers);
    t->set_dcn_latency_p50_us(transfers > 0 ? p50_us : -1);
    t->set_dcn_latency_p99_us(transfers > 0 ? p50_us * 1.2 : -1);
  }
  return r;
}

TriggerOptions Options() {
  TriggerOptions o;
  o.recent_s = 5;
  o.baseline_s = 20;
  o.dcn_intervals = 4;
  return o;
}

// Four hosts, two slices; `p50(s, host)` gives each host's second.
class DcnTriggerTest : public ::testing::Test {
 protected:
  template <typename P50>
  void Feed(int64_t from, int64_t to, P50 p50) {
    for (int64_t s = from; s < to; ++s) {
      for (int h = 0; h < 4; ++h) {
        hub_.Ingest(Report("host-" + std::to_string(h), s, p50(s, h)), kT0 + s * kS + 200'000'000,
                    /*slice=*/h / 2);
      }
      EXPECT_OK(hub_.Flush(kT0 + (s + 2) * kS));
    }
  }
  std::vector<Firing> Holding(int64_t s) {
    std::vector<Firing> out;
    for (Firing& f : Evaluate(hub_.PodHistory(), hub_.ChipHistory(kT0 + (s - 5) * kS), options_,
                              hub_.DcnHistory(kT0 + (s - 40) * kS))) {
      if (f.trigger == "dcn") out.push_back(std::move(f));
    }
    return out;
  }
  // 40 us with a few percent of noise.
  static double Healthy(int64_t s, int h) { return 40 + 2 * ((s * 7 + h * 3) % 5) - 4; }

  TriggerOptions options_ = Options();
  TelemetryHub hub_{nullptr, TelemetryOptions{}};
};

TEST_F(DcnTriggerTest, AHealthyJobAndNoiseFireNothing) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(-0.25, 0.25);  // +-25%, every second
  Feed(0, 60, [&](int64_t, int) { return 40 * (1 + noise(rng)); });
  EXPECT_THAT(Holding(61), ::testing::IsEmpty());
  // A spike shorter than dcn_intervals (3 of 4 samples) does not fire either.
  Feed(60, 63, [](int64_t, int h) { return h == 2 ? 400.0 : 40.0; });
  EXPECT_THAT(Holding(64), ::testing::IsEmpty());
  Feed(63, 80, [](int64_t s, int h) { return Healthy(s, h); });
  // Nor does a rise past the factor that stays under the margin: 10 us to 25 us.
  Feed(80, 110, [](int64_t s, int h) { return h == 1 && s >= 100 ? 25.0 : 10.0; });
  EXPECT_THAT(Holding(111), ::testing::IsEmpty());
}

TEST_F(DcnTriggerTest, ASlowerLinkIntoASliceNamesItsHostsAndFigures) {
  Feed(0, 30, Healthy);
  // From second 30 the link into slice 1 (hosts 2 and 3) carries 300 us more.
  Feed(30, 33, [](int64_t s, int h) { return Healthy(s, h) + (h >= 2 ? 300 : 0); });
  EXPECT_THAT(Holding(34), ::testing::IsEmpty());  // 3 samples of 4
  Feed(33, 34, [](int64_t s, int h) { return Healthy(s, h) + (h >= 2 ? 300 : 0); });
  const std::vector<Firing> f = Holding(35);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_THAT(f[0].reason, ::testing::HasSubstr("(slice 1)"));
  EXPECT_THAT(f[0].reason, ::testing::HasSubstr("2 hosts regressed (slices 1)"));
  EXPECT_EQ(f[0].evidence["slice"], 1);
  EXPECT_THAT(f[0].evidence["host"].get<std::string>(), ::testing::AnyOf("host-2", "host-3"));
  EXPECT_NEAR(f[0].evidence["recent_p50_us"].get<double>(), 340, 5);
  EXPECT_NEAR(f[0].evidence["baseline_p50_us"].get<double>(), 40, 5);
  EXPECT_GT(f[0].evidence["ratio"].get<double>(), 7);
  EXPECT_EQ(f[0].evidence["hosts"].size(), 2u);
  EXPECT_EQ(f[0].evidence["slices"], nlohmann::json::array({1}));
  EXPECT_EQ(f[0].evidence["recent"].size(), 4u);
  EXPECT_EQ(f[0].evidence.dump().size() < 4096, true);
}

// Through the loop's gate: one snapshot while the link stays slow (its baseline takes the new
// level in after `baseline` seconds, and the cooldown refuses it meanwhile), none while it is
// healthy again, and a second one when it slows again past the cooldown.
TEST(DcnTriggerLoopTest, FiresOnceThenReArmsAfterTheLinkRecovers) {
  FakeClock clock(kT0);
  TelemetryHub hub(nullptr, TelemetryOptions{});
  TriggerOptions o = Options();
  o.cooldown_ns = 60 * kS;
  o.min_gap_ns = 10 * kS;
  std::vector<Firing> taken;
  TriggerLoop loop(
      &hub, clock, o,
      [&](const Firing& f) -> absl::StatusOr<std::string> {
        taken.push_back(f);
        return "cap-" + std::to_string(taken.size());
      },
      /*run_thread=*/false);
  auto run = [&](int64_t from, int64_t to, double slow_p50) {
    for (int64_t s = from; s < to; ++s) {
      for (int h = 0; h < 2; ++h) {
        hub.Ingest(Report("host-" + std::to_string(h), s, h == 1 ? slow_p50 : 40), kT0 + s * kS,
                   /*slice=*/h);
      }
      clock.SetNs(kT0 + (s + 2) * kS);
      loop.Tick(clock.NowNs());
    }
  };
  run(0, 30, 40);
  EXPECT_TRUE(taken.empty());
  run(30, 70, 340);  // slow for 40 s
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].trigger, "dcn");
  EXPECT_EQ(taken[0].evidence["host"], "host-1");
  EXPECT_EQ(taken[0].evidence["slice"], 1);
  EXPECT_THAT(taken[0].reason, ::testing::HasSubstr("DCN transfer latency into host-1 (slice 1)"));
  run(70, 130, 40);  // recovered: nothing
  EXPECT_EQ(taken.size(), 1u);
  run(130, 140, 340);  // slow again, past the cooldown
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[1].trigger, "dcn");
}

TEST(DcnTelemetryTest, HostilePercentilesAreRefusedAndRollUpsKeepTheFigures) {
  podprof::v1::ReportTelemetryRequest r = Report("host-0", 0, 40);
  EXPECT_OK(CheckTelemetryReport(r, {0, 1}));
  r.mutable_samples(0)->mutable_chips(0)->set_dcn_latency_p50_us(std::nan(""));
  EXPECT_THAT(CheckTelemetryReport(r, {0, 1}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("dcn_latency_p50_us is nan")));
  r = Report("host-0", 0, 40);
  r.mutable_samples(0)->mutable_chips(1)->set_dcn_transfers(-2);
  EXPECT_FALSE(CheckTelemetryReport(r, {0, 1}).ok());

  const fs::path db = fs::path(::testing::TempDir()) / "dcn_trigger_test.db";
  fs::remove(db);
  TelemetryOptions o;
  o.store_interval_ns = 5 * kS;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<storage::Store> store, storage::Store::Open(db.string()));
    TelemetryHub hub(&store->telemetry(), o);
    // 4 s of 40 us with 800 transfers, then 1 s of 100 us with 200.
    for (int64_t s = 0; s < 5; ++s) {
      hub.Ingest(Report("host-0", s, s < 4 ? 40 : 100, s < 4 ? 800 : 200),
                 kT0 + s * kS + 200'000'000);
    }
    ASSERT_OK(hub.Flush(kT0 + 10 * kS, /*all=*/true));
    const std::map<std::string, HostDcn> dcn = hub.DcnHistory(kT0);
    ASSERT_EQ(dcn.at("host-0").points.size(), 5u);  // once per sample, not per chip
    EXPECT_EQ(dcn.at("host-0").points.back().transfers, 200);
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<storage::Store> reopened, storage::Store::Open(db.string()));
  ASSERT_OK_AND_ASSIGN(std::vector<storage::TelemetryRecord> rows,
                       reopened->telemetry().Read(storage::TelemetryFilter{}));
  ASSERT_EQ(rows.size(), 2u);  // one interval, two chips
  EXPECT_EQ(rows[0].dcn_transfers, 3400);
  EXPECT_DOUBLE_EQ(rows[0].dcn_latency_p50_us, (4 * 800 * 40.0 + 200 * 100.0) / 3400);
  EXPECT_DOUBLE_EQ(rows[0].dcn_latency_p99_us, 120);
}

}  // namespace
}  // namespace podprof::aggregator
