#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "agent/capture_runner.h"
#include "agent/config.h"
#include "agent/discovery.h"
#include "agent/profiler_proxy.h"
#include "agent/recorder.h"
#include "agent/registrar.h"
#include "agent/xprof_bounds.h"
#include "common/clock.h"
#include "common/config.h"
#include "gtest/gtest.h"
#include "proto/recorder_states.h"
#include "tests/util/shipped_config.h"
#include "tests/util/status_matchers.h"

namespace podprof::agent {
namespace {

std::string DataDir() { return std::string(PODPROF_SOURCE_DIR) + "/tests/data"; }

std::string WriteConfig(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// #53: deploy/agent.toml sets every key the loader knows, each at its compiled default; none is
// deliberately different.
TEST(AgentConfigTest, TheShippedFileSetsEveryKeyAtItsDefault) {
  const std::string path = std::string(PODPROF_SOURCE_DIR) + "/deploy/agent.toml";
  absl::StatusOr<ConfigFile> file = ConfigFile::Load(path);
  ASSERT_OK(file);
  EXPECT_EQ(testing::KeysNotSet(*file, AgentConfigKeys()), std::vector<std::string>{});
  absl::StatusOr<AgentConfig> shipped = LoadAgentConfig(path);
  ASSERT_OK(shipped);
  using C = AgentConfig;
  using J = nlohmann::json;
  const std::map<std::string, testing::KeyValue<C>> values = {
      {"listen", [](const C& c) { return J(c.listen); }},
      {"aggregator", [](const C& c) { return J(c.aggregator); }},
      {"advertise", [](const C& c) { return J(c.advertise); }},
      {"advertise_check", [](const C& c) { return J(c.advertise_check); }},
      {"clock_probe", [](const C& c) { return J(c.clock_probe); }},
      {"profiler_service_listen", [](const C& c) { return J(c.profiler_service_listen); }},
      {"http.listen", [](const C& c) { return J(c.http_listen); }},
      {"host_name", [](const C& c) { return J(c.host_name); }},
      {"workload.profiler", [](const C& c) { return J(c.workload_profiler); }},
      {"workload.metrics", [](const C& c) { return J(c.workload_metrics); }},
      {"workload.counter_interval", [](const C& c) { return J(c.counter_interval_ns); }},
      {"analysis.enabled", [](const C& c) { return J(c.analyse); }},
      {"discovery.sysfs_root", [](const C& c) { return J(c.sysfs_root); }},
      {"labels.*", [](const C& c) { return J(c.labels); }},
      {"slice", [](const C& c) { return J(c.slice); }},
      {"slice_worker", [](const C& c) { return J(c.slice_worker); }},
      {"limits.max_capture_duration", [](const C& c) { return J(c.max_capture_duration_ns); }},
      {"limits.max_inflight_bytes", [](const C& c) { return J(c.max_inflight_bytes); }},
      {"limits.workload_timeout", [](const C& c) { return J(c.workload_timeout_ns); }},
      {"heartbeat.interval", [](const C& c) { return J(c.heartbeat_interval_ns); }},
      {"heartbeat.max_backoff", [](const C& c) { return J(c.heartbeat_max_backoff_ns); }},
      {"drain_timeout", [](const C& c) { return J(c.drain_timeout_ns); }},
      {"temp_dir", [](const C& c) { return J(c.temp_dir); }},
      {"tls.cert", [](const C& c) { return J(c.tls_cert); }},
      {"tls.key", [](const C& c) { return J(c.tls_key); }},
      {"tls.ca", [](const C& c) { return J(c.tls_ca); }},
      {"insecure", [](const C& c) { return J(c.insecure); }},
      {"tls.allowed_aggregators", [](const C& c) { return J(c.allowed_aggregators); }},
      {"tls.allowed_profiler_clients", [](const C& c) { return J(c.allowed_profiler_clients); }},
      {"xprof.allowed_roots", [](const C& c) { return J(c.xprof_allowed_roots); }},
      {"recorder.enabled", [](const C& c) { return J(c.recorder_enabled); }},
      {"recorder.window", [](const C& c) { return J(c.recorder_window_ns); }},
      {"recorder.max_bytes", [](const C& c) { return J(c.recorder_max_bytes); }},
      {"recorder.max_slowdown", [](const C& c) { return J(c.recorder_max_slowdown); }},
      {"recorder.guard_window", [](const C& c) { return J(c.recorder_guard_window_ns); }},
      {"telemetry.enabled", [](const C& c) { return J(c.telemetry_enabled); }},
      {"telemetry.interval", [](const C& c) { return J(c.telemetry_interval_ns); }},
  };
  testing::ExpectShippedDefaults(AgentConfigKeys(), values, *shipped, AgentConfig(),
                                 /*differ=*/{});
}

TEST(AgentConfigTest, TheExampleFileLoadsWithTheDefaults) {
  auto c = LoadAgentConfig(std::string(PODPROF_SOURCE_DIR) + "/deploy/agent.toml");
  ASSERT_OK(c);
  AgentConfig defaults;
  EXPECT_EQ(c->listen, defaults.listen);
  EXPECT_EQ(c->workload_profiler, defaults.workload_profiler);
  EXPECT_EQ(c->counter_interval_ns, defaults.counter_interval_ns);
  EXPECT_EQ(c->max_inflight_bytes, defaults.max_inflight_bytes);
  EXPECT_EQ(c->heartbeat_max_backoff_ns, defaults.heartbeat_max_backoff_ns);
}

TEST(AgentConfigTest, ValuesAndLabelsAreRead) {
  auto c = LoadAgentConfig(WriteConfig("a.toml", R"(
listen = "127.0.0.1:9101"
aggregator = "agg:7100"
[workload]
metrics = ["localhost:8431", "localhost:8432"]
counter_interval = "250ms"
[labels]
pod = "p1"
)"));
  ASSERT_OK(c);
  EXPECT_EQ(c->listen, "127.0.0.1:9101");
  EXPECT_EQ(c->workload_metrics.size(), 2u);
  EXPECT_EQ(c->counter_interval_ns, 250'000'000);
  EXPECT_EQ(c->labels.at("pod"), "p1");
}

TEST(AgentConfigTest, BadKeysAndValuesNameFileAndKey) {
  std::string path = WriteConfig("bad1.toml", "lisen = \"0.0.0.0:1\"\n");
  auto unknown = LoadAgentConfig(path);
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), path)) << unknown.status();
  EXPECT_TRUE(absl::StrContains(unknown.status().message(), "lisen")) << unknown.status();

