// The flight recorder's pod side without processes: the telemetry hub's pod seconds, roll-ups
// and stored rows (a real SQLite file, reopened), and each trigger's rule, cooldown, budget and
// gap on telemetry shaped as agents send it.
#include "aggregator/recorder/triggers.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "aggregator/recorder/telemetry.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/store.h"
#include "tests/util/status_matchers.h"

namespace podprof::aggregator {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kT0 = 1'800'000'000 * kS;  // a whole second

// One report of `hosts` x `chips` at second `s` (sent and received at once): every chip ended
// `steps` steps of `step_us` at `duty` percent, except those in `slow` (host, chip) -> step_us.
podprof::v1::ReportTelemetryRequest Report(const std::string& host, int chips, int64_t s,
                                           int64_t steps, double step_us, double duty,
                                           const std::map<int, double>& slow = {}) {
  podprof::v1::ReportTelemetryRequest r;
  r.set_host_name(host);
  r.set_sent_ns(kT0 + s * kS + 200'000'000);
  podprof::v1::TelemetrySample* sample = r.add_samples();
  sample->set_time_ns(kT0 + s * kS + 100'000'000);
  sample->set_interval_ns(kS);
  for (int c = 0; c < chips; ++c) {
    podprof::v1::ChipTelemetry* t = sample->add_chips();
    t->set_chip(c);
    t->set_steps(steps);
    t->set_step_mean_us(slow.count(c) > 0 ? slow.at(c) : step_us);
    t->set_step_max_us(t->step_mean_us() * 1.02);
    t->set_duty_cycle_percent(duty);
    t->set_hbm_used_bytes(1 << 30);
    t->set_queued(2);
  }
  return r;
}

// What an agent may report is checked before any of it is taken: chips the host registered,
// each once, finite values in range, sample times near the report's. Each refusal names the
// host, the sample and the field; the honest report of the same host is taken.
TEST(TelemetryReportTest, OnlyRegisteredChipsAndPhysicalValuesAreTaken) {
  const std::vector<int32_t> chips = {0, 1, 2, 3};
  const podprof::v1::ReportTelemetryRequest good = Report("host-0", 4, 0, 10, 900, 80);
  EXPECT_OK(CheckTelemetryReport(good, chips));
  auto refused = [&](podprof::v1::ReportTelemetryRequest r, const std::string& says) {
    EXPECT_THAT(CheckTelemetryReport(r, chips),
                testing::StatusIs(
                    absl::StatusCode::kInvalidArgument,
                    ::testing::AllOf(::testing::HasSubstr("host-0"), ::testing::HasSubstr(says))));
  };
  refused(Report("host-0", 8, 0, 10, 900, 80), "names chip 4, which the host did not register");
  podprof::v1::ReportTelemetryRequest r = good;
  *r.mutable_samples(0)->add_chips() = r.samples(0).chips(1);
  refused(r, "names chip 1 twice");
  r = good;
  r.mutable_samples(0)->mutable_chips(2)->set_step_mean_us(std::nan(""));
  refused(r, "chip 2: step_mean_us is nan");
  r = good;
  r.mutable_samples(0)->mutable_chips(0)->set_duty_cycle_percent(250);
  refused(r, "duty_cycle_percent is 250");
  r = good;
  r.mutable_samples(0)->mutable_chips(0)->set_steps(-3);
  refused(r, "steps is -3");
  r = good;  // a sample dated a day after the report: it would never expire
  r.mutable_samples(0)->set_time_ns(r.sent_ns() + 24 * 3600 * kS);
  refused(r, "not within an hour before the report's sent_ns");
  r = good;  // the extremes of both times do not overflow the check
  r.set_sent_ns(INT64_MIN);
  r.mutable_samples(0)->set_time_ns(INT64_MAX);
  refused(r, "not within an hour");
  r = good;
  for (int i = 0; i < kMaxSamplesPerReport; ++i) *r.add_samples() = good.samples(0);
  refused(r, "samples, more than");
  // -1 is "not reported" where the field has it.
  r = good;
  r.mutable_samples(0)->mutable_chips(0)->set_duty_cycle_percent(-1);
  r.mutable_samples(0)->mutable_chips(0)->set_hbm_used_bytes(-1);
  r.mutable_samples(0)->mutable_chips(0)->set_collective_mean_us(-1);
  EXPECT_OK(CheckTelemetryReport(r, chips));
}

class TriggerTest : public ::testing::Test {
 protected:
  TriggerOptions options_ = [] {
    TriggerOptions o;
    o.recent_s = 5;
    o.baseline_s = 20;
    o.hang_ns = 6 * kS;
    return o;
  }();
  TelemetryOptions hub_options_ = [] {
    TelemetryOptions o;
    o.store_interval_ns = 5 * kS;
    return o;
  }();
  TelemetryHub hub_{nullptr, hub_options_};

