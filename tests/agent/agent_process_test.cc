// podprof-agent and podprof-simhost as real processes on loopback, driven over gRPC.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/clock_probe.h"
#include "common/skewed_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness/wait.h"
#include "launch/pod_launcher.h"
#include "podprof_version.h"
#include "proto/podprof_agent.grpc.pb.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "proto/profiler_service.grpc.pb.h"
#include "sim/pod_model.h"
#include "sim/xspace_builder.h"
#include "tests/util/child_process.h"
#include "tests/util/notify_socket.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"
#include "trace/kernel_stats.h"
#include "trace/xspace_reader.h"

namespace podprof::agent {
namespace {

using podprof::testing::NotifySocket;

namespace fs = std::filesystem;
using podprof::testing::ChildProcess;
using podprof::testing::ReadTestFile;

// A scratch directory per test, and the test's host in it as launch/ starts it: host-a, 4 v5e
// chips, an agent that registers nowhere (it is asked for captures directly).
class Scratch {
 public:
  explicit Scratch(const std::string& name)
      : dir_(fs::path(::testing::TempDir()) / absl::StrCat("agent_", name, "_", getpid())) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    pod.bin_dir = PODPROF_BIN_DIR;
    pod.dir = dir_.string();
    pod.generation = "v5e";
    pod.chips = 4;
    pod.aggregator = false;
    pod.host.resize(1);
    host().name = "host-a";
  }
  ~Scratch() { fs::remove_all(dir_); }
  std::string operator/(const std::string& f) const { return (dir_ / f).string(); }

  launch::HostOptions& host() { return pod.host[0]; }
  // The agent's workload: its profiler and its metric service ("" for the simulated host's,
  // "none" for no metrics).
  void Workload(const std::string& profiler, const std::string& metrics) {
    host().workload_profiler = profiler;
    host().workload_metrics = metrics;
  }

  launch::PodOptions pod;
  // Where the host's clock drift counts from, for both of its processes.
  const int64_t epoch_ns = RealClock().NowNs();

 private:
  fs::path dir_;
};

std::unique_ptr<ChildProcess> StartSimhost(const Scratch& s) {
  return std::make_unique<ChildProcess>(launch::SimhostArgs(s.pod, 0, s.epoch_ns),
                                        launch::SimhostReadyFile(s.pod, 0));
}

// The simulated host of `s` started again with its profiler on `port` (the one it had).
std::unique_ptr<ChildProcess> RestartSimhost(const Scratch& s, int port) {
  std::vector<std::string> args = launch::SimhostArgs(s.pod, 0, s.epoch_ns);
  auto p = std::find(args.begin(), args.end(), "--profiler-port=0");
  EXPECT_NE(p, args.end());
  if (p != args.end()) *p = absl::StrCat("--profiler-port=", port);
  fs::remove(launch::SimhostReadyFile(s.pod, 0));
  return std::make_unique<ChildProcess>(args, launch::SimhostReadyFile(s.pod, 0));
}

// The agent of `s`, its workload `sim` (null: the one Scratch::Workload names), with `env`
// added. Writes its configuration first (PodOptions::agent_config, empty unless set).
std::unique_ptr<ChildProcess> StartAgent(const Scratch& s, const ChildProcess* sim = nullptr,
                                         std::vector<std::string> env = {}) {
  EXPECT_OK(launch::WritePodFiles(s.pod));
  const nlohmann::json sim_ready = sim != nullptr ? sim->info() : nlohmann::json::object();
  return std::make_unique<ChildProcess>(launch::AgentArgs(s.pod, 0, s.epoch_ns, sim_ready, ""),
                                        launch::AgentReadyFile(s.pod, 0), std::move(env));
}

std::unique_ptr<podprof::v1::Agent::Stub> AgentStub(const ChildProcess& agent) {
  return podprof::v1::Agent::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", agent.info()["agent_port"].get<int>()),
                          grpc::InsecureChannelCredentials()));
}

struct CaptureResult {
  grpc::Status status;
  std::vector<podprof::v1::CaptureChunk> chunks;
};

// Every chunk of `req`'s capture, and how it ended.
CaptureResult Capture(podprof::v1::Agent::Stub& stub, const podprof::v1::CaptureRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  CaptureResult r;
  auto reader = stub.Capture(&ctx, req);
  podprof::v1::CaptureChunk chunk;
  while (reader->Read(&chunk)) r.chunks.push_back(chunk);
  r.status = reader->Finish();
  return r;
}

CaptureResult Capture(podprof::v1::Agent::Stub& stub, const std::string& id, int64_t start_ns,
                      int duration_ms) {
  podprof::v1::CaptureRequest req;
  req.set_capture_id(id);
  req.set_start_ns(start_ns);
  req.set_duration_ms(duration_ms);
  return Capture(stub, req);
}

// The id of the capture the agent is busy with ("" when idle or unreachable).
std::string ActiveCapture(podprof::v1::Agent::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  podprof::v1::InfoResponse info;
  if (!stub.Info(&ctx, podprof::v1::InfoRequest(), &info).ok()) return "";
  return info.active_capture_id();
}

bool Ping(podprof::v1::Agent::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  podprof::v1::PingRequest req;
  podprof::v1::PingResponse resp;
  return stub.Ping(&ctx, req, &resp).ok() && resp.agent_send_ns() >= resp.agent_receive_ns();
}

using Totals = std::map<std::pair<int, std::string>, std::pair<int64_t, int64_t>>;