  auto type = LoadAgentConfig(WriteConfig("bad2.toml", "[workload]\ncounter_interval = 5\n"));
  ASSERT_FALSE(type.ok());
  EXPECT_TRUE(absl::StrContains(type.status().message(), "workload.counter_interval"))
      << type.status();

  auto value = LoadAgentConfig(WriteConfig("bad3.toml", "listen = \"nowhere\"\n"));
  ASSERT_FALSE(value.ok());
  EXPECT_TRUE(absl::StrContains(value.status().message(), "listen")) << value.status();
  EXPECT_TRUE(absl::StrContains(value.status().message(), "bad3.toml")) << value.status();
}

TEST(AgentConfigTest, ReloadChangesOnlyReloadableKeys) {
  AgentConfig running, fresh;
  fresh.listen = "1.2.3.4:1";
  fresh.labels["job"] = "x";
  fresh.counter_interval_ns = 200'000'000;
  std::vector<std::string> changed = ApplyReloadable(fresh, &running);
  EXPECT_EQ(changed, (std::vector<std::string>{"labels", "workload.counter_interval"}));
  EXPECT_EQ(running.listen, AgentConfig().listen);
  EXPECT_EQ(running.labels.at("job"), "x");
}

TEST(AgentConfigTest, FlagsOverrideTheFile) {
  AgentFlags flags;
  flags.config = WriteConfig("flags.toml", R"(
aggregator = "agg:7100"
[workload]
counter_interval = "50ms"
[labels]
job = "train"
)");
  flags.config_given = true;
  flags.aggregator = "other:7100";
  flags.counter_interval = "20ms";
  flags.labels = {"pod=p1"};
  flags.workload_metrics = {"none"};
  flags.profiler_service_listen = "none";
  absl::StatusOr<AgentConfig> c = BuildAgentConfig(flags);
  ASSERT_OK(c);
  EXPECT_EQ(c->aggregator, "other:7100");
  EXPECT_EQ(c->counter_interval_ns, 20'000'000);
  EXPECT_EQ(c->labels, (std::map<std::string, std::string>{{"job", "train"}, {"pod", "p1"}}));
  EXPECT_TRUE(c->workload_metrics.empty());
  EXPECT_TRUE(c->profiler_service_listen.empty());
}

// The workload's environment, as ApplySliceEnvironment reads it.
std::function<const char*(const char*)> Environment(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(AgentConfigTest, TheSliceComesFromTheConfigurationElseTheEnvironment) {
  const auto env = Environment({{"MEGASCALE_SLICE_ID", "3"}, {"TPU_WORKER_ID", "5"}});
  AgentConfig from_env;
  ASSERT_OK(ApplySliceEnvironment(env, &from_env));
  EXPECT_EQ(from_env.slice, 3);
  EXPECT_EQ(from_env.slice_worker, 5);

  // The file's keys win over the environment, each on its own.
  absl::StatusOr<AgentConfig> file =
      LoadAgentConfig(WriteConfig("slice.toml", "slice = 1\nslice_worker = 0\n"));
  ASSERT_OK(file);
  ASSERT_OK(ApplySliceEnvironment(env, &*file));
  EXPECT_EQ(file->slice, 1);
  EXPECT_EQ(file->slice_worker, 0);
  AgentConfig slice_only;
  slice_only.slice = 2;
  ASSERT_OK(ApplySliceEnvironment(env, &slice_only));
  EXPECT_EQ(slice_only.slice, 2);
  EXPECT_EQ(slice_only.slice_worker, 5);

  // A worker id without a slice is a single-slice job's: no slice, no worker.
  AgentConfig single;
  ASSERT_OK(ApplySliceEnvironment(Environment({{"TPU_WORKER_ID", "5"}}), &single));
  EXPECT_EQ(single.slice, -1);
  EXPECT_EQ(single.slice_worker, -1);

  AgentConfig bad;
  absl::Status s = ApplySliceEnvironment(Environment({{"MEGASCALE_SLICE_ID", "s1"}}), &bad);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), "MEGASCALE_SLICE_ID=\"s1\"")) << s;
  EXPECT_FALSE(LoadAgentConfig(WriteConfig("slice-bad.toml", "slice = -2\n")).ok());
}