  // Seconds [from, to) of a 4-host, 4-chip pod; `shape(s, host, &steps, &step_us, &duty,
  // &slow)` may change a second. Flushed as the trigger loop would, one second after each.
  template <typename Shape>
  void Feed(int64_t from, int64_t to, Shape shape) {
    for (int64_t s = from; s < to; ++s) {
      for (int h = 0; h < 4; ++h) {
        int64_t steps = 50;
        double step_us = 18'000 + 100 * ((s * 7 + h * 3) % 5);  // +-1% of noise
        double duty = 80;
        std::map<int, double> slow;
        shape(s, h, steps, step_us, duty, slow);
        hub_.Ingest(Report("host-" + std::to_string(h), 4, s, steps, step_us, duty, slow),
                    kT0 + s * kS + 200'000'000);
      }
      EXPECT_OK(hub_.Flush(kT0 + (s + 2) * kS));
    }
  }
  std::vector<std::string> Holding(int64_t s) {
    std::vector<std::string> out;
    for (const Firing& f : Evaluate(
             hub_.PodHistory(), hub_.ChipHistory(kT0 + (s - options_.recent_s) * kS), options_)) {
      out.push_back(f.trigger);
    }
    return out;
  }
  static void Healthy(int64_t, int, int64_t&, double&, double&, std::map<int, double>&) {}
};

TEST_F(TriggerTest, AHealthyPodFiresNothing) {
  Feed(0, 60, Healthy);
  EXPECT_THAT(Holding(61), ::testing::IsEmpty());
  const std::vector<PodPoint> pod = hub_.PodHistory();
  ASSERT_FALSE(pod.empty());
  EXPECT_EQ(pod.back().chips, 16);
  EXPECT_EQ(pod.back().steps, 16 * 50);
  EXPECT_NEAR(pod.back().step_us, 18'200, 250);
}

TEST_F(TriggerTest, ASlowedChipSlowsThePodAndFiresStepTime) {
  // In a synchronous pod one chip 1.3x slower makes every chip's step longer.
  Feed(0, 30, Healthy);
  Feed(30, 40, [](int64_t, int, int64_t&, double& step_us, double&, std::map<int, double>&) {
    step_us *= 1.3;
  });
  EXPECT_THAT(Holding(41), ::testing::ElementsAre("step_time"));
  const std::vector<Firing> f = Evaluate(hub_.PodHistory(), hub_.ChipHistory(0), options_);
  EXPECT_NEAR(f[0].evidence["ratio"].get<double>(), 1.3, 0.03);
  EXPECT_THAT(f[0].reason, ::testing::HasSubstr("1.3"));
  // The seconds the chart on the capture page draws (#53): the recent ones and the baseline's
  // before them, [second, step us] each, oldest first; the baseline's first at the old step.
  const nlohmann::json& recent = f[0].evidence["recent"];
  const nlohmann::json& before = f[0].evidence["baseline"];
  ASSERT_EQ(recent.size(), static_cast<size_t>(options_.recent_s));
  ASSERT_GE(before.size() * 2, static_cast<size_t>(options_.baseline_s));
  EXPECT_LT(before.back()[0].get<int64_t>(), recent.front()[0].get<int64_t>());
  EXPECT_NEAR(before.front()[1].get<double>(), f[0].evidence["baseline_step_us"].get<double>(),
              0.05 * f[0].evidence["baseline_step_us"].get<double>());
}

TEST_F(TriggerTest, ARiseWithinTheThresholdFiresNothing) {
  Feed(0, 30, Healthy);
  Feed(30, 40, [](int64_t, int, int64_t&, double& step_us, double&, std::map<int, double>&) {
    step_us *= 1.07;
  });
  EXPECT_THAT(Holding(41), ::testing::IsEmpty());
}

TEST_F(TriggerTest, OneChipAloneIsAStraggler) {
  Feed(0, 30, [](int64_t s, int h, int64_t&, double&, double&, std::map<int, double>& slow) {
    if (s >= 24 && h == 2) slow[1] = 25'000;
  });
  const std::vector<Firing> f =
      Evaluate(hub_.PodHistory(), hub_.ChipHistory(kT0 + 25 * kS), options_);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].trigger, "straggler");
  EXPECT_EQ(f[0].evidence["host"], "host-2");
  EXPECT_EQ(f[0].evidence["chip"], 1);
}

TEST_F(TriggerTest, ADutyCycleDropOf15PercentFires) {
  Feed(0, 30, Healthy);
  Feed(30, 40, [](int64_t, int, int64_t& steps, double&, double& duty, std::map<int, double>&) {
    duty = 60;
    steps = 35;
  });
  EXPECT_THAT(Holding(41), ::testing::ElementsAre("duty_cycle"));
}