TEST(AgentProcessTest, CaptureStreamsExactlyTheKernelsTheWorkloadWrote) {
  Scratch s("exact");
  s.pod.agent_flags = {"--counter-interval=50ms"};
  auto sim = StartSimhost(s);
  ASSERT_TRUE(sim->ready());
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(agent->ready());
  auto stub = AgentStub(*agent);
  RealClock clock;
  const int64_t start = clock.NowNs() + 300'000'000;
  CaptureResult r = Capture(*stub, "cap-1", start, 300);
  ASSERT_OK(r.status);
  ASSERT_GE(r.chunks.size(), 4u);
  ASSERT_TRUE(r.chunks.front().has_host_info());
  EXPECT_EQ(r.chunks.front().host_info().host_name(), "host-a");
  EXPECT_EQ(r.chunks.front().host_info().chips_size(), 4);  // learned from the capture
  ASSERT_TRUE(r.chunks.back().has_trailer());

  // The start instant is honoured: not before it, and aimed at it (where the session started,
  // less how late the loaded machine woke the host: that lateness is the scheduler's, and has
  // reached 26 ms in CI).
  nlohmann::json truth = nlohmann::json::parse(ReadTestFile(launch::TruthFile(s.pod, 0)));
  const auto& session = truth["sessions"][0];
  EXPECT_GE(session["true_start_ns"].get<int64_t>(), start);
  EXPECT_LT(session["true_start_ns"].get<int64_t>() - session["late_by_ns"].get<int64_t>(),
            start + 5'000'000);
  EXPECT_EQ(r.chunks.back().trailer().actual_start_ns(), session["host_start_ns"].get<int64_t>());

  // What the chunks carry...
  std::map<uint64_t, std::string> names;
  Totals got;
  uint64_t events = 0;
  std::map<std::string, int> counter_series;
  for (const auto& c : r.chunks) {
    if (c.has_kernel_defs()) {
      for (const auto& k : c.kernel_defs().kernels()) names[k.kernel_id()] = k.op_name();
    }
    if (c.has_counter_series()) counter_series[c.counter_series().name()]++;
    if (!c.has_event_block()) continue;
    events += c.event_block().kernel_id_size();
    if (c.event_block().line_name() != "XLA Ops") continue;
    for (int i = 0; i < c.event_block().kernel_id_size(); ++i) {
      auto& t = got[{c.event_block().chip_ordinal(), names.at(c.event_block().kernel_id(i))}];
      t.first++;
      t.second += c.event_block().duration_ps(i);
    }
  }
  EXPECT_EQ(events, r.chunks.back().trailer().event_count());
  EXPECT_EQ(counter_series["tpu.runtime.tensorcore.dutycycle.percent"], 4);
  EXPECT_EQ(counter_series["tpu.runtime.hbm.memory.usage.bytes"], 4);

  // ...against the XSpace the simhost wrote, regenerated from its ground truth.
  sim::PodConfig pod;
  pod.generation = "v5e";
  pod.chips = 4;
  auto model = sim::PodModel::Create(pod);
  ASSERT_OK(model);
  FakeClock fake(session["true_start_ns"].get<int64_t>());
  SkewedClock host(fake, 0, 0);
  sim::SessionWindow w;
  w.true_start_ns = session["true_start_ns"];
  w.true_end_ns = session["true_end_ns"];
  std::string bytes = sim::BuildXSpace(*model, host, w).space.SerializeAsString();
  trace::MemorySource src(bytes);
  auto expected_capture = trace::ReadXSpace(src);
  ASSERT_OK(expected_capture);
  Totals want;
  for (const auto& st : trace::ComputeKernelStats(*expected_capture)) {
    auto& t = want[{expected_capture->host.chips[st.chip].ordinal,
                    expected_capture->kernels[st.kernel].name}];
    t.first += st.count;
    t.second += st.total_ps;
  }
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(got, want);

  // The private repository is gone.
  EXPECT_TRUE(fs::is_empty(s / "tmp"));
}

TEST(AgentProcessTest, WorkloadDownIsUnavailableAndTheAgentStaysHealthy) {
  Scratch s("down");
  s.Workload("127.0.0.1:1", "none");
  auto agent = StartAgent(s);
  ASSERT_TRUE(agent->ready());
  auto stub = AgentStub(*agent);
  CaptureResult r = Capture(*stub, "cap-down", 0, 100);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(r.status.error_message(), "127.0.0.1:1"))
      << r.status.error_message();
  EXPECT_TRUE(Ping(*stub));
  // Info reports the workload unreachable.
  grpc::ClientContext ctx;
  podprof::v1::InfoResponse info;
  ASSERT_OK(stub->Info(&ctx, podprof::v1::InfoRequest(), &info));
  ASSERT_EQ(info.workload_endpoints_size(), 1);
  EXPECT_FALSE(info.workload_endpoints(0).reachable());
}

// After a failed capture gRPC holds the agent's channel to the workload in backoff for a
// second or more; a capture right after the workload came back must not fail "unreachable".
TEST(AgentProcessTest, ACaptureRightAfterTheWorkloadRestartsReconnects) {
  Scratch s("restart");
  s.Workload("", "none");
  auto sim = StartSimhost(s);
  ASSERT_TRUE(sim->ready());
  const int port = sim->info()["profiler_port"].get<int>();
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(agent->ready());
  auto stub = AgentStub(*agent);
  ASSERT_OK(Capture(*stub, "before", 0, 100).status);
  sim->Stop();
  CaptureResult down = Capture(*stub, "down", 0, 100);
  EXPECT_EQ(down.status.error_code(), grpc::StatusCode::UNAVAILABLE) << down.status.error_message();
  EXPECT_THAT(down.status.error_message(),
              ::testing::HasSubstr("a fresh connection to 127.0.0.1:" + std::to_string(port) +
                                   " did not succeed within 2000 ms"));

  // The workload again, on the same port, and a capture as soon as it listens.
  auto again = RestartSimhost(s, port);
  ASSERT_TRUE(again->ready());
  ASSERT_EQ(again->info()["profiler_port"].get<int>(), port);
  CaptureResult r = Capture(*stub, "after", 0, 100);
  ASSERT_OK(r.status);
  ASSERT_FALSE(r.chunks.empty());
  EXPECT_TRUE(r.chunks.back().has_trailer());
}