TEST(AgentConfigTest, SliceFlagsOverrideTheFile) {
  AgentFlags flags;
  flags.config = WriteConfig("slice-flags.toml", "slice = 1\nslice_worker = 2\n");
  flags.config_given = true;
  flags.slice = 4;
  absl::StatusOr<AgentConfig> c = BuildAgentConfig(flags);
  ASSERT_OK(c);
  EXPECT_EQ(c->slice, 4);
  EXPECT_EQ(c->slice_worker, 2);
}

TEST(AgentConfigTest, NoneTurnsTheXprofFacadeOffInTheFileToo) {
  AgentFlags flags;
  flags.config = WriteConfig("facade-none.toml", "profiler_service_listen = \"none\"\n");
  flags.config_given = true;
  absl::StatusOr<AgentConfig> c = BuildAgentConfig(flags);
  ASSERT_OK(c);
  EXPECT_TRUE(c->profiler_service_listen.empty());
}

TEST(AgentConfigTest, BadFlagsAndAMissingNamedFileAreNamed) {
  AgentFlags flags;
  flags.config = ::testing::TempDir() + "/missing-agent.toml";
  EXPECT_OK(BuildAgentConfig(flags)) << "the default path may be absent";
  flags.config_given = true;
  absl::StatusOr<AgentConfig> missing = BuildAgentConfig(flags);
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "missing-agent.toml"))
      << missing.status();
  flags.config_given = false;
  flags.labels = {"novalue"};
  absl::StatusOr<AgentConfig> label = BuildAgentConfig(flags);
  ASSERT_FALSE(label.ok());
  EXPECT_TRUE(absl::StrContains(label.status().message(), "--label \"novalue\"")) << label.status();
  flags.labels.clear();
  flags.counter_interval = "2x";
  absl::StatusOr<AgentConfig> interval = BuildAgentConfig(flags);
  ASSERT_FALSE(interval.ok());
  EXPECT_TRUE(absl::StrContains(interval.status().message(), "--counter-interval"))
      << interval.status();
  flags.counter_interval.clear();
  flags.listen = "nowhere";
  absl::StatusOr<AgentConfig> listen = BuildAgentConfig(flags);
  ASSERT_FALSE(listen.ok());
  EXPECT_TRUE(absl::StrContains(listen.status().message(), "listen")) << listen.status();
}