TEST_F(TriggerTest, NoStepForTheHangTimeFiresHangAlone) {
  Feed(0, 30, Healthy);
  Feed(30, 34, [](int64_t, int, int64_t& steps, double&, double& duty, std::map<int, double>&) {
    steps = 0;
    duty = 0;
  });
  // Four quiet seconds: not yet a hang, and not a duty-cycle drop either (no step at all).
  EXPECT_THAT(Holding(35), ::testing::IsEmpty());
  Feed(34, 38, [](int64_t, int, int64_t& steps, double&, double& duty, std::map<int, double>&) {
    steps = 0;
    duty = 0;
  });
  EXPECT_THAT(Holding(39), ::testing::ElementsAre("hang"));
  // The last step as a time of day, not seconds since the epoch (kT0 is 08:00:00 UTC).
  const std::vector<Firing> firings =
      Evaluate(hub_.PodHistory(), hub_.ChipHistory(kT0 + (39 - options_.recent_s) * kS), options_);
  ASSERT_EQ(firings.size(), 1u);
  EXPECT_THAT(firings[0].reason, ::testing::HasSubstr("(the last one at 08:00:29 UTC)"));
}

TEST_F(TriggerTest, AJobThatNeverStepsIsNotHung) {
  Feed(0, 30,
       [](int64_t, int, int64_t& steps, double&, double&, std::map<int, double>&) { steps = 0; });
  EXPECT_THAT(Holding(31), ::testing::IsEmpty());
}

TEST(TriggerGateTest, CooldownBudgetAndGap) {
  TriggerOptions o;
  o.cooldown_ns = 60 * kS;
  o.hourly_budget = 3;
  o.min_gap_ns = 30 * kS;
  TriggerGate gate(o);
  EXPECT_EQ(gate.Admit("step_time", kT0, true), "");
  EXPECT_THAT(gate.Admit("step_time", kT0 + 59 * kS, true), ::testing::HasSubstr("cooling down"));
  // Another trigger of the same incident: held by the gap between automatic snapshots...
  EXPECT_THAT(gate.Admit("hang", kT0 + 10 * kS, true), ::testing::HasSubstr("at most one per 30"));
  // ...but a webhook is not automatic.
  EXPECT_EQ(gate.Admit("webhook", kT0 + 10 * kS, false), "");
  EXPECT_EQ(gate.Admit("step_time", kT0 + 60 * kS, true), "");
  EXPECT_EQ(gate.Admit("step_time", kT0 + 120 * kS, true), "");
  EXPECT_THAT(gate.Admit("step_time", kT0 + 180 * kS, true), ::testing::HasSubstr("budget of 3"));
  // An hour after the first, its budget has room again.
  EXPECT_EQ(gate.Admit("step_time", kT0 + 3601 * kS, true), "");
}

TEST(TriggerLoopTest, OneSnapshotPerIncidentAndRefusalsSaidOnce) {
  FakeClock clock(kT0);
  TelemetryOptions to;
  to.store_interval_ns = kS;
  TelemetryHub hub(nullptr, to);
  TriggerOptions o;
  o.recent_s = 3;
  o.baseline_s = 6;
  std::vector<std::string> taken;
  TriggerLoop loop(
      &hub, clock, o,
      [&](const Firing& f) -> absl::StatusOr<std::string> {
        taken.push_back(f.trigger);
        return "cap-" + std::to_string(taken.size());
      },
      /*run_thread=*/false);
  for (int64_t s = 0; s < 30; ++s) {
    const double step = s < 15 ? 10'000 : 14'000;
    for (int h = 0; h < 4; ++h) {
      hub.Ingest(Report("host-" + std::to_string(h), 2, s, 40, step, 70), kT0 + s * kS);
    }
    clock.SetNs(kT0 + (s + 2) * kS);
    loop.Tick(clock.NowNs());
  }
  EXPECT_THAT(taken, ::testing::ElementsAre("step_time"));
  const std::vector<TriggerEvent> events = loop.Events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].outcome, "snapshot");
  EXPECT_EQ(events[0].capture_id, "cap-1");
  EXPECT_THAT(events[1].outcome, ::testing::HasSubstr("cooling down"));
}

