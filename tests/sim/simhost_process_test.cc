// podprof-simhost as a real child process, driven over gRPC on loopback.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "launch/pod_launcher.h"
#include "nlohmann/json.hpp"
#include "proto/profiler_service.grpc.pb.h"
#include "proto/tpu_metric_service.grpc.pb.h"
#include "proto/xplane.pb.h"
#include "tests/util/child_process.h"
#include "tests/util/status_matchers.h"
#include "trace/byte_source.h"
#include "trace/xspace_reader.h"

namespace podprof::sim {
namespace {

namespace fs = std::filesystem;
namespace rt = tpu::monitoring::runtime;

// A simulated host of `chips` chips of `generation`, alone in its pod; the tests set the rest.
launch::PodOptions SimPod(int chips, const std::string& generation = "v6e") {
  launch::PodOptions pod;
  pod.bin_dir = PODPROF_BIN_DIR;
  pod.chips = chips;
  pod.generation = generation;
  pod.aggregator = pod.agents = false;
  return pod;
}
// A host whose clock is off by `offset_ns` (its devices' by `device_offset_ns` more).
launch::HostOptions HostClock(int64_t offset_ns, int64_t device_offset_ns = 0) {
  launch::HostOptions h;
  h.clock_offset_ns = offset_ns;
  h.device_clock_offset_ns = device_offset_ns;
  return h;
}

// A running podprof-simhost, host `host` of `pod` as launch/ starts it, with clients for both
// of its services.
class SimProcess {
 public:
  SimProcess(const std::string& name, launch::PodOptions pod, int host = 0)
      : dir_(fs::path(::testing::TempDir()) / absl::StrCat("simhost_", name, "_", getpid())) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    pod.dir = dir_.string();
    truth_ = launch::TruthFile(pod, host);
    // The drift, if any, counts from now.
    process_ = std::make_unique<podprof::testing::ChildProcess>(
        launch::SimhostArgs(pod, host, RealClock().NowNs()), launch::SimhostReadyFile(pod, host));
    if (!process_->ready()) return;
    auto channel = [](int port) {
      return grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                 grpc::InsecureChannelCredentials());
    };
    profiler_ = tensorflow::ProfilerService::NewStub(channel(process_->info()["profiler_port"]));
    metrics_ = rt::RuntimeMetricService::NewStub(channel(process_->info()["metrics_port"]));
  }
  ~SimProcess() {
    // Close the channels first: open connections would hold up the server's shutdown.
    profiler_.reset();
    metrics_.reset();
    process_.reset();
    fs::remove_all(dir_);
  }
  bool ok() const { return profiler_ != nullptr; }
  const nlohmann::json& ready() const { return process_->info(); }
  tensorflow::ProfilerService::Stub& profiler() { return *profiler_; }
  rt::RuntimeMetricService::Stub& metrics() { return *metrics_; }
  std::string root() const { return (dir_ / "repo").string(); }
  nlohmann::json Truth() const {
    return nlohmann::json::parse(podprof::testing::ReadTestFile(truth_));
  }

 private:
  fs::path dir_;
  std::string truth_;
  std::unique_ptr<podprof::testing::ChildProcess> process_;
  std::unique_ptr<tensorflow::ProfilerService::Stub> profiler_;
  std::unique_ptr<rt::RuntimeMetricService::Stub> metrics_;
};

tensorflow::ProfileRequest Request(const SimProcess& p, const std::string& session,
                                   int64_t start_host_ns, int duration_ms) {
  tensorflow::ProfileRequest r;
  r.set_repository_root(p.root());
  r.set_session_id(session);
  r.set_host_name("10.0.0.1:9999");
  r.set_duration_ms(duration_ms);
  r.mutable_opts()->set_duration_ms(duration_ms);
  r.mutable_opts()->set_start_timestamp_ns(static_cast<uint64_t>(start_host_ns));
  r.mutable_opts()->set_version(1);
  return r;
}