TEST(AgentProcessTest, BusyProfilerAndOneCaptureAtATime) {
  Scratch s("busy");
  s.Workload("", "none");
  auto sim = StartSimhost(s);
  ASSERT_TRUE(sim->ready());
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(agent->ready());
  auto stub = AgentStub(*agent);
  RealClock clock;
  CaptureResult first;
  std::thread t([&] { first = Capture(*stub, "long", 0, 1500); });
  // While "long" runs, the agent refuses a second capture...
  CaptureResult second;
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    second = Capture(*stub, "second", 0, 100);
    if (second.status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) break;
  }
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(second.status.error_message(), "long"));
  t.join();
  EXPECT_OK(first.status);

  // ...and a workload busy with someone else's session is reported as busy.
  auto sim_stub = tensorflow::ProfilerService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", sim->info()["profiler_port"].get<int>()),
                          grpc::InsecureChannelCredentials()));
  std::thread other([&] {
    grpc::ClientContext ctx;
    tensorflow::ProfileRequest req;
    req.set_repository_root(s / "other");
    req.set_session_id("other");
    req.set_host_name("x");
    req.mutable_opts()->set_duration_ms(1500);
    tensorflow::ProfileResponse resp;
    sim_stub->Profile(&ctx, req, &resp);
  });
  CaptureResult busy;
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    busy = Capture(*stub, "busy", 0, 100);
    if (busy.status.error_code() == grpc::StatusCode::ALREADY_EXISTS) break;
  }
  other.join();
  EXPECT_EQ(busy.status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(absl::StrContains(busy.status.error_message(), "busy"))
      << busy.status.error_message();
  EXPECT_TRUE(Ping(*stub));
}

