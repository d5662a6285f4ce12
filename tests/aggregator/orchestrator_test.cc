// The orchestrator's admission and cancellation, in process: the real Orchestrator, Registry and
// Store (SQLite in a temp folder) on a fake clock, with an agent's gRPC surface on loopback that
// holds each Capture call open (tests/aggregator/loopback_agent.h). A capture therefore runs
// until it is cancelled, which is what admission limits and cancellation need; captures that
// deliver data are pod_capture_test's (real agents and simulated hosts, as processes).
#include "aggregator/capture/orchestrator.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/api/api_rows.h"
#include "aggregator/capture/stored_options.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "harness/wait.h"
#include "storage/store.h"
#include "tests/aggregator/loopback_agent.h"
#include "tests/util/status_matchers.h"
#include "tests/util/temp_database.h"

namespace podprof::aggregator {
namespace {

namespace fs = std::filesystem;
namespace v1 = podprof::v1;

constexpr int64_t kHeartbeatNs = int64_t{3600} * 1'000'000'000;  // nobody goes stale here

// Waits (in real time, up to 20 s) for `done`.
bool Eventually(const std::function<bool()>& done) {
  return podprof::testing::WaitFor(done, absl::Seconds(20), absl::Milliseconds(10));
}

v1::StartCaptureRequest Capture(std::vector<std::string> hosts, uint64_t duration_ms = 1000) {
  v1::StartCaptureRequest r;
  for (const std::string& h : hosts) r.add_host_names(h);
  r.set_duration_ms(duration_ms);
  return r;
}

class OrchestratorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = storage::Store::Open(db_.path());
    ASSERT_OK(store);
    store_ = std::move(*store);
    ASSERT_TRUE(agent_.started());
    v1::RegisterRequest r;
    r.mutable_host()->set_host_name("h1");
    r.mutable_host()->set_agent_address(agent_.address());
    (*r.mutable_host()->mutable_labels())["pool"] = "a";
    ASSERT_OK(registry_.Register(r));
  }
  void TearDown() override {
    orchestrator_.reset();  // cancels what still runs and joins its threads
    store_.reset();
  }
  Orchestrator& Make(const OrchestratorLimits& limits) {
    orchestrator_ = std::make_unique<Orchestrator>(&registry_, &store_->writer(), clock_, limits);
    return *orchestrator_;
  }
  // Every progress event of capture `id` until it ends.
  std::vector<v1::CaptureProgress> WatchToEnd(const std::string& id) {
    std::vector<v1::CaptureProgress> seen;
    absl::Status s = orchestrator_->Watch(
        id,
        [&](const v1::CaptureProgress& p) {
          seen.push_back(p);
          return true;
        },
        [] { return false; });
    EXPECT_OK(s);
    return seen;
  }