TEST(DiscoveryTest, FindsTpuChipsByPciVendorInOrder) {
  auto chips = DiscoverChips(DataDir() + "/sysfs/v6e_4chip");
  ASSERT_OK(chips);
  ASSERT_EQ(chips->size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((*chips)[i].pci_address, "0000:00:0" + std::to_string(4 + i) + ".0");
    EXPECT_EQ((*chips)[i].generation, "v6e");
    EXPECT_EQ((*chips)[i].device_id, 0x006f);
  }
}

TEST(DiscoveryTest, NoTreeIsNoChipsAndDamageIsNamed) {
  auto none = DiscoverChips(DataDir() + "/sysfs/does_not_exist");
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
  auto bad = DiscoverChips(DataDir() + "/sysfs/bad_vendor");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "vendor")) << bad.status();
}

TEST(AgentConfigTest, TheFacadeIsHeldToTlsOnlyBeyondLoopback) {
  for (const char* a : {"127.0.0.1:7102", "127.0.0.2:1", "localhost:7102", "[::1]:7102"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"0.0.0.0:7102", "[::]:7102", "10.0.0.5:7102", "tpu-host-3:7102"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
  AgentConfig c;
  c.profiler_service_listen = "0.0.0.0:7102";
  EXPECT_TRUE(FacadeUsesTls(c));
  c.insecure = true;
  EXPECT_FALSE(FacadeUsesTls(c));
  c.insecure = false;
  c.profiler_service_listen = "127.0.0.1:7102";
  EXPECT_FALSE(FacadeUsesTls(c));
}

TEST(AgentConfigTest, XprofAllowedRootsAreReadAndMustBeAbsoluteDirectories) {
  auto c = LoadAgentConfig(
      WriteConfig("xprof-roots.toml", "[xprof]\nallowed_roots = [\"/var/lib/xprof\"]\n"));
  ASSERT_OK(c);
  EXPECT_EQ(c->xprof_allowed_roots, std::vector<std::string>{"/var/lib/xprof"});
  for (const char* bad : {"relative/dir", "/", "/.."}) {
    auto r = LoadAgentConfig(
        WriteConfig("xprof-bad.toml", absl::StrCat("[xprof]\nallowed_roots = [\"", bad, "\"]\n")));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(r.status().message(), "xprof.allowed_roots")) << r.status();
  }
  AgentConfig running, fresh;
  fresh.xprof_allowed_roots = {"/srv/xprof"};
  EXPECT_EQ(ApplyReloadable(fresh, &running), std::vector<std::string>{"xprof.allowed_roots"});
}

// A fresh spool under the test's temp dir, with its xprof folder and a link out of it.
struct Spool {
  explicit Spool(const std::string& name)
      : dir(std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("spool_", name, "_", getpid())) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "xprof");
    std::filesystem::create_directories(dir / "outside");
    std::filesystem::create_symlink(dir / "outside", dir / "xprof" / "out");
  }
  ~Spool() { std::filesystem::remove_all(dir); }
  XprofBounds Bounds() const {
    XprofBounds b;
    b.max_duration_ns = 300'000'000'000;  // 5 min
    b.spool_dir = dir.string();
    return b;
  }
  std::string operator/(const std::string& rest) const { return (dir / rest).string(); }
  std::filesystem::path dir;
};

tensorflow::ProfileRequest XprofRequest(const std::string& root, uint64_t duration_ms) {
  tensorflow::ProfileRequest r;
  r.set_repository_root(root);
  r.set_session_id("2026_12_03_10_00_00");
  r.set_host_name("10.1.2.3:7102");
  r.set_duration_ms(duration_ms);
  r.mutable_opts()->set_duration_ms(duration_ms);
  return r;
}