TEST(AgentProcessTest, LateStartIsRefused) {
  Scratch s("late");
  s.Workload("", "none");
  auto sim = StartSimhost(s);
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(sim->ready() && agent->ready());
  auto stub = AgentStub(*agent);
  RealClock clock;
  CaptureResult r = Capture(*stub, "late", clock.NowNs() - 2'000'000'000, 100);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(r.status.error_message(), "late start"));
}

// A workload whose profiler misbehaves in a chosen way.
class FakeProfiler final : public tensorflow::ProfilerService::Service {
 public:
  enum class Mode { kHang, kCorrupt, kEmpty };
  explicit FakeProfiler(Mode mode) : mode_(mode) {}
  grpc::Status Profile(grpc::ServerContext* ctx, const tensorflow::ProfileRequest* req,
                       tensorflow::ProfileResponse* resp) override {
    if (mode_ == Mode::kEmpty) {
      resp->set_empty_trace(true);
      return grpc::Status::OK;
    }
    if (mode_ == Mode::kHang) {
      while (!ctx->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      return grpc::Status::CANCELLED;
    }
    fs::create_directories(fs::path(req->repository_root()) / req->session_id());
    std::ofstream(fs::path(req->repository_root()) / req->session_id() / "w.xplane.pb")
        << std::string("\x0a\xff\xff\x03garbage", 11);
    return grpc::Status::OK;
  }

 private:
  const Mode mode_;
};

struct FakeWorkload {
  explicit FakeWorkload(FakeProfiler::Mode mode) : service(mode) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
  }
  ~FakeWorkload() { server->Shutdown(std::chrono::system_clock::now()); }
  FakeProfiler service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

TEST(AgentProcessTest, HangingWorkloadHitsTheDeadline) {
  Scratch s("hang");
  FakeWorkload hung(FakeProfiler::Mode::kHang);
  s.pod.agent_config = "[limits]\nworkload_timeout = \"1s\"\n";
  s.Workload(absl::StrCat("127.0.0.1:", hung.port), "none");
  auto agent = StartAgent(s);
  ASSERT_TRUE(agent->ready());
  auto stub = AgentStub(*agent);
  CaptureResult r = Capture(*stub, "hang", 0, 100);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(absl::StrContains(r.status.error_message(), "did not answer"))
      << r.status.error_message();
  EXPECT_TRUE(Ping(*stub));
}

TEST(AgentProcessTest, CorruptXSpaceIsDataLossWithTheOffset) {
  Scratch s("corrupt");
  FakeWorkload bad(FakeProfiler::Mode::kCorrupt);
  s.Workload(absl::StrCat("127.0.0.1:", bad.port), "none");
  auto agent = StartAgent(s);
  ASSERT_TRUE(agent->ready());
  auto stub = AgentStub(*agent);
  CaptureResult r = Capture(*stub, "bad", 0, 100);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_TRUE(absl::StrContains(r.status.error_message(), "byte offset"))
      << r.status.error_message();
  EXPECT_TRUE(Ping(*stub));
  EXPECT_TRUE(fs::is_empty(s / "tmp"));
}

// Threads and open files of a process, from /proc.
std::pair<int, int> ThreadsAndFds(pid_t pid) {
  auto count = [](const fs::path& dir) {
    int n = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      ++n;
    }
    return n;
  };
  return {count(fs::path("/proc") / std::to_string(pid) / "task"),
          count(fs::path("/proc") / std::to_string(pid) / "fd")};
}

// Each way a workload can fail gets its own clear status, and none leaves a thread or a file
// descriptor behind in the agent: a hung profiler, garbage, an empty trace, a metric service
// that is down.
TEST(AgentProcessTest, WorkloadFaultsLeaveNoStuckThreadsOrOpenFiles) {
  FakeWorkload hung(FakeProfiler::Mode::kHang), bad(FakeProfiler::Mode::kCorrupt),
      empty(FakeProfiler::Mode::kEmpty);
  struct Case {
    int port;
    grpc::StatusCode code;
    const char* says;
  };
  const Case cases[] = {{hung.port, grpc::StatusCode::DEADLINE_EXCEEDED, "did not answer"},
                        {bad.port, grpc::StatusCode::DATA_LOSS, "byte offset"},
                        {empty.port, grpc::StatusCode::FAILED_PRECONDITION, "empty trace"}};
  int n = 0;
  for (const Case& c : cases) {
    // One agent per fault; its metric service is down throughout.
    Scratch s(absl::StrCat("faults", n++));
    s.pod.agent_config = "[limits]\nworkload_timeout = \"1s\"\n";
    s.Workload(absl::StrCat("127.0.0.1:", c.port), "127.0.0.1:1");
    auto agent = StartAgent(s);
    ASSERT_TRUE(agent->ready());
    auto stub = AgentStub(*agent);
    Capture(*stub, "warm", 0, 100);  // gRPC's thread pools reach their working size
    const auto before = ThreadsAndFds(agent->pid());
    for (int i = 0; i < 3; ++i) {
      CaptureResult r = Capture(*stub, absl::StrCat("fault", i), 0, 100);
      EXPECT_EQ(r.status.error_code(), c.code) << r.status.error_message();
      EXPECT_TRUE(absl::StrContains(r.status.error_message(), c.says)) << r.status.error_message();
    }
    // The failed captures' threads and files are let go as their handlers return.
    testing::WaitFor(
        [&] {
          const auto now = ThreadsAndFds(agent->pid());
          return now.first <= before.first + 1 && now.second <= before.second;
        },
        absl::Seconds(5));
    const auto after = ThreadsAndFds(agent->pid());
    EXPECT_LE(after.first, before.first + 1) << "threads grew under " << c.says;
    EXPECT_LE(after.second, before.second) << "file descriptors leaked under " << c.says;
    EXPECT_TRUE(Ping(*stub));
    EXPECT_TRUE(fs::is_empty(s / "tmp")) << "a capture repository was left behind";
  }
}

TEST(AgentProcessTest, SigtermDuringACaptureDrains) {
  Scratch s("drain");
  s.Workload("", "none");
  auto sim = StartSimhost(s);
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(sim->ready() && agent->ready());
  auto stub = AgentStub(*agent);
  CaptureResult r;
  std::thread t([&] { r = Capture(*stub, "drain", 0, 1000); });
  EXPECT_TRUE(testing::WaitFor([&] { return ActiveCapture(*stub) == "drain"; }, absl::Seconds(5)))
      << "the capture never began";
  agent->Signal(SIGTERM);
  t.join();
  EXPECT_OK(r.status);
  ASSERT_FALSE(r.chunks.empty());
  EXPECT_TRUE(r.chunks.back().has_trailer());
  int status = agent->Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(AgentProcessTest, SdNotifyReadyReloadWatchdogStoppingInOrder) {
  Scratch s("notify");
  NotifySocket sock(s / "notify.sock");
  s.Workload("127.0.0.1:1", "none");
  auto agent =
      StartAgent(s, nullptr, {"NOTIFY_SOCKET=" + s / "notify.sock", "WATCHDOG_USEC=200000"});
  ASSERT_TRUE(agent->ready());
  std::vector<std::string> msgs = sock.ReadUntil("WATCHDOG=1");
  ASSERT_GE(msgs.size(), 2u);
  EXPECT_TRUE(absl::StartsWith(msgs[0], "READY=1\nSTATUS=listening on port")) << msgs[0];
  agent->Signal(SIGHUP);
  msgs = sock.ReadUntil("READY=1");
  agent->Signal(SIGTERM);
  msgs = sock.ReadUntil("STOPPING=1");
  int status = agent->Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  // READY first, RELOADING before the second READY, STOPPING last.
  auto index = [&](const std::string& what, size_t from = 0) {
    for (size_t i = from; i < msgs.size(); ++i) {
      if (absl::StrContains(msgs[i], what)) return static_cast<int>(i);
    }
    return -1;
  };
  int ready = index("READY=1"), watchdog = index("WATCHDOG=1"), reloading = index("RELOADING=1");
  int ready_again = index("READY=1", reloading + 1), stopping = index("STOPPING=1");
  EXPECT_EQ(ready, 0);
  EXPECT_GT(watchdog, ready);
  EXPECT_GT(reloading, ready);
  EXPECT_GT(ready_again, reloading);
  EXPECT_GT(stopping, ready_again);
  EXPECT_EQ(stopping, static_cast<int>(msgs.size()) - 1);
}

// The aggregator's side of registration, recording what agents send.
class FakeAggregator final : public podprof::v1::Aggregator::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const podprof::v1::RegisterRequest* req,
                        podprof::v1::RegisterResponse* resp) override {
    absl::MutexLock l(&mu);
    registered.push_back(req->host());
    registrations.push_back(*req);
    resp->set_heartbeat_interval_ms(200);
    return grpc::Status::OK;
  }
  grpc::Status Heartbeat(grpc::ServerContext*, const podprof::v1::HeartbeatRequest* req,
                         podprof::v1::HeartbeatResponse*) override {
    absl::MutexLock l(&mu);
    heartbeats.push_back(req->host_name());
    last_beat = *req;
    return grpc::Status::OK;
  }
  // The profiler's endpoint as the last heartbeat had it; none when it had none.
  std::optional<podprof::v1::WorkloadEndpoint> LastProfilerCheck() {
    absl::MutexLock l(&mu);
    for (const auto& e : last_beat.workload_endpoints()) {
      if (e.service() == podprof::v1::WORKLOAD_SERVICE_PROFILER) return e;
    }
    return std::nullopt;
  }
  absl::Mutex mu;
  std::vector<podprof::v1::HostInfo> registered;
  std::vector<podprof::v1::RegisterRequest> registrations;
  std::vector<std::string> heartbeats;
  podprof::v1::HeartbeatRequest last_beat;
};