grpc::Status Call(SimProcess& p, const tensorflow::ProfileRequest& req,
                  tensorflow::ProfileResponse* resp, int timeout_s = 30) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  return p.profiler().Profile(&ctx, req, resp);
}

TEST(SimHostProcessTest, ProfileHonoursStartTimeAndWritesTheSessionLayout) {
  launch::PodOptions pod = SimPod(8, "v5e");
  pod.host = {HostClock(-37'500'000)};
  SimProcess p("start", pod);
  ASSERT_TRUE(p.ok());
  RealClock clock;
  const int64_t offset = -37'500'000;
  const int64_t start_host = clock.NowNs() + offset + 400'000'000;
  tensorflow::ProfileResponse resp;
  grpc::Status s = Call(p, Request(p, "run1", start_host, 250), &resp);
  ASSERT_OK(s);
  EXPECT_FALSE(resp.empty_trace());

  std::string path = p.root() + "/run1/10.0.0.1_9999.xplane.pb";
  ASSERT_TRUE(fs::exists(path));
  nlohmann::json truth = p.Truth();
  ASSERT_EQ(truth["sessions"].size(), 1u);
  const auto& session = truth["sessions"][0];
  const int64_t true_start = session["true_start_ns"];
  // Started on the host's (wrong) clock, at the requested instant: not before it (a start on
  // the true clock would be 37.5 ms early) and within 30 ms after it (a clean-clone run on a
  // loaded 2-core machine saw 7.7 ms).
  EXPECT_GE(true_start, start_host - offset);
  EXPECT_LT(true_start, start_host - offset + 30'000'000);
  EXPECT_EQ(session["host_start_ns"].get<int64_t>() - true_start, offset);

  auto capture = trace::ReadXSpaceFile(path);
  ASSERT_OK(capture);
  EXPECT_EQ(capture->host.chips.size(), 8u);
  EXPECT_EQ(capture->host.chips[0].device_type, "TPU v5 Lite");
  EXPECT_EQ(capture->host.profile_start_ns, session["host_start_ns"].get<int64_t>());
  EXPECT_EQ(static_cast<int64_t>(capture->EventCount()) > 1000, true);
}