  // Near the real time: the orchestrator turns its clock's readings into gRPC deadlines.
  FakeClock clock_{RealClock().NowNs()};
  podprof::testing::TempDatabase db_{"orchestrator"};
  std::unique_ptr<storage::Store> store_;
  Registry registry_{clock_, kHeartbeatNs, /*probe_interval_ns=*/10'000'000'000};
  podprof::testing::LoopbackAgent agent_{clock_, /*offset_ns=*/0};
  std::unique_ptr<Orchestrator> orchestrator_;  // last: goes first
};

TEST_F(OrchestratorTest, BadRequestsAreRefusedBeforeAnyAgentIsAsked) {
  OrchestratorLimits limits;
  limits.max_duration_ns = 10'000'000'000;
  limits.max_delay_ns = 60'000'000'000;
  limits.max_hosts = 2;
  Orchestrator& o = Make(limits);
  struct Case {
    const char* what;
    v1::StartCaptureRequest request;
    absl::StatusCode code;
    const char* message;
  };
  std::vector<Case> cases;
  cases.push_back({"no duration", Capture({"h1"}, 0), absl::StatusCode::kInvalidArgument,
                   "duration_ms must be at least 1, got 0"});
  cases.push_back({"too long", Capture({"h1"}, 20'000), absl::StatusCode::kInvalidArgument,
                   "is longer than this aggregator allows"});
  v1::StartCaptureRequest late = Capture({"h1"});
  late.set_delay_ms(61'000);
  cases.push_back({"too late", late, absl::StatusCode::kInvalidArgument,
                   "delay_ms must be at most 60000, got 61000"});
  v1::StartCaptureRequest far = Capture({"h1"});
  far.set_start_ns(clock_.NowNs() + 61'000'000'000);
  cases.push_back({"start too far ahead", far, absl::StatusCode::kInvalidArgument,
                   "start_ns must lie within 60000 ms from now"});
  v1::StartCaptureRequest both = Capture({"h1"});
  both.set_start_ns(clock_.NowNs() + 2'000'000'000);
  both.set_delay_ms(100);
  cases.push_back({"start and delay", both, absl::StatusCode::kInvalidArgument,
                   "cannot come with delay_ms or snapshot"});
  v1::StartCaptureRequest soon = Capture({"h1"});
  soon.set_start_ns(clock_.NowNs() + 1'000'000);  // 1 ms: no agent hears of it in time
  cases.push_back({"start too soon", soon, absl::StatusCode::kFailedPrecondition,
                   "start_ns is 1 ms from now; the aggregator needs"});
  cases.push_back({"too many hosts", Capture({"h1", "h2", "h3"}),
                   absl::StatusCode::kInvalidArgument, "at most 2 hosts per capture, got 3"});
  cases.push_back({"empty host name", Capture({""}), absl::StatusCode::kInvalidArgument,
                   "names are 1..253 bytes"});
  v1::StartCaptureRequest bad_label = Capture({"h1"});
  (*bad_label.mutable_labels())[""] = "x";
  cases.push_back({"empty label key", bad_label, absl::StatusCode::kInvalidArgument,
                   "label keys must be 1..256 bytes"});
  cases.push_back({"unknown host", Capture({"h1", "nobody"}), absl::StatusCode::kFailedPrecondition,
                   "host nobody is not an online agent"});
  v1::StartCaptureRequest no_match = Capture({});
  (*no_match.mutable_label_selector())["pool"] = "b";
  cases.push_back({"no agent matches", no_match, absl::StatusCode::kFailedPrecondition,
                   "no online agent matches the capture"});
  v1::StartCaptureRequest bogus_set = Capture({"h1"});
  bogus_set.mutable_options()->set_kernel_profiling(true);
  bogus_set.mutable_options()->add_counter_sets("BOGUS");
  cases.push_back({"unknown counter set", bogus_set, absl::StatusCode::kInvalidArgument,
                   "unknown counter set \"BOGUS\""});
  v1::StartCaptureRequest fast = Capture({"h1"});
  fast.mutable_options()->set_kernel_profiling(true);
  fast.mutable_options()->set_counter_interval_ns(500);
  cases.push_back({"counter interval under 1 us", fast, absl::StatusCode::kInvalidArgument,
                   "counter interval 500 ns is below the minimum of 1 us"});
  v1::StartCaptureRequest bad_option = Capture({"h1"});
  (*bad_option.mutable_options()->mutable_profiler_options())["a b"] = "1";
  cases.push_back({"malformed profiler option", bad_option, absl::StatusCode::kInvalidArgument,
                   "profiler option key \"a b\" is malformed"});
  for (const Case& c : cases) {
    absl::StatusOr<v1::StartCaptureResponse> r = o.Start(c.request);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), c.code) << c.what << ": " << r.status();
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.what << ": " << r.status();
  }
  EXPECT_EQ(agent_.captures(), 0);
  std::string next;
  auto stored = store_->captures().List({}, &next);
  ASSERT_OK(stored);
  EXPECT_TRUE(stored->empty()) << "nothing recorded for a refused capture";
}

TEST_F(OrchestratorTest, DurationOf2To58MsIsRefusedNotWrapped) {
  // (2^58 + 1000) ms * 1,000,000 wrapped to 1 s in int64 and passed the duration limit.
  OrchestratorLimits limits;
  limits.max_duration_ns = 10'000'000'000;
  Orchestrator& o = Make(limits);
  for (uint64_t ms : {(uint64_t{1} << 58) + 1000, std::numeric_limits<uint64_t>::max(),
                      (uint64_t{1} << 63) + 1000}) {
    absl::StatusOr<v1::StartCaptureResponse> r = o.Start(Capture({"h1"}, ms));
    ASSERT_FALSE(r.ok()) << ms;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ(r.status().message(), absl::StrCat("a capture of ", ms,
                                                 " ms is longer than this aggregator allows "
                                                 "(limits.max_capture_duration = 10.0 s)"));
  }
  // Just over the limit still reads in seconds.
  absl::StatusOr<v1::StartCaptureResponse> r = o.Start(Capture({"h1"}, 10'001));
  EXPECT_EQ(r.status().message(),
            "a capture of 10.0 s is longer than this aggregator allows "
            "(limits.max_capture_duration = 10.0 s)");
  EXPECT_EQ(agent_.captures(), 0);
}

// A caller that times the window itself (podprof.jax.capture, on a step boundary) gets that
// instant exactly, not the instant plus its request's way to the aggregator.
TEST_F(OrchestratorTest, AStartInstantIsKeptExactly) {
  Orchestrator& o = Make({});
  v1::StartCaptureRequest request = Capture({"h1"}, 500);
  const int64_t at = clock_.NowNs() + 2'000'000'123;
  request.set_start_ns(at);
  absl::StatusOr<v1::StartCaptureResponse> r = o.Start(request);
  ASSERT_OK(r);
  EXPECT_EQ(r->start_ns(), at);
  ASSERT_TRUE(Eventually([&] { return agent_.captures() == 1; }));
  EXPECT_EQ(agent_.last_start_ns(), at) << "the agent's clock is the aggregator's here";
  ASSERT_OK(o.Cancel(r->capture_id()));
}

TEST_F(OrchestratorTest, AnAgentGoneSilentIsNotChosen) {
  Orchestrator& o = Make({});
  clock_.AdvanceNs(4 * kHeartbeatNs);  // past three missed heartbeats: stale
  absl::StatusOr<v1::StartCaptureResponse> r = o.Start(Capture({"h1"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("host h1 is not an online agent"), std::string::npos)
      << r.status();
  r = o.Start(Capture({}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
}

TEST_F(OrchestratorTest, CancellingARunningCaptureEndsItCancelledAndFreesItsSlot) {
  OrchestratorLimits limits;
  limits.max_concurrent = 1;
  Orchestrator& o = Make(limits);
  const int64_t asked_ns = clock_.NowNs();
  v1::StartCaptureRequest request = Capture({}, 2000);
  (*request.mutable_label_selector())["pool"] = "a";
  (*request.mutable_labels())["why"] = "test";
  absl::StatusOr<v1::StartCaptureResponse> first = o.Start(request);
  ASSERT_OK(first);
  const std::string id = first->capture_id();
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(std::vector<std::string>(first->host_names().begin(), first->host_names().end()),
            std::vector<std::string>{"h1"});
  EXPECT_GE(first->start_ns(), asked_ns + limits.min_lead_ns);
  // On record as running before the window begins.
  auto row = store_->captures().Get(id);
  ASSERT_OK(row);
  EXPECT_EQ(row->status, storage::CaptureState::kRunning);
  EXPECT_EQ(row->labels.at("why"), "test");
  // The agent was asked; it holds the call open (the fake clock never reaches the start).
  ASSERT_TRUE(Eventually([&] { return agent_.captures() == 1; }));

  // The one slot is taken.
  absl::StatusOr<v1::StartCaptureResponse> second = o.Start(Capture({"h1"}));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted) << second.status();
  EXPECT_NE(second.status().message().find("1 captures are running"), std::string::npos)
      << second.status();

  absl::StatusOr<v1::CaptureStatus> cancelled = o.Cancel(id);
  ASSERT_OK(cancelled);
  EXPECT_EQ(*cancelled, v1::CAPTURE_STATUS_CANCELLED);
  std::vector<v1::CaptureProgress> progress = WatchToEnd(id);
  ASSERT_FALSE(progress.empty());
  const v1::CaptureProgress& last = progress.back();
  EXPECT_TRUE(last.done());
  EXPECT_EQ(last.status(), v1::CAPTURE_STATUS_CANCELLED);
  EXPECT_EQ(last.summary().status(), v1::CAPTURE_STATUS_CANCELLED);
  EXPECT_EQ(last.summary().capture_id(), id);
  for (const v1::CaptureProgress& p : progress) EXPECT_EQ(p.capture_id(), id);
  // The agent saw its call cancelled, and the store has the capture as cancelled.
  EXPECT_TRUE(Eventually([&] { return agent_.cancelled() == 1; }));
  row = store_->captures().Get(id);
  ASSERT_OK(row);
  EXPECT_EQ(row->status, storage::CaptureState::kCancelled);

  // Cancelling it again changes nothing and says how it ended.
  cancelled = o.Cancel(id);
  ASSERT_OK(cancelled);
  EXPECT_EQ(*cancelled, v1::CAPTURE_STATUS_CANCELLED);
  // Its slot is free again. (Capture ids come from the clock: let the fake one move.)
  clock_.AdvanceNs(1'000'000);
  absl::StatusOr<v1::StartCaptureResponse> third = o.Start(Capture({"h1"}));
  EXPECT_OK(third);
}

TEST_F(OrchestratorTest, KernelProfilingOptionsReachTheAgentsAndAreStored) {
  Orchestrator& o = Make({});
  v1::StartCaptureRequest request = Capture({"h1"});
  v1::CaptureOptions& options = *request.mutable_options();
  options.set_kernel_profiling(true);
  options.set_counter_interval_ns(1000);
  options.add_counter_sets("TC_COMPUTATION");
  options.set_external_trigger(false);
  options.set_device_tracer_level(0);
  auto* tc = options.add_counters();
  tc->set_component("tc");
  for (uint32_t i : {10, 11, 56}) tc->add_indices(i);
  (*options.mutable_profiler_options())["tpu_power_trace_level"] = "1";
  absl::StatusOr<v1::StartCaptureResponse> started = o.Start(request);
  ASSERT_OK(started);
  ASSERT_TRUE(Eventually([&] { return agent_.captures() == 1; }));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(agent_.last_options(), options))
      << agent_.last_options().ShortDebugString();
  auto row = store_->captures().Get(started->capture_id());
  ASSERT_OK(row);
  const v1::CaptureOptions stored = OptionsFromStoredJson(row->options_json);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(stored, options))
      << row->options_json;
  EXPECT_TRUE(stored.has_device_tracer_level()) << "an explicit 0 stays explicit";
  ASSERT_OK(o.Cancel(started->capture_id()));
  std::vector<v1::CaptureProgress> progress = WatchToEnd(started->capture_id());
  ASSERT_FALSE(progress.empty());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      progress.back().summary().options(), options));
  // Captures started without options are stored as before: a duration only.
  EXPECT_EQ(OptionsFromStoredJson(StoredOptionsJson(Capture({"h1"}, 7))).ByteSizeLong(), 0u);
  EXPECT_EQ(StoredOptionsJson(Capture({"h1"}, 7)), "{\"duration_ms\":7}");
}

// The recorder's state crosses the wire as an enum (RecorderStatus.recorder_state) and, for
// older readers, by name; an agent older than the enum sends the name alone. Either way an armed
// recorder gives the snapshot the window before the request; one that says neither has none to
// give, and the pod is captured from the request on.
TEST_F(OrchestratorTest, ARecorderArmedByEnumOrByNameAloneGivesTheWindowBeforeTheRequest) {
  Orchestrator& o = Make({});
  struct Case {
    const char* what;
    v1::RecorderState state;
    const char* name;
    const char* window;
  };
  for (const Case& c :
       {Case{"enum alone", v1::RECORDER_STATE_ARMED, "", kBeforeRequest},
        Case{"name alone (an older agent)", v1::RECORDER_STATE_UNSPECIFIED, "armed",
             kBeforeRequest},
        Case{"the enum over the name", v1::RECORDER_STATE_BUSY, "armed", kAfterRequest},
        Case{"neither", v1::RECORDER_STATE_UNSPECIFIED, "", kAfterRequest}}) {
    SCOPED_TRACE(c.what);
    v1::HeartbeatRequest beat;
    beat.set_host_name("h1");
    beat.mutable_recorder()->set_recorder_state(c.state);
    beat.mutable_recorder()->set_state(c.name);
    ASSERT_OK(registry_.Heartbeat(beat));
    v1::StartCaptureRequest request = Capture({"h1"});
    request.set_snapshot(true);
    absl::StatusOr<v1::StartCaptureResponse> started = o.Start(request);
    ASSERT_OK(started);
    auto row = store_->captures().Get(started->capture_id());
    ASSERT_OK(row);
    EXPECT_EQ(row->labels[kWindowLabel], c.window);
    ASSERT_OK(o.Cancel(started->capture_id()));
    WatchToEnd(started->capture_id());
    clock_.AdvanceNs(1'000'000);  // the next capture's id (from the clock) is another
  }
}

// A snapshot's cause arrives typed (StartCaptureRequest.cause): the caller writes no reserved
// label, the store keeps the cause as those labels (over a caller's label of the same name),
// and the capture read back carries the cause typed again. A client older than the cause sends
// the labels itself; they are stored as given and read back as its cause too.
TEST_F(OrchestratorTest, ASnapshotsCauseArrivesTypedAndIsStoredAsItsReservedLabels) {
  Orchestrator& o = Make({});
  v1::StartCaptureRequest request = Capture({"h1"});
  request.set_snapshot(true);
  (*request.mutable_labels())["job"] = "train";
  (*request.mutable_labels())["trigger"] = "a caller's";
  v1::SnapshotCause& cause = *request.mutable_cause();
  cause.set_trigger("step_time");
  cause.set_reason("pod step time 1.39x its baseline");
  cause.set_trigger_ns(1'796'591'631'001'000'000);
  cause.set_evidence_json(R"({"ratio":1.39,"threshold":1.1})");
  absl::StatusOr<v1::StartCaptureResponse> started = o.Start(request);
  ASSERT_OK(started);
  ASSERT_OK(o.Cancel(started->capture_id()));
  WatchToEnd(started->capture_id());
  auto row = store_->captures().Get(started->capture_id());
  ASSERT_OK(row);
  const std::map<std::string, std::string> want = {
      {"job", "train"},
      {"trigger", "step_time"},
      {"reason", "pod step time 1.39x its baseline"},
      {"trigger_ns", "1796591631001000000"},
      {"telemetry", R"({"ratio":1.39,"threshold":1.1})"},
      {"window", kAfterRequest}};
  EXPECT_EQ(row->labels, want);
  v1::CaptureSummary summary;
  FillSummary(*row, &summary);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(summary.cause(), cause))
      << summary.cause().ShortDebugString();

  clock_.AdvanceNs(1'000'000);  // the next capture's id (from the clock) is another
  v1::StartCaptureRequest older = Capture({"h1"});
  older.set_snapshot(true);
  (*older.mutable_labels())["trigger"] = "manual";
  (*older.mutable_labels())["reason"] = "by hand";
  started = o.Start(older);
  ASSERT_OK(started);
  ASSERT_OK(o.Cancel(started->capture_id()));
  WatchToEnd(started->capture_id());
  row = store_->captures().Get(started->capture_id());
  ASSERT_OK(row);
  FillSummary(*row, &summary);
  EXPECT_EQ(summary.cause().trigger(), "manual");
  EXPECT_EQ(summary.cause().reason(), "by hand");
  EXPECT_EQ(summary.cause().trigger_ns(), 0);

  // A cause is a snapshot's; and each of its fields is held to a label's size.
  v1::StartCaptureRequest not_snapshot = Capture({"h1"});
  not_snapshot.mutable_cause()->set_trigger("manual");
  EXPECT_EQ(o.Start(not_snapshot).status().code(), absl::StatusCode::kInvalidArgument);
  v1::StartCaptureRequest too_long = request;
  too_long.mutable_cause()->set_reason(std::string(4097, 'x'));
  EXPECT_EQ(o.Start(too_long).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(OrchestratorTest, UnknownCapturesAreNotFound) {
  Orchestrator& o = Make({});
  absl::StatusOr<v1::CaptureStatus> c = o.Cancel("cap-nope");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound) << c.status();
  absl::Status w = o.Watch(
      "cap-nope", [](const v1::CaptureProgress&) { return true; }, [] { return false; });
  EXPECT_EQ(w.code(), absl::StatusCode::kNotFound) << w;
  EXPECT_NE(w.message().find("cap-nope"), std::string::npos) << w;
}

TEST_F(OrchestratorTest, StartsAreLimitedPerRollingMinute) {
  OrchestratorLimits limits;
  limits.max_starts_per_minute = 2;
  limits.max_concurrent = 10;
  Orchestrator& o = Make(limits);
  // Capture ids come from the clock: the fake one moves a little between starts.
  ASSERT_OK(o.Start(Capture({"h1"})));
  clock_.AdvanceNs(1'000'000);
  ASSERT_OK(o.Start(Capture({"h1"})));
  clock_.AdvanceNs(1'000'000);
  absl::StatusOr<v1::StartCaptureResponse> r = o.Start(Capture({"h1"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find("more than 2 StartCapture calls in the last minute"),
            std::string::npos)
      << r.status();
  // A minute later the window has rolled on.
  clock_.AdvanceNs(61'000'000'000);
  r = o.Start(Capture({"h1"}));
  EXPECT_OK(r);
}

TEST_F(OrchestratorTest, AStartThatFindsNoAgentCountsInTheMinuteButHoldsNoCaptureSlot) {
  OrchestratorLimits limits;
  limits.max_starts_per_minute = 4;
  limits.max_concurrent = 1;
  Orchestrator& o = Make(limits);
  // Starts naming a host that is not there: refused, each giving its capture slot back...
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<v1::StartCaptureResponse> r = o.Start(Capture({"no-such-host"}));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  }
  // ...so the one slot is free for a capture that can run.
  absl::StatusOr<v1::StartCaptureResponse> r = o.Start(Capture({"h1"}));
  EXPECT_OK(r);
  // And all four counted in the minute: the next is refused as a flood.
  clock_.AdvanceNs(1'000'000);
  r = o.Start(Capture({"h1"}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_NE(r.status().message().find("in the last minute"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace podprof::aggregator