// A FakeAggregator served on a free loopback port.
struct FakeAggregatorServer {
  FakeAggregatorServer() {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service);
    server = b.BuildAndStart();
  }
  ~FakeAggregatorServer() { server->Shutdown(std::chrono::system_clock::now()); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
  FakeAggregator service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

// The agent reports in every heartbeat whether its workload answers: unreachable while the
// workload is away (naming it), reachable again as soon as it is back, though the agent's own
// channel is still in gRPC's backoff. Before, heartbeats carried no workload state.
TEST(AgentProcessTest, HeartbeatsSayWhetherTheAgentReachesItsWorkload) {
  Scratch s("beats_workload");
  s.Workload("", "none");
  FakeAggregatorServer agg;
  s.host().aggregator = agg.address();
  auto sim = StartSimhost(s);
  ASSERT_TRUE(sim->ready());
  const int port = sim->info()["profiler_port"].get<int>();
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(agent->ready());
  auto reachable = [&](bool want) {
    return podprof::testing::WaitFor(
        [&] {
          std::optional<podprof::v1::WorkloadEndpoint> e = agg.service.LastProfilerCheck();
          return e.has_value() && e->reachable() == want;
        },
        absl::Seconds(10));
  };
  ASSERT_TRUE(reachable(true));
  {
    absl::MutexLock l(&agg.service.mu);
    ASSERT_FALSE(agg.service.registrations.empty());
    ASSERT_EQ(agg.service.registrations[0].workload_endpoints_size(), 1);
    EXPECT_TRUE(agg.service.registrations[0].workload_endpoints(0).reachable());
  }
  sim->Stop();
  ASSERT_TRUE(reachable(false));
  std::optional<podprof::v1::WorkloadEndpoint> down = agg.service.LastProfilerCheck();
  EXPECT_EQ(down->address(), absl::StrCat("127.0.0.1:", port));
  EXPECT_FALSE(down->error_message().empty());
  EXPECT_GT(down->checked_ns(), 0);

  auto again = RestartSimhost(s, port);
  ASSERT_TRUE(again->ready());
  // Within a few heartbeats (200 ms each), not after the channel's backoff.
  EXPECT_TRUE(podprof::testing::WaitFor(
      [&] {
        std::optional<podprof::v1::WorkloadEndpoint> e = agg.service.LastProfilerCheck();
        return e.has_value() && e->reachable();
      },
      absl::Seconds(3)));
  agent->Stop();
}

// An advertised address whose host does not resolve. The name's first label is 64 bytes, one
// more than DNS allows, so the C library refuses it without sending a query: the test needs no
// DNS server and touches no network.
std::string UnresolvableHost() { return std::string(64, 'a') + ".invalid"; }

TEST(AgentProcessTest, AnAdvertisedAddressThatDoesNotResolveIsRegisteredWithWhatToSet) {
  Scratch s("advertise_warn");
  s.Workload("127.0.0.1:1", "none");
  FakeAggregatorServer agg;
  s.host().aggregator = agg.address();
  s.host().agent_advertise = UnresolvableHost() + ":0";
  auto agent = StartAgent(s);
  ASSERT_TRUE(agent->ready());
  ASSERT_TRUE(podprof::testing::WaitFor(
      [&] {
        absl::MutexLock l(&agg.service.mu);
        return !agg.service.registrations.empty();
      },
      absl::Seconds(10)));
  absl::MutexLock l(&agg.service.mu);
  const podprof::v1::RegisterRequest& r = agg.service.registrations[0];
  ASSERT_EQ(r.warnings_size(), 1);
  EXPECT_THAT(r.warnings(0), ::testing::HasSubstr("at " + UnresolvableHost() +
                                                  " (advertise = " + UnresolvableHost() +
                                                  ":0), which does not resolve"));
  EXPECT_THAT(r.warnings(0), ::testing::HasSubstr("set --advertise"));
}

// --host-name without --advertise: the aggregator would dial that name.
TEST(AgentProcessTest, AHostNameThatDoesNotResolveIsRefusedWhenConfigured) {
  Scratch s("advertise_refuse");
  s.Workload("127.0.0.1:1", "none");
  FakeAggregatorServer agg;
  s.host().aggregator = agg.address();
  s.host().name = UnresolvableHost();
  s.pod.agent_flags = {"--advertise-check=refuse"};
  ASSERT_OK(launch::WritePodFiles(s.pod));
  std::vector<std::string> args =
      launch::AgentArgs(s.pod, 0, s.epoch_ns, nlohmann::json::object(), "");
  args.erase(std::remove_if(args.begin(), args.end(),
                            [](const std::string& a) { return a.rfind("--advertise=", 0) == 0; }),
             args.end());
  ChildProcess agent(args, launch::AgentReadyFile(s.pod, 0), {}, s / "agent.err");
  const int status = agent.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_FALSE(agent.ready());
  const std::string err = ReadTestFile(s / "agent.err");
  EXPECT_THAT(err, ::testing::HasSubstr("at " + UnresolvableHost() +
                                        " (its host name: advertise is not set), which does "
                                        "not resolve on this host"));
  EXPECT_THAT(err, ::testing::HasSubstr("or --host-name to a name that resolves"));
  absl::MutexLock l(&agg.service.mu);
  EXPECT_TRUE(agg.service.registrations.empty());
}

// `podprof agents` against a real aggregator: the agent is online (the aggregator reaches it),
// and says it does not reach its workload, apart from that.
TEST(AgentProcessTest, PodprofAgentsSaysTheAgentDoesNotReachItsWorkload) {
  Scratch s("agents_workload");
  s.Workload("127.0.0.1:1", "none");
  auto aggregator = podprof::testing::StartBuiltAggregator(s / "agg");
  ASSERT_TRUE(aggregator->ready());
  const std::string address = absl::StrCat("127.0.0.1:", aggregator->info()["port"].get<int>());
  s.host().aggregator = address;
  auto agent = StartAgent(s);
  ASSERT_TRUE(agent->ready());
  nlohmann::json row;
  ASSERT_TRUE(podprof::testing::WaitFor(
      [&] {
        podprof::testing::PodprofResult r =
            podprof::testing::RunPodprof("agents --format json --aggregator " + address);
        nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
        if (j.is_discarded() || j["agents"].empty()) return false;
        row = j["agents"][0];
        return row["workload"] == "unreachable";
      },
      absl::Seconds(10)));
  EXPECT_EQ(row["state"], "online");
  EXPECT_EQ(row["dial_error"], "");
  EXPECT_THAT(row["workload_error"].get<std::string>(),
              ::testing::StartsWith("cannot reach its workload's profiler at 127.0.0.1:1"));
  EXPECT_EQ(row["note"], row["workload_error"]);
  podprof::testing::PodprofResult table =
      podprof::testing::RunPodprof("agents --aggregator " + address);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, ::testing::ContainsRegex("WORKLOAD"));
  EXPECT_THAT(table.out, ::testing::ContainsRegex("host-a .* online +unreachable "));
  EXPECT_THAT(table.out,
              ::testing::HasSubstr("cannot reach its workload's profiler at 127.0.0.1:1"));
}