constexpr int64_t kNowNs = 1'780'000'000'000'000'000;

TEST(XprofBoundsTest, ASessionLongerThanTheLimitOrOfZeroIsRefusedNamingTheLimit) {
  Spool s("duration");
  const XprofBounds b = s.Bounds();
  tensorflow::ProfileRequest ok = XprofRequest(s / "xprof", 300'000);
  EXPECT_OK(BoundProfileRequest(b, kNowNs, &ok));
  for (uint64_t ms : {uint64_t{300'001}, uint64_t{1} << 60, UINT64_MAX}) {
    tensorflow::ProfileRequest r = XprofRequest(s / "xprof", ms);
    absl::Status st = BoundProfileRequest(b, kNowNs, &r);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << ms;
    EXPECT_TRUE(absl::StrContains(st.message(), "limits.max_capture_duration = 300 s")) << st;
  }
  // Either field alone: the workload waits on opts.duration_ms.
  tensorflow::ProfileRequest opts_only = XprofRequest(s / "xprof", 1000);
  opts_only.mutable_opts()->set_duration_ms(3'600'000);
  EXPECT_EQ(BoundProfileRequest(b, kNowNs, &opts_only).code(), absl::StatusCode::kInvalidArgument);
  tensorflow::ProfileRequest zero = XprofRequest(s / "xprof", 0);
  absl::Status st = BoundProfileRequest(b, kNowNs, &zero);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "at least 1 ms")) << st;
  // Nor may it wait past the limit before starting.
  tensorflow::ProfileRequest later = XprofRequest(s / "xprof", 1000);
  later.mutable_opts()->set_start_timestamp_ns(kNowNs + 301'000'000'000);
  EXPECT_EQ(BoundProfileRequest(b, kNowNs, &later).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckXprofDuration(UINT64_MAX, b, "duration_ms").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_OK(CheckXprofDuration(0, b, "duration_ms"));
}

TEST(XprofBoundsTest, ARepositoryRootOutsideTheAllowedRootsIsRefusedNamingPathAndRoots) {
  Spool s("outside");
  const XprofBounds b = s.Bounds();
  for (const std::string& root :
       {std::string("/etc"), s / "xprof/../outside", s / "xprof/../../etc", s / "xprof/out",
        s / "xprof/out/deeper", s.dir.string(), std::string("relative/xprof")}) {
    tensorflow::ProfileRequest r = XprofRequest(root, 1000);
    absl::Status st = BoundProfileRequest(b, kNowNs, &r);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << root;
    EXPECT_TRUE(absl::StrContains(st.message(), root)) << st;
    if (root.front() == '/') {
      EXPECT_TRUE(absl::StrContains(st.message(), XprofSpoolRoot(s.dir.string()))) << st;
      EXPECT_TRUE(absl::StrContains(st.message(), "allowed_roots")) << st;
    }
  }
  // The session id and host name are parts of the path too.
  tensorflow::ProfileRequest up = XprofRequest(s / "xprof", 1000);
  up.set_session_id("../../etc");
  EXPECT_EQ(BoundProfileRequest(b, kNowNs, &up).code(), absl::StatusCode::kInvalidArgument);
  tensorflow::ProfileRequest link_session = XprofRequest(s / "xprof", 1000);
  link_session.set_session_id("out");
  EXPECT_EQ(BoundProfileRequest(b, kNowNs, &link_session).code(),
            absl::StatusCode::kInvalidArgument);
  tensorflow::ProfileRequest host = XprofRequest(s / "xprof", 1000);
  host.mutable_opts()->set_override_hostname("../../../etc/cron.d/x");
  EXPECT_EQ(BoundProfileRequest(b, kNowNs, &host).code(), absl::StatusCode::kInvalidArgument);
  tensorflow::ProfileRequest path = XprofRequest(s / "xprof", 1000);
  path.mutable_opts()->set_repository_path("/etc");
  EXPECT_EQ(BoundProfileRequest(b, kNowNs, &path).code(), absl::StatusCode::kInvalidArgument);
}

TEST(XprofBoundsTest, ALinkInPlaceOfTheSpoolsXprofFolderIsNotFollowed) {
  Spool s("xprof_link");
  std::filesystem::remove_all(s.dir / "xprof");
  std::filesystem::create_symlink(s.dir / "outside", s.dir / "xprof");
  tensorflow::ProfileRequest r = XprofRequest("", 1000);
  EXPECT_EQ(BoundProfileRequest(s.Bounds(), kNowNs, &r).code(), absl::StatusCode::kInvalidArgument);
}

TEST(XprofBoundsTest, RootsInsideAreAcceptedAndAnEmptyOneIsTheSpools) {
  Spool s("inside");
  XprofBounds b = s.Bounds();
  for (const std::string& root :
       {s / "xprof", s / "xprof/", s / "xprof/jax/plugins/profile", s / "xprof/a/../b"}) {
    tensorflow::ProfileRequest r = XprofRequest(root, 1000);
    absl::Status st = BoundProfileRequest(b, kNowNs, &r);
    EXPECT_OK(st) << root;
    EXPECT_EQ(r.repository_root(), root) << "left as sent";
  }
  tensorflow::ProfileRequest empty = XprofRequest("", 1000);
  ASSERT_OK(BoundProfileRequest(b, kNowNs, &empty));
  EXPECT_EQ(empty.repository_root(), s / "xprof");
  // An allowed root adds one; a link into it resolves inside.
  b.allowed_roots = {s / "outside"};
  tensorflow::ProfileRequest allowed = XprofRequest(s / "outside/run", 1000);
  EXPECT_OK(BoundProfileRequest(b, kNowNs, &allowed));
  tensorflow::ProfileRequest via_link = XprofRequest(s / "xprof/out", 1000);
  EXPECT_OK(BoundProfileRequest(b, kNowNs, &via_link));
}

// The workload's profiler: answers every call, keeping the requests.
class FakeWorkloadProfiler final : public tensorflow::ProfilerService::Service {
 public:
  grpc::Status Profile(grpc::ServerContext*, const tensorflow::ProfileRequest* request,
                       tensorflow::ProfileResponse*) override {
    absl::MutexLock lock(&mu);
    profiles.push_back(*request);
    return grpc::Status::OK;
  }
  grpc::Status Terminate(grpc::ServerContext*, const tensorflow::TerminateRequest* request,
                         tensorflow::TerminateResponse*) override {
    absl::MutexLock lock(&mu);
    terminated.push_back(request->session_id());
    return grpc::Status::OK;
  }
  grpc::Status Monitor(grpc::ServerContext*, const tensorflow::MonitorRequest*,
                       tensorflow::MonitorResponse*) override {
    absl::MutexLock lock(&mu);
    ++monitors;
    return grpc::Status::OK;
  }
  absl::Mutex mu;
  std::vector<tensorflow::ProfileRequest> profiles ABSL_GUARDED_BY(mu);
  std::vector<std::string> terminated ABSL_GUARDED_BY(mu);
  int monitors ABSL_GUARDED_BY(mu) = 0;
};

std::unique_ptr<grpc::Server> Serve(grpc::Service* service, int* port) {
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  b.RegisterService(service);
  return b.BuildAndStart();
}

// An agent whose workload is a FakeWorkloadProfiler, and its facade, both on loopback.
struct Facade {
  explicit Facade(const Spool& spool) {
    int workload_port = 0;
    workload_server = Serve(&workload, &workload_port);
    AgentConfig c;
    c.workload_profiler = {absl::StrCat("127.0.0.1:", workload_port)};
    c.workload_metrics.clear();
    c.sysfs_root = spool / "no-sysfs";
    c.temp_dir = spool.dir.string();
    c.max_capture_duration_ns = 300'000'000'000;
    auto a = Agent::Create(c, clock);
    EXPECT_OK(a);  // a constructor: no ASSERT_OK
    agent = std::move(*a);
    proxy = std::make_unique<ProfilerProxy>(agent.get(), false, nullptr);
    int port = 0;
    server = Serve(proxy.get(), &port);
    stub = tensorflow::ProfilerService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  ~Facade() {
    server->Shutdown();
    workload_server->Shutdown();
  }
  grpc::Status Profile(const tensorflow::ProfileRequest& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    tensorflow::ProfileResponse resp;
    return stub->Profile(&ctx, req, &resp);
  }
  RealClock clock;
  FakeWorkloadProfiler workload;
  std::unique_ptr<grpc::Server> workload_server;
  std::unique_ptr<Agent> agent;
  std::unique_ptr<ProfilerProxy> proxy;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<tensorflow::ProfilerService::Stub> stub;
};

TEST(ProfilerProxyTest, ABoundedSessionReachesTheWorkloadWithTheSpoolAsItsEmptyRoot) {
  Spool s("proxy_ok");
  Facade f(s);
  grpc::Status st = f.Profile(XprofRequest("", 200));
  ASSERT_OK(st);
  absl::MutexLock lock(&f.workload.mu);
  ASSERT_EQ(f.workload.profiles.size(), 1u);
  EXPECT_EQ(f.workload.profiles[0].repository_root(), s / "xprof");
  EXPECT_TRUE(f.agent->active_capture().empty()) << "the host is free again";
}

TEST(ProfilerProxyTest, RequestsBeyondTheBoundsNeverReachTheWorkload) {
  Spool s("proxy_refused");
  Facade f(s);
  grpc::Status too_long = f.Profile(XprofRequest(s / "xprof", 300'001));
  EXPECT_EQ(too_long.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(too_long.error_message(), "limits.max_capture_duration"))
      << too_long.error_message();
  grpc::Status outside = f.Profile(XprofRequest("/etc", 200));
  EXPECT_EQ(outside.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(outside.error_message(), "\"/etc\"")) << outside.error_message();
  grpc::ClientContext ctx;
  tensorflow::MonitorRequest mreq;
  mreq.set_duration_ms(UINT64_MAX);
  tensorflow::MonitorResponse mresp;
  EXPECT_EQ(f.stub->Monitor(&ctx, mreq, &mresp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  absl::MutexLock lock(&f.workload.mu);
  EXPECT_TRUE(f.workload.profiles.empty());
  EXPECT_EQ(f.workload.monitors, 0);
}

TEST(ProfilerProxyTest, ABusyHostIsRefusedNamingTheCaptureThatHoldsIt) {
  Spool s("proxy_busy");
  Facade f(s);
  ASSERT_OK(f.agent->BeginCapture("cap-7"));
  grpc::Status st = f.Profile(XprofRequest(s / "xprof", 200));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_TRUE(absl::StrContains(st.error_message(),
                                "the host is busy with capture \"cap-7\"; try again when it ends"))
      << st.error_message();
  grpc::ClientContext mctx;
  tensorflow::MonitorResponse mresp;
  EXPECT_EQ(f.stub->Monitor(&mctx, tensorflow::MonitorRequest(), &mresp).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
  // Nor may a facade caller end podprof's own capture.
  grpc::ClientContext tctx;
  tensorflow::TerminateRequest treq;
  treq.set_session_id("cap-7");
  tensorflow::TerminateResponse tresp;
  grpc::Status term = f.stub->Terminate(&tctx, treq, &tresp);
  EXPECT_EQ(term.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(term.error_message(), "cap-7")) << term.error_message();
  f.agent->EndCapture();
  absl::MutexLock lock(&f.workload.mu);
  EXPECT_TRUE(f.workload.profiles.empty());
  EXPECT_TRUE(f.workload.terminated.empty());
  EXPECT_EQ(f.workload.monitors, 0);
}

TEST(RegistrarTest, BackoffDoublesFromOneSecondUpToTheCap) {
  int64_t b = 0;
  std::vector<int64_t> seen;
  for (int i = 0; i < 7; ++i) seen.push_back(b = NextBackoffNs(b, 30'000'000'000));
  EXPECT_EQ(seen, (std::vector<int64_t>{1'000'000'000, 2'000'000'000, 4'000'000'000, 8'000'000'000,
                                        16'000'000'000, 30'000'000'000, 30'000'000'000}));
}

class DiscardingSink final : public stream::ChunkSink {
 public:
  bool Write(const v1::CaptureChunk&) override { return true; }
};

// The checks come before the workload is asked: a Workload with no stubs is enough.
absl::Status RunDirect(const v1::CaptureRequest& request, const RunnerLimits& limits = {}) {
  FakeClock clock(1'700'000'000'000'000'000);
  Workload workload;
  CaptureRunner runner(clock, workload);
  DiscardingSink sink;
  CaptureOutcome outcome;
  return runner.Run(request, v1::HostInfo(), limits, nullptr, &sink, &outcome);
}

TEST(CaptureRunnerTest, DurationOf2To58MsIsRefusedNotWrapped) {
  // (2^58 + 1000) ms * 1,000,000 wrapped to 1 s in int64 and passed the agent's limit.
  v1::CaptureRequest req;
  req.set_capture_id("cap-wrap");
  req.set_duration_ms((uint64_t{1} << 58) + 1000);
  absl::Status s = RunDirect(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(),
            "a capture of 288230376151712744 ms is longer than this agent allows "
            "(limits.max_capture_duration = 300 s)");
  req.set_duration_ms(0);
  EXPECT_EQ(RunDirect(req).message(), "duration_ms must be at least 1, got 0");
  req.set_duration_ms(301'000);
  EXPECT_EQ(RunDirect(req).message(),
            "a capture of 301 s is longer than this agent allows "
            "(limits.max_capture_duration = 300 s)");
}

TEST(CaptureRunnerTest, StartFarPastAnyClockIsRefusedNotOverflowed) {
  v1::CaptureRequest req;
  req.set_capture_id("cap-far");
  req.set_duration_ms(10);
  req.set_start_ns(std::numeric_limits<int64_t>::max());
  absl::Status s = RunDirect(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "start_ns must be at most")) << s;
}

// The recorder's state crosses the wire as its enum and, for aggregators and clients older than
// the enum, by the name they compare with; what is printed (the CLI, the HTTP API's JSON, the
// CSV) is that name, from an agent of either age.
TEST(RecorderStateTest, EachStateCrossesAsItsEnumAndByTheNameItHadBefore) {
  const std::pair<RecorderState, const char*> kStates[] = {
      {RecorderState::kOff, "off"},
      {RecorderState::kArmed, "armed"},
      {RecorderState::kUnsupported, "unsupported"},
      {RecorderState::kBusy, "busy"},
      {RecorderState::kFailed, "failed"},
      {RecorderState::kDisabled, "disabled"}};
  std::set<podprof::v1::RecorderState> seen;
  for (const auto& [state, name] : kStates) {
    SCOPED_TRACE(name);
    const podprof::v1::RecorderState wire = RecorderStateToProto(state);
    EXPECT_NE(wire, podprof::v1::RECORDER_STATE_UNSPECIFIED);
    EXPECT_TRUE(seen.insert(wire).second) << "two states share an enum value";
    EXPECT_STREQ(RecorderStateName(state), name);
    podprof::v1::RecorderStatus now;
    podprof::v1::SetRecorderState(wire, &now);
    EXPECT_EQ(now.state(), name);
    EXPECT_EQ(podprof::v1::RecorderStateOf(now), wire);
    EXPECT_EQ(podprof::v1::RecorderStateText(now), name);
    podprof::v1::RecorderStatus older;  // an agent that predates the enum
    older.set_state(name);
    EXPECT_EQ(podprof::v1::RecorderStateOf(older), wire);
    EXPECT_EQ(podprof::v1::RecorderStateText(older), name);
  }
  // A name this build does not know is printed as sent and read as no state; the enum wins
  // over the name.
  podprof::v1::RecorderStatus future;
  future.set_state("paused");
  EXPECT_EQ(podprof::v1::RecorderStateOf(future), podprof::v1::RECORDER_STATE_UNSPECIFIED);
  EXPECT_EQ(podprof::v1::RecorderStateText(future), "paused");
  future.set_recorder_state(podprof::v1::RECORDER_STATE_BUSY);
  EXPECT_EQ(podprof::v1::RecorderStateOf(future), podprof::v1::RECORDER_STATE_BUSY);
  EXPECT_EQ(podprof::v1::RecorderStateText(future), "busy");
  EXPECT_EQ(podprof::v1::RecorderStateText(podprof::v1::RecorderStatus()), "");
}

}  // namespace
}  // namespace podprof::agent