TEST(SimHostProcessTest, LateStartBeginsAtOnceAndSaysBy) {
  SimProcess p("late", SimPod(2));
  ASSERT_TRUE(p.ok());
  RealClock clock;
  tensorflow::ProfileResponse resp;
  ASSERT_OK(Call(p, Request(p, "late", clock.NowNs() - 2'000'000'000, 100), &resp));
  int64_t late = p.Truth()["sessions"][0]["late_by_ns"];
  // override_hostname names the file, with ':' written '_'.
  tensorflow::ProfileRequest r = Request(p, "named", 0, 50);
  r.mutable_opts()->set_override_hostname("worker:7");
  ASSERT_OK(Call(p, r, &resp));
  EXPECT_TRUE(fs::exists(p.root() + "/named/worker_7.xplane.pb"));
  EXPECT_GE(late, 2'000'000'000);
  EXPECT_LT(late, 3'000'000'000);
}

TEST(SimHostProcessTest, OneSessionAtATimeAndTerminateEndsEarly) {
  SimProcess p("busy", SimPod(2));
  ASSERT_TRUE(p.ok());
  RealClock clock;
  tensorflow::ProfileResponse first_resp;
  grpc::Status first_status;
  // The probes below take the one session slot for a millisecond each, so "long" may find a
  // probe running (ALREADY_EXISTS naming "second"): it asks again until it holds the slot.
  // (Each probe once lasted 100 ms; a loaded machine let one win the race, "long" gave up,
  // and no probe could ever find it running.)
  std::thread first([&] {
    do {
      first_status = Call(p, Request(p, "long", 0, 20'000), &first_resp);
    } while (first_status.error_code() == grpc::StatusCode::ALREADY_EXISTS);
  });
  // Probe until the long session is running: the refusal names it.
  grpc::Status second;
  const int64_t give_up = clock.MonotonicNs() + 15'000'000'000;
  while (clock.MonotonicNs() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    tensorflow::ProfileResponse r;
    second = Call(p, Request(p, "second", 0, 1), &r);
    if (second.error_code() == grpc::StatusCode::ALREADY_EXISTS) break;
  }
  EXPECT_EQ(second.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_NE(second.error_message().find("long"), std::string::npos) << second.error_message();

  const int64_t t0 = clock.MonotonicNs();
  grpc::ClientContext ctx;
  tensorflow::TerminateRequest term;
  term.set_session_id("long");
  tensorflow::TerminateResponse term_resp;
  EXPECT_OK(p.profiler().Terminate(&ctx, term, &term_resp));
  first.join();
  EXPECT_OK(first_status);
  EXPECT_LT(clock.MonotonicNs() - t0, 3'000'000'000);
  // A "second" probe may have held the slot before "long" did: its session comes first.
  bool long_terminated = false;
  const nlohmann::json truth = p.Truth();
  for (const auto& session : truth["sessions"]) {
    if (session["session_id"] == "long") long_terminated = session["terminated"].get<bool>();
  }
  EXPECT_TRUE(long_terminated);
  EXPECT_TRUE(fs::exists(p.root() + "/long/10.0.0.1_9999.xplane.pb"));

  grpc::ClientContext ctx2;
  term.set_session_id("nothing-running");
  EXPECT_EQ(p.profiler().Terminate(&ctx2, term, &term_resp).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST(SimHostProcessTest, BadRequestsAreRejectedClearly) {
  SimProcess p("bad", SimPod(1));
  ASSERT_TRUE(p.ok());
  tensorflow::ProfileResponse resp;
  tensorflow::ProfileRequest r = Request(p, "x", 0, 100);
  r.set_repository_root("");
  grpc::Status s = Call(p, r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("repository_root"), std::string::npos);
  r = Request(p, "../escape", 0, 100);
  EXPECT_EQ(Call(p, r, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(SimHostProcessTest, DurationOf2To58MsIsRefusedNotWrapped) {
  // (2^58 + 1000) ms is 1 s once multiplied into int64 ns: it must be refused as sent.
  SimProcess p("wrap", SimPod(1));
  ASSERT_TRUE(p.ok());
  tensorflow::ProfileResponse resp;
  tensorflow::ProfileRequest r = Request(p, "x", 0, 100);
  r.set_duration_ms((uint64_t{1} << 58) + 1000);
  r.mutable_opts()->set_duration_ms((uint64_t{1} << 58) + 1000);
  grpc::Status s = Call(p, r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "duration_ms must be 1..3600000, got 288230376151712744");
  r = Request(p, "y", 0, 100);
  r.mutable_opts()->set_start_timestamp_ns(uint64_t{1} << 63);
  s = Call(p, r, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("start_timestamp_ns must be"), std::string::npos)
      << s.error_message();
}

TEST(SimHostProcessTest, MetricFilterOfTwentyThousandNestedGroupsIsRefusedNotACrash) {
  SimProcess p("nested", SimPod(1));
  ASSERT_TRUE(p.ok());
  for (const std::string& filter :
       {std::string(20'000, '(') + std::string(20'000, ')'), std::string("hbm(")}) {
    grpc::ClientContext ctx;
    rt::ListSupportedMetricsRequest req;
    req.set_filter(filter);
    rt::ListSupportedMetricsResponse resp;
    grpc::Status s = p.metrics().ListSupportedMetrics(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(s.error_message().rfind("filter", 0), 0u) << s.error_message();
  }
  // The process is still there to answer.
  grpc::ClientContext ctx;
  rt::ListSupportedMetricsRequest req;
  req.set_filter("(.*)*#");
  rt::ListSupportedMetricsResponse resp;
  ASSERT_OK(p.metrics().ListSupportedMetrics(&ctx, req, &resp));
  EXPECT_EQ(resp.supported_metric_size(), 0);
}

TEST(SimHostProcessTest, MetricsPerDeviceWithFiltersAndNotFound) {
  SimProcess p("metrics", SimPod(4, "v6e"));
  ASSERT_TRUE(p.ok());
  {
    grpc::ClientContext ctx;
    rt::ListSupportedMetricsRequest req;
    req.set_filter("hbm");
    rt::ListSupportedMetricsResponse resp;
    ASSERT_OK(p.metrics().ListSupportedMetrics(&ctx, req, &resp));
    std::set<std::string> names;
    for (const auto& m : resp.supported_metric()) names.insert(m.metric_name());
    EXPECT_EQ(names, (std::set<std::string>{"tpu.runtime.hbm.memory.usage.bytes",
                                            "tpu.runtime.hbm.memory.total.bytes",
                                            "tpu.runtime.hbm.utilization.percent"}));
  }
  auto get = [&](const std::string& name, rt::MetricResponse* resp) {
    grpc::ClientContext ctx;
    rt::MetricRequest req;
    req.set_metric_name(name);
    return p.metrics().GetRuntimeMetric(&ctx, req, resp);
  };
  rt::MetricResponse total, usage, duty, timing, queue;
  ASSERT_OK(get("tpu.runtime.hbm.memory.total.bytes", &total));
  ASSERT_OK(get("tpu.runtime.hbm.memory.usage.bytes", &usage));
  ASSERT_OK(get("tpu.runtime.tensorcore.dutycycle.percent", &duty));
  ASSERT_OK(get("hlo.execution.timing.distribution.microseconds", &timing));
  ASSERT_OK(get("hlo.queue.size.gauge", &queue));
  ASSERT_EQ(total.metric().metrics_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(total.metric().metrics(i).attribute().value().int_attr(), i);
    EXPECT_EQ(total.metric().metrics(i).gauge().as_int(), int64_t{32} << 30);
    EXPECT_GT(usage.metric().metrics(i).gauge().as_int(), 0);
    EXPECT_LT(usage.metric().metrics(i).gauge().as_int(), int64_t{32} << 30);
    double d = duty.metric().metrics(i).gauge().as_double();
    EXPECT_GT(d, 30);
    EXPECT_LT(d, 100);
    const auto& dist = timing.metric().metrics(i).distribution();
    // One run of the step's program per step and chip, counted since the host started.
    EXPECT_GT(dist.count(), 0);
    EXPECT_EQ(dist.count(), timing.metric().metrics(0).distribution().count());
    EXPECT_GT(timing.metric().metrics(i).start_timestamp().seconds(), 0);
    EXPECT_EQ(dist.bucket_options().exponential_buckets().growth_factor(), 2);
    int64_t in_buckets = 0;
    for (int64_t c : dist.bucket_counts()) in_buckets += c;
    EXPECT_EQ(in_buckets, dist.count());
    EXPECT_LE(queue.metric().metrics(i).gauge().as_int(), 35);
  }
  {
    grpc::ClientContext ctx;
    tensorflow::MonitorRequest req;
    tensorflow::MonitorResponse resp;
    ASSERT_OK(p.profiler().Monitor(&ctx, req, &resp));
    EXPECT_GT(resp.monitor_result().step_time_ms_avg(), 0);
    EXPECT_NE(resp.data().find("TPU v6 Lite"), std::string::npos) << resp.data();
  }
  rt::MetricResponse none;
  EXPECT_EQ(get("tpu.runtime.no.such.metric", &none).error_code(), grpc::StatusCode::NOT_FOUND);
}

// Two processes of one pod, each with its own clock error, capture the same true window.
TEST(SimHostProcessTest, TwoHostsOfOnePodAgreeOnCollectivesInTrueTime) {
  const int64_t offsets[2] = {-37'500'000, 12'000'000};
  launch::PodOptions pod = SimPod(4);
  pod.hosts = 2;
  pod.seed = 11;
  pod.host = {HostClock(offsets[0]), HostClock(offsets[1], 120'000)};
  SimProcess a("pod0", pod, 0);
  SimProcess b("pod1", pod, 1);
  ASSERT_TRUE(a.ok() && b.ok());
  RealClock clock;
  const int64_t true_start = clock.NowNs() + 400'000'000;
  tensorflow::ProfileResponse ra, rb;
  grpc::Status sa, sb;
  std::thread ta([&] { sa = Call(a, Request(a, "pod", true_start + offsets[0], 300), &ra); });
  std::thread tb([&] { sb = Call(b, Request(b, "pod", true_start + offsets[1], 300), &rb); });
  ta.join();
  tb.join();
  ASSERT_OK(sa);
  ASSERT_OK(sb);

  // Collective id -> true end time (ps), per host, from each file and its ground truth.
  std::map<uint64_t, int64_t> ends[2];
  SimProcess* procs[2] = {&a, &b};
  for (int h = 0; h < 2; ++h) {
    nlohmann::json truth = procs[h]->Truth();
    const int64_t shift_ns =
        truth["clock_offset_ns"].get<int64_t>() + truth["device_clock_offset_ns"].get<int64_t>();
    auto c = trace::ReadXSpaceFile(procs[h]->root() + "/pod/10.0.0.1_9999.xplane.pb");
    ASSERT_OK(c);
    for (const trace::EventBlock& blk : c->blocks) {
      if (blk.kind != trace::LineKind::kOps) continue;
      for (size_t i = 0; i < blk.size(); ++i) {
        if (blk.collective[i] == 0) continue;
        int64_t end_ps = (blk.base_ns - shift_ns) * 1000 + blk.start_ps[i] + blk.duration_ps[i];
        auto [it, inserted] = ends[h].emplace(blk.collective[i], end_ps);
        if (!inserted) {
          EXPECT_EQ(it->second, end_ps) << "chips of one host disagree";
        }
      }
    }
  }
  int common = 0;
  for (const auto& [id, end] : ends[0]) {
    auto it = ends[1].find(id);
    if (it == ends[1].end()) continue;
    ++common;
    EXPECT_EQ(it->second, end) << "collective " << id;
  }
  EXPECT_GT(common, 20);
}

TEST(SimHostProcessTest, DeviceClockOffsetShowsOnlyOnDevicePlanes) {
  launch::PodOptions pod = SimPod(2);
  pod.host = {HostClock(3'000'000, 120'000)};
  SimProcess p("device", pod);
  ASSERT_TRUE(p.ok());
  tensorflow::ProfileResponse resp;
  ASSERT_OK(Call(p, Request(p, "dev", 0, 300), &resp));
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(
      podprof::testing::ReadTestFile(p.root() + "/dev/10.0.0.1_9999.xplane.pb")));
  // Each step starts on the device when the host launches it: in the file the device's
  // Steps events sit exactly 120 us after the host's launch events.
  std::vector<int64_t> host_launch, device_steps;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      if (plane.name() == "/host:CPU") {
        for (const auto& e : line.events()) host_launch.push_back(e.offset_ps());
      } else if (plane.name() == "/device:TPU:0" && line.name() == "Steps") {
        for (const auto& e : line.events()) device_steps.push_back(e.offset_ps());
      }
    }
  }
  ASSERT_FALSE(host_launch.empty());
  ASSERT_EQ(host_launch.size(), device_steps.size());
  for (size_t i = 0; i < host_launch.size(); ++i) {
    EXPECT_EQ(device_steps[i] - host_launch[i], 120'000'000);
  }
}

TEST(SimHostProcessTest, BadFlagsExitTwoWithAClearMessage) {
  // By hand, not launch/: a bare command line with one malformed flag, as a person types it.
  std::string bin = std::string(PODPROF_BIN_DIR) + "/podprof-simhost";
  std::string err = ::testing::TempDir() + "/simhost_flags_" + std::to_string(getpid());
  int status = std::system((bin + " --generation v9 2>" + err).c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(podprof::testing::ReadTestFile(err).find("v9"), std::string::npos)
      << podprof::testing::ReadTestFile(err);
  status = std::system((bin + " --straggler 1:x 2>" + err).c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(podprof::testing::ReadTestFile(err).find("host:chip:factor"), std::string::npos)
      << podprof::testing::ReadTestFile(err);
  std::remove(err.c_str());
}

// Kernel profiling over the Profile RPC: a malformed sampling option fails the call as the
// runtime fails it; a good one on v7x gives counter samples (the throttled chip's CYCLES at
// 70% of the clock); on v6e only a warning.
TEST(SimHostProcessTest, KernelProfilingRequestsAreHonouredOrRejected) {
  launch::PodOptions pod = SimPod(2, "v7x");
  pod.simhost_flags = {"--throttle=0:1:0.3"};
  SimProcess p("kp", pod);
  ASSERT_TRUE(p.ok());
  auto with_options = [&](const std::string& session, const std::string& tc) {
    tensorflow::ProfileRequest r = Request(p, session, 0, 100);
    auto& config = *r.mutable_opts()->mutable_advanced_configuration();
    config["tpu_enable_periodic_counter_sampling"].set_bool_value(true);
    config["tpu_tc_perf_counter_sampling_options"].set_string_value(tc);
    return r;
  };
  tensorflow::ProfileResponse resp;
  grpc::Status bad = Call(p, with_options("bad", "interval_us:1 counter_size_bits:9"), &resp);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("tpu_tc_perf_counter_sampling_options"), std::string::npos)
      << bad.error_message();
  EXPECT_FALSE(fs::exists(p.root() + "/bad"));

  ASSERT_OK(Call(p, with_options("kp", "interval_us:10 indices:0"), &resp));
  tensorflow::profiler::XSpace space;
  ASSERT_TRUE(space.ParseFromString(
      podprof::testing::ReadTestFile(p.root() + "/kp/10.0.0.1_9999.xplane.pb")));
  EXPECT_TRUE(space.warnings().empty());
  // The die-0 CYCLES register of each chip: first and last sample, and their times.
  for (int chip : {0, 1}) {
    const auto& plane = space.planes(chip);
    int64_t id_stat = 0, value_stat = 0;
    for (const auto& [id, m] : plane.stat_metadata()) {
      if (m.name() == "performance_counter_id") id_stat = id;
      if (m.name() == "counter_value") value_stat = id;
    }
    std::vector<std::pair<int64_t, uint64_t>> cycles;
    for (const auto& line : plane.lines()) {
      for (const auto& e : line.events()) {
        uint64_t id = 0, value = 0;
        for (const auto& st : e.stats()) {
          if (st.metadata_id() == id_stat) id = st.uint64_value();
          if (st.metadata_id() == value_stat) value = st.uint64_value();
        }
        if (id == 2791874568u)
          cycles.push_back({line.timestamp_ns() * 1000 + e.offset_ps(), value});
      }
    }
    ASSERT_GT(cycles.size(), 100u) << chip;
    std::sort(cycles.begin(), cycles.end());
    const double dt_s = static_cast<double>(cycles.back().first - cycles.front().first) * 1e-12;
    const double per_s = static_cast<double>(cycles.back().second - cycles.front().second) / dt_s;
    EXPECT_NEAR(per_s / 1.9e9, chip == 1 ? 0.7 : 1.0, 1e-3) << chip;
  }

  SimProcess v6e("kp6", SimPod(1, "v6e"));
  ASSERT_TRUE(v6e.ok());
  tensorflow::ProfileRequest r = Request(v6e, "kp6", 0, 100);
  (*r.mutable_opts()->mutable_advanced_configuration())["tpu_enable_kernel_profiling"]
      .set_bool_value(true);
  ASSERT_OK(Call(v6e, r, &resp));
  tensorflow::profiler::XSpace v6e_space;
  ASSERT_TRUE(v6e_space.ParseFromString(
      podprof::testing::ReadTestFile(v6e.root() + "/kp6/10.0.0.1_9999.xplane.pb")));
  ASSERT_EQ(v6e_space.warnings_size(), 1);
  EXPECT_NE(v6e_space.warnings(0).find("not supported"), std::string::npos);
}

TEST(SimHostProcessTest, BadThrottleFlagsExitTwo) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("simhost_throttle_", getpid());
  fs::create_directories(dir);
  for (const char* flag : {"--throttle=1:2", "--throttle=0:0:1.0", "--throttle=0:9:0.2"}) {
    launch::PodOptions pod = SimPod(2);
    pod.dir = dir.string();
    pod.simhost_flags = {flag};
    podprof::testing::ChildProcess sim(launch::SimhostArgs(pod, 0, RealClock().NowNs()), "", {},
                                       "/dev/null");
    EXPECT_EQ(WEXITSTATUS(sim.Wait()), 2) << flag;
  }
  fs::remove_all(dir);
}

TEST(SimHostProcessTest, ReplayAnswersWithTheRecordedCapture) {
  std::string fixture = std::string(PODPROF_FIXTURES_DIR) + "/tpu_v6e_4chip_host_offload.xplane.pb";
  launch::PodOptions pod = SimPod(0);
  pod.simhost_flags = {"--replay=" + fixture};
  pod.host.resize(1);
  pod.host[0].name = "replayed";
  SimProcess p("replay", pod);
  ASSERT_TRUE(p.ok());
  tensorflow::ProfileResponse resp;
  ASSERT_OK(Call(p, Request(p, "rp", 0, 100), &resp));
  EXPECT_FALSE(resp.empty_trace());
  auto replayed = trace::ReadXSpaceFile(p.root() + "/rp/10.0.0.1_9999.xplane.pb");
  auto original = trace::ReadXSpaceFile(fixture);
  ASSERT_OK(replayed);
  ASSERT_OK(original);
  EXPECT_EQ(replayed->host.name, "replayed");
  EXPECT_EQ(replayed->EventCount(), original->EventCount());
  EXPECT_EQ(replayed->host.profile_start_ns,
            p.Truth()["sessions"][0]["host_start_ns"].get<int64_t>());
}

// A multi-slice job's host (#56): its slice follows from its index, its ready file hands it to
// the agent as MEGASCALE_SLICE_ID, and its ground truth records the slices and DCN faults.
TEST(SimHostProcessTest, SlicesNameTheHostsSliceAndTheTruthItsFaults) {
  launch::PodOptions pod = SimPod(2);
  pod.hosts = 4;
  pod.simhost_flags = {"--slices=2", "--dcn-delay-at=1s:0:300", "--slow-slice=1:1.25"};
  SimProcess sim("slices", pod, 3);
  ASSERT_TRUE(sim.ok());
  SimProcess other("slices_other", pod, 1);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(sim.ready()["environment"]["MEGASCALE_SLICE_ID"], "1");
  EXPECT_EQ(other.ready()["environment"]["MEGASCALE_SLICE_ID"], "0");
  // The truth is written once a session has run.
  tensorflow::ProfileResponse resp;
  ASSERT_TRUE(Call(sim, Request(sim, "s1", 0, 20), &resp).ok());
  const nlohmann::json truth = sim.Truth();
  EXPECT_EQ(truth["slices"], 2);
  EXPECT_EQ(truth["hosts_per_slice"], 2);
  EXPECT_EQ(truth["slice"], 1);
  ASSERT_EQ(truth["dcn_delays"].size(), 1u);
  EXPECT_EQ(truth["dcn_delays"][0]["slice"], 0);
  EXPECT_EQ(truth["dcn_delays"][0]["extra_ns"], 300'000);
  ASSERT_EQ(truth["slow_slices"].size(), 1u);
  EXPECT_EQ(truth["slow_slices"][0]["factor"], 1.25);
}

TEST(SimHostProcessTest, BadSliceFlagsExitTwoWithAClearMessage) {
  const std::string bin = std::string(PODPROF_BIN_DIR) + "/podprof-simhost";
  const std::string err = ::testing::TempDir() + "/simhost_slices_" + std::to_string(getpid());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--hosts 4 --slices 3", "4 hosts do not split into 3 slices"},
      {"--hosts 4 --slices 2 --dcn-delay-at 1s:x:3", "time:slice:microseconds"},
      {"--hosts 4 --slices 2 --dcn-delay-at 1s:2:3", "DCN delay 2:"},
      {"--hosts 4 --dcn-delay-at 1s:0:3", "multi-slice"},
      {"--hosts 4 --slices 2 --slow-slice 1", "slice:factor"},
      {"--hosts 4 --slices 2 --slow-slice-at 1s:1:0", "time:slice:factor"},
      {"--hosts 4 --slices 2 --host-index 3 --slice 0", "disagrees with --slices 2"},
  };
  for (const auto& [flags, want] : cases) {
    const int status = std::system((bin + " " + flags + " 2>" + err).c_str());
    EXPECT_EQ(WEXITSTATUS(status), 2) << flags;
    const std::string said = podprof::testing::ReadTestFile(err);
    EXPECT_NE(said.find(want), std::string::npos) << flags << ": " << said;
  }
  std::remove(err.c_str());
}

// --write-captures: every host's file of one window, named <host>.xplane.pb, each holding its
// own chips and the DCN ops, and the truth beside them.
TEST(SimHostProcessTest, WriteCapturesWritesEveryHostsFile) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("simhost_files_", getpid());
  fs::remove_all(dir);
  const std::string bin = std::string(PODPROF_BIN_DIR) + "/podprof-simhost";
  const std::string cmd = absl::StrCat(
      bin, " --hosts 4 --slices 2 --chips 2 --generation v5e --no-counters --write-captures ",
      dir.string(), " --capture-window 30ms --capture-start-ns 1800000000000000000 >/dev/null");
  ASSERT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 0) << cmd;
  const nlohmann::json truth =
      nlohmann::json::parse(podprof::testing::ReadTestFile((dir / "truth.json").string()));
  EXPECT_EQ(truth["slices"], 2);
  ASSERT_EQ(truth["files"].size(), 4u);
  for (int h = 0; h < 4; ++h) {
    const nlohmann::json& f = truth["files"][h];
    EXPECT_EQ(f["host"], absl::StrCat("simhost-", h));
    EXPECT_EQ(f["slice"], h / 2);
    const std::string path = f["path"];
    EXPECT_EQ(path, (dir / absl::StrCat("simhost-", h, ".xplane.pb")).string());
    auto src = trace::FileSource::Open(path);
    ASSERT_OK(src);
    auto capture = trace::ReadXSpace(**src);
    ASSERT_OK(capture);
    EXPECT_EQ(capture->host.name, absl::StrCat("simhost-", h));
    ASSERT_EQ(capture->host.chips.size(), 2u);
    EXPECT_EQ(capture->host.chips[1].global_id, h * 2 + 1);
    EXPECT_EQ(capture->host.profile_start_ns, 1'800'000'000'000'000'000);
    int sends = 0;
    for (const trace::KernelDef& k : capture->kernels) sends += k.category == "host send";
    EXPECT_EQ(sends, 2);
    EXPECT_GT(f["xprof_occurrences"]["dcn_grads.0"].get<int>(), 2);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace podprof::sim