TEST(AgentProcessTest, RegistersAndHeartbeatsWithLabels) {
  Scratch s("register");
  FakeAggregator agg;
  int port = 0;
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&agg);
  auto server = b.BuildAndStart();
  s.Workload("127.0.0.1:1", "none");
  s.host().aggregator = absl::StrCat("127.0.0.1:", port);
  s.host().clock_offset_ns = 5'000'000;
  s.pod.agent_flags = {"--label=pod=p7"};
  auto agent = StartAgent(s);
  ASSERT_TRUE(agent->ready());
  for (int i = 0; i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    absl::MutexLock l(&agg.mu);
    if (agg.heartbeats.size() >= 3) break;
  }
  {
    absl::MutexLock l(&agg.mu);
    ASSERT_EQ(agg.registered.size(), 1u);
    EXPECT_EQ(agg.registered[0].host_name(), "host-a");
    EXPECT_EQ(agg.registered[0].labels().at("pod"), "p7");
    EXPECT_EQ(agg.registered[0].agent_version(), absl::StrCat("podprof-agent ", kVersion));
    EXPECT_GE(agg.heartbeats.size(), 3u);
    // Clock probes over UDP on the gRPC port's number, answered on the agent's (5 ms fast)
    // clock.
    const int probe_port = agent->info()["clock_probe_port"].get<int>();
    EXPECT_EQ(probe_port, agent->info()["agent_port"].get<int>());
    EXPECT_EQ(agg.registered[0].clock_probe_port(), static_cast<uint32_t>(probe_port));
    RealClock real;
    auto probes = ProbeClock("127.0.0.1", probe_port, 8, 1'000'000'000, real);
    ASSERT_OK(probes);
    ASSERT_FALSE(probes->empty());
    for (const ProbeTimes& p : *probes) {
      EXPECT_LE(p.t3 - p.t4, 5'000'000);
      EXPECT_GE(p.t2 - p.t1, 5'000'000);
    }
  }
  agent->Stop();
  server->Shutdown(std::chrono::system_clock::now());
}