// Alertmanager's webhook, as POST /api/v1/snapshots/webhook receives it.
TEST(AlertmanagerTest, FiringAlertsBecomeOneWebhookFiringAndResolvedOnesNone) {
  const nlohmann::json body = {
      {"status", "firing"},
      {"receiver", "podprof"},
      {"alerts",
       {{{"status", "firing"},
         {"labels", {{"alertname", "GoodputLow"}}},
         {"annotations", {{"summary", "goodput 61%"}}}},
        {{"status", "resolved"}, {"labels", {{"alertname", "Old"}}}},
        "not an alert",
        {{"labels", {{"severity", "page"}}}, {"annotations", {{"summary", 3}}}}}}};
  ASSERT_OK_AND_ASSIGN(std::optional<Firing> f, FiringOfAlertmanager(body));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->trigger, "webhook");
  // An alert without a status fires; without a name it is "alert"; a summary that is not a
  // string is left out.
  EXPECT_EQ(f->reason, "GoodputLow: goodput 61%; alert");
  EXPECT_EQ(f->evidence, (nlohmann::json{{"alerts", 2}, {"receiver", "podprof"}}));

  const nlohmann::json resolved = {{"alerts", {{{"status", "resolved"}}}}};
  ASSERT_OK_AND_ASSIGN(std::optional<Firing> none, FiringOfAlertmanager(resolved));
  EXPECT_FALSE(none.has_value());

  // A reason is cut to what a label holds, on a character boundary.
  nlohmann::json many = {{"alerts", nlohmann::json::array()}};
  for (int i = 0; i < 200; ++i) {
    many["alerts"].push_back({{"labels", {{"alertname", "Grenzwertüberschritten"}}}});
  }
  ASSERT_OK_AND_ASSIGN(std::optional<Firing> cut, FiringOfAlertmanager(many));
  ASSERT_TRUE(cut.has_value());
  EXPECT_LE(cut->reason.size(), 1024u);
  EXPECT_EQ(cut->evidence["alerts"], 200);
}

TEST(AlertmanagerTest, AFieldOfTheWrongTypeIsRefusedByName) {
  EXPECT_THAT(FiringOfAlertmanager({{"alerts", "x"}}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("alerts must be an array")));
  EXPECT_THAT(FiringOfAlertmanager({{"receiver", "r"}}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("alerts must be an array")));
  EXPECT_THAT(FiringOfAlertmanager({{"alerts", nlohmann::json::array({{}, {{"status", 1}}})}}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("alerts[1].status")));
  EXPECT_THAT(FiringOfAlertmanager({{"alerts", {{{"labels", {{"alertname", false}}}}}}}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("alerts[0].labels.alertname")));
  EXPECT_THAT(
      FiringOfAlertmanager({{"alerts", nlohmann::json::array()}, {"receiver", 7}}),
      testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("receiver")));
}

TEST(TelemetryHubTest, RollsUpEachChipAndKeepsItAcrossARestart) {
  const fs::path db = fs::path(::testing::TempDir()) / "telemetry_hub_test.db";
  fs::remove(db);
  TelemetryOptions o;
  o.store_interval_ns = 5 * kS;
  {
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<storage::Store> store, storage::Store::Open(db.string()));
    TelemetryHub hub(&store->telemetry(), o);
    for (int64_t s = 0; s < 12; ++s) {
      // Chip 1 of host-0 runs 20 steps of 10 ms then 30 of 20 ms (its roll-up weighs them).
      hub.Ingest(Report("host-0", 2, s, s < 5 ? 20 : 30, s < 5 ? 10'000 : 20'000, 50),
                 kT0 + s * kS + 200'000'000);
      ASSERT_OK(hub.Flush(kT0 + (s + 1) * kS));
    }
    ASSERT_OK(hub.Flush(kT0 + 13 * kS, /*all=*/true));
    EXPECT_EQ(hub.samples(), 12);
    EXPECT_EQ(hub.rows_stored(), 6);  // 3 intervals (0-5, 5-10, 10-12) x 2 chips
  }
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<storage::Store> reopened, storage::Store::Open(db.string()));
  storage::TelemetryFilter f;
  f.hosts = {"host-0"};
  ASSERT_OK_AND_ASSIGN(std::vector<storage::TelemetryRecord> rows, reopened->telemetry().Read(f));
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0].time_ns, kT0 + 5 * kS);
  EXPECT_EQ(rows[0].interval_ns, 5 * kS);
  EXPECT_EQ(rows[0].steps, 100);
  EXPECT_DOUBLE_EQ(rows[0].step_mean_us, 10'000);
  EXPECT_EQ(rows[2].steps, 150);
  EXPECT_DOUBLE_EQ(rows[2].step_mean_us, 20'000);
  EXPECT_DOUBLE_EQ(rows[2].duty_cycle_percent, 50);
  EXPECT_EQ(rows[2].queued, 2);
  // Limits keep the newest, and say so.
  f.limit = 2;
  bool truncated = false;
  ASSERT_OK_AND_ASSIGN(rows, reopened->telemetry().Read(f, &truncated));
  EXPECT_TRUE(truncated);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].time_ns, kT0 + 15 * kS);
  ASSERT_OK_AND_ASSIGN(int64_t gone, reopened->telemetry().DeleteBefore(kT0 + 6 * kS));
  EXPECT_EQ(gone, 2);
}

}  // namespace
}  // namespace podprof::aggregator