TEST(AgentProcessTest, XprofFacadeProxiesToTheWorkload) {
  Scratch s("facade");
  s.Workload("", "none");
  s.host().agent_profiler_service_listen = "127.0.0.1:0";
  auto sim = StartSimhost(s);
  ASSERT_TRUE(sim->ready());
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(agent->ready());
  auto facade = tensorflow::ProfilerService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", agent->info()["profiler_service_port"].get<int>()),
      grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  tensorflow::ProfileRequest req;
  // Under the spool's xprof folder (--temp-dir=tmp), which the facade allows.
  req.set_repository_root(s / "tmp/xprof");
  req.set_session_id("2026_11_29_12_00_00");
  req.set_host_name("10.1.2.3:7102");
  req.mutable_opts()->set_duration_ms(200);
  tensorflow::ProfileResponse resp;
  grpc::Status st = facade->Profile(&ctx, req, &resp);
  ASSERT_OK(st);
  EXPECT_TRUE(fs::exists(s / "tmp/xprof/2026_11_29_12_00_00/10.1.2.3_7102.xplane.pb"));
  // Anywhere else, a link out of the xprof folder included, the workload is never asked.
  fs::create_directories(s / "elsewhere");
  fs::create_symlink(s / "elsewhere", s / "tmp/xprof/out");
  for (const std::string& root :
       {s / "elsewhere", s / "tmp/xprof/../../elsewhere", s / "tmp/xprof/out"}) {
    grpc::ClientContext c2;
    c2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    req.set_repository_root(root);
    grpc::Status refused = facade->Profile(&c2, req, &resp);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << root;
    EXPECT_TRUE(absl::StrContains(refused.error_message(), "allowed_roots"))
        << refused.error_message();
  }
  EXPECT_TRUE(fs::is_empty(s / "elsewhere"));
}

TEST(AgentProcessTest, ChipsFromMetricsBeforeAnyCaptureAndMetricsDownIsAWarning) {
  Scratch s("metrics");
  auto sim = StartSimhost(s);
  ASSERT_TRUE(sim->ready());
  {
    auto agent = StartAgent(s, sim.get());
    ASSERT_TRUE(agent->ready());
    auto stub = AgentStub(*agent);
    grpc::ClientContext ctx;
    podprof::v1::InfoResponse info;
    ASSERT_OK(stub->Info(&ctx, podprof::v1::InfoRequest(), &info));
    EXPECT_EQ(info.host().chips_size(), 4);
    EXPECT_EQ(info.workload_endpoints_size(), 2);
    for (const auto& e : info.workload_endpoints()) EXPECT_TRUE(e.reachable()) << e.address();
  }
  fs::remove(launch::AgentReadyFile(s.pod, 0));
  s.Workload("", "127.0.0.1:1");
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(agent->ready());
  auto stub = AgentStub(*agent);
  CaptureResult r = Capture(*stub, "no-metrics", 0, 200);
  ASSERT_OK(r.status);
  ASSERT_TRUE(r.chunks.back().has_trailer());
  bool warned = false;
  for (const auto& w : r.chunks.back().trailer().warnings()) {
    warned |= absl::StrContains(w, "runtime metrics at 127.0.0.1:1 unavailable");
  }
  EXPECT_TRUE(warned);
}

TEST(AgentProcessTest, ClientGoneTerminatesTheWorkloadSession) {
  Scratch s("cancel");
  s.Workload("", "none");
  auto sim = StartSimhost(s);
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(sim->ready() && agent->ready());
  auto stub = AgentStub(*agent);
  RealClock clock;
  grpc::ClientContext ctx;
  podprof::v1::CaptureRequest req;
  req.set_capture_id("cancel-me");
  req.set_duration_ms(20'000);
  auto reader = stub->Capture(&ctx, req);
  EXPECT_TRUE(
      testing::WaitFor([&] { return ActiveCapture(*stub) == "cancel-me"; }, absl::Seconds(5)))
      << "the capture never began";
  const int64_t t0 = clock.MonotonicNs();
  ctx.TryCancel();
  reader->Finish();
  // The workload's session ends long before its 20 s: the agent terminated it.
  nlohmann::json truth;
  for (int i = 0; i < 150; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    truth = nlohmann::json::parse(ReadTestFile(launch::TruthFile(s.pod, 0)));
    if (!truth["sessions"].empty()) break;
  }
  ASSERT_EQ(truth["sessions"].size(), 1u);
  EXPECT_TRUE(truth["sessions"][0]["terminated"].get<bool>());
  EXPECT_LT(clock.MonotonicNs() - t0, 3'000'000'000);
  EXPECT_TRUE(Ping(*stub));
  // And the host is free again, once the agent has seen the cancellation through (the client's
  // Finish returns before the agent's handler does).
  CaptureResult again;
  int attempt = 0;
  testing::WaitFor(
      [&] {
        again = Capture(*stub, absl::StrCat("after-", attempt++), 0, 100);
        return !absl::StrContains(again.status.error_message(), "is busy");
      },
      absl::Seconds(2), absl::Milliseconds(100));
  EXPECT_OK(again.status);
}

// The flight recorder ([recorder] enabled): armed over the simulated host's continuous mode, a
// snapshot request streams the window before it from the ring; an ordinary capture borrows the
// workload's session and the recorder is armed again after it.
podprof::v1::RecorderStatus Recorder(podprof::v1::Agent::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  podprof::v1::InfoResponse info;
  EXPECT_TRUE(stub.Info(&ctx, podprof::v1::InfoRequest(), &info).ok());
  return info.recorder();
}

bool AwaitArmed(podprof::v1::Agent::Stub& stub) {
  for (int i = 0; i < 200; ++i) {
    if (Recorder(stub).recorder_state() == podprof::v1::RECORDER_STATE_ARMED) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

CaptureResult Snapshot(podprof::v1::Agent::Stub& stub, const std::string& id, int64_t end_ns,
                       int duration_ms) {
  podprof::v1::CaptureRequest req;
  req.set_capture_id(id);
  req.set_start_ns(end_ns - int64_t{duration_ms} * 1'000'000);
  req.set_duration_ms(duration_ms);
  req.set_snapshot(true);
  return Capture(stub, req);
}

uint64_t Events(const CaptureResult& r) {
  uint64_t n = 0;
  for (const auto& c : r.chunks) n += c.has_trailer() ? c.trailer().event_count() : 0;
  return n;
}

TEST(AgentProcessTest, ASnapshotStreamsTheRecordersLastWindow) {
  Scratch s("recorder");
  s.pod.agent_config = "[recorder]\nenabled = true\nwindow = \"2s\"\n";
  auto sim = StartSimhost(s);
  ASSERT_TRUE(sim->ready());
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(agent->ready());
  auto stub = AgentStub(*agent);
  ASSERT_TRUE(AwaitArmed(*stub)) << Recorder(*stub).reason();
  absl::SleepFor(absl::Seconds(3));
  EXPECT_GT(Recorder(*stub).segments(), 0u);
  EXPECT_EQ(Recorder(*stub).window_ns(), 2'000'000'000);

  RealClock clock;
  const int64_t at = clock.NowNs();
  CaptureResult r = Snapshot(*stub, "snap-1", at, 2000);
  ASSERT_OK(r.status);
  ASSERT_TRUE(r.chunks.back().has_trailer());
  const auto& t = r.chunks.back().trailer();
  EXPECT_LE(t.actual_start_ns(), at - 2'000'000'000) << "the whole window, from the ring";
  EXPECT_GE(t.actual_end_ns(), at - 100'000'000);
  EXPECT_LT(t.actual_end_ns(), at + 5'000'000'000);
  EXPECT_GT(Events(r), 100u);
  // Where each core stood at the trigger, and nothing else to say.
  ASSERT_EQ(t.warnings_size(), 1);
  EXPECT_THAT(t.warnings(0), ::testing::StartsWith("runtime status: core 0 (chip 0) step "));
  EXPECT_THAT(t.warnings(0), ::testing::HasSubstr("; core 3 (chip 3) step "));

  // An ordinary capture borrows the workload's one session, then the recorder is armed again.
  CaptureResult c = Capture(*stub, "cap-1", clock.NowNs() + 200'000'000, 300);
  ASSERT_OK(c.status);
  EXPECT_GT(Events(c), 0u);
  EXPECT_TRUE(AwaitArmed(*stub));
}

TEST(AgentProcessTest, WithoutARecorderASnapshotCapturesFromNowAndSaysSo) {
  Scratch s("no_recorder");
  auto sim = StartSimhost(s);
  ASSERT_TRUE(sim->ready());
  auto agent = StartAgent(s, sim.get());
  ASSERT_TRUE(agent->ready());
  auto stub = AgentStub(*agent);
  // The state as the enum, and by its name for readers older than the enum.
  EXPECT_EQ(Recorder(*stub).recorder_state(), podprof::v1::RECORDER_STATE_OFF);
  EXPECT_EQ(Recorder(*stub).state(), "off");
  RealClock clock;
  const int64_t at = clock.NowNs();
  CaptureResult r = Snapshot(*stub, "snap-1", at, 300);
  ASSERT_OK(r.status);
  const auto& t = r.chunks.back().trailer();
  EXPECT_GE(t.actual_start_ns(), at) << "from the request on";
  // The window's honesty before the runtime status (#53).
  ASSERT_EQ(t.warnings_size(), 2);
  EXPECT_NE(t.warnings(0).find("no flight recorder armed"), std::string::npos) << t.warnings(0);
  EXPECT_THAT(t.warnings(1), ::testing::StartsWith("runtime status: core 0"));
  EXPECT_GT(Events(r), 0u);
}

// What the agent found wrong with itself at start-up reaches `podprof agents` through its
// registration, in the NOTE column, with what to set.
TEST(AgentProcessTest, PodprofAgentsShowsAnAdvertisedAddressThatDoesNotResolve) {
  Scratch s("agents_advertise");
  s.Workload("127.0.0.1:1", "none");
  auto aggregator = podprof::testing::StartBuiltAggregator(s / "agg");
  ASSERT_TRUE(aggregator->ready());
  const std::string address = absl::StrCat("127.0.0.1:", aggregator->info()["port"].get<int>());
  s.host().aggregator = address;
  s.host().agent_advertise = UnresolvableHost() + ":0";
  auto agent = StartAgent(s);
  ASSERT_TRUE(agent->ready());
  nlohmann::json row;
  ASSERT_TRUE(podprof::testing::WaitFor(
      [&] {
        podprof::testing::PodprofResult r =
            podprof::testing::RunPodprof("agents --format json --aggregator " + address);
        nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
        if (j.is_discarded() || j["agents"].empty()) return false;
        row = j["agents"][0];
        return !row["agent_warnings"].empty();
      },
      absl::Seconds(10)));
  ASSERT_EQ(row["agent_warnings"].size(), 1u);
  EXPECT_THAT(row["agent_warnings"][0].get<std::string>(),
              ::testing::HasSubstr("at " + UnresolvableHost() + " (advertise = " +
                                   UnresolvableHost() + ":0), which does not resolve"));
  EXPECT_THAT(row["note"].get<std::string>(),
              ::testing::HasSubstr(row["agent_warnings"][0].get<std::string>()));
  podprof::testing::PodprofResult table =
      podprof::testing::RunPodprof("agents --aggregator " + address);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, ::testing::HasSubstr("does not resolve on this host"));
  EXPECT_THAT(table.out, ::testing::HasSubstr("set --advertise"));
}

}  // namespace
}  // namespace podprof::agent
