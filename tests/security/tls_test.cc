// Mutual TLS end to end, with a throwaway CA made by the openssl CLI: real daemons, the real
// CLI, loopback. Who is refused: a client without a certificate, one from another CA, a
// non-operator starting a capture, an unlisted identity registering as an agent, a daemon
// asked to run without TLS material, and, with the shipped empty allow lists, any certificate
// without the role's URI (a viewer's) acting as an agent, an aggregator or an operator. What
// works: an agent and an operator with their certificates, end to end.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "harness/wait.h"
#include "launch/pod_launcher.h"
#include "nlohmann/json.hpp"
#include "proto/podprof_agent.grpc.pb.h"
#include "proto/podprof_aggregator.grpc.pb.h"
#include "proto/profiler_service.grpc.pb.h"
#include "security/certificate_check.h"
#include "tests/util/child_process.h"
#include "tests/util/curl.h"
#include "tests/util/run_podprof.h"
#include "tests/util/status_matchers.h"

namespace podprof {
namespace {

const std::string kMakeCerts = std::string(PODPROF_SOURCE_DIR) + "/scripts/make-certs.sh";

// How many times `needle` stands in `text`.
size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

namespace fs = std::filesystem;
using testing::ChildProcess;
using testing::PodprofResult;
using testing::ReadTestFile;
using testing::RunPodprof;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::path(::testing::TempDir()) / absl::StrCat("tls_", getpid()));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    MakeCa("ca");
    MakeCa("other-ca");
    MakeCert("ca", "aggregator", "aggregator", "localhost 127.0.0.1");
    MakeCert("ca", "agent", "agent-0", "localhost 127.0.0.1");
    MakeCert("ca", "agent", "agent-1", "localhost 127.0.0.1");
    MakeCert("ca", "agent", "rogue-agent", "localhost 127.0.0.1");
    MakeCert("ca", "operator", "ops-alice");
    MakeCert("ca", "viewer", "viewer-bob");     // clientAuth, no role: may only read
    MakeCert("ca", "aggregator", "agg-nosan");  // names no address it is dialled at
    MakeCert("other-ca", "operator", "intruder", "ops-alice");  // claims the operator's name
    // The agents' sysfs and temporary folders; each test writes the configurations it needs.
    ASSERT_OK(launch::WritePodFiles(Pod()));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string P(const std::string& f) { return (*dir_ / f).string(); }
  // The daemons' command lines (launch/pod_launcher.h): mutual TLS, each daemon's material in
  // its configuration, its files in the suite's folder (`dir`, a folder under it, for a pod of
  // its own); up to two hosts, agent n on host n, each simulated host of two chips.
  static launch::PodOptions Pod(const std::string& dir = "") {
    launch::PodOptions pod;
    pod.bin_dir = PODPROF_BIN_DIR;
    pod.dir = dir.empty() ? dir_->string() : P(dir);
    pod.tls = true;
    pod.hosts = 2;
    pod.chips = 2;
    pod.host.resize(pod.hosts);
    return pod;
  }
  // curl over HTTPS as `who` (the certificate `who`.crt; "" for none), trusting the test CA.
  static testing::CurlResult CurlAs(const std::string& who, const std::string& args) {
    std::string flags = " --cacert " + P("ca.crt");
    if (!who.empty()) {
      absl::StrAppend(&flags, " --cert ", P(who + ".crt"), " --key ", P(who + ".key"));
    }
    return testing::Curl(flags + " " + args, P("curl.out"));
  }
  static void Run(const std::string& cmd) {
    ASSERT_EQ(std::system((cmd + " >/dev/null 2>&1").c_str()), 0) << cmd;
  }
  // The certificates come from scripts/make-certs.sh, as a deployment's would.
  static void MakeCa(const std::string& name) {
    Run(absl::StrCat(kMakeCerts, " --dir ", dir_->string(), " --ca ", name, " --days 2 ca"));
  }
  static void MakeCert(const std::string& ca, const std::string& kind, const std::string& cn,
                       const std::string& addresses = "", int days = 2) {
    Run(absl::StrCat(kMakeCerts, " --dir ", dir_->string(), " --ca ", ca, " --days ", days, " ",
                     kind, " ", cn, " ", addresses));
  }
  // A client presenting `who`'s certificate and trusting the deployment's CA.
  static std::shared_ptr<grpc::ChannelCredentials> CredentialsOf(const std::string& who) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadTestFile(P("ca.crt"));
    o.pem_cert_chain = ReadTestFile(P(who + ".crt"));
    o.pem_private_key = ReadTestFile(P(who + ".key"));
    return grpc::SslCredentials(o);
  }
  static std::string TlsFlags(const std::string& who, const std::string& ca = "ca") {
    return absl::StrCat(" --tls-cert ", P(who + ".crt"), " --tls-key ", P(who + ".key"),
                        " --tls-ca ", P(ca + ".crt"));
  }

  void StartAggregator(const std::string& allowed_agents = "\"agent-0\"",
                       const std::string& cert = "aggregator",
                       const std::string& allowed_operators = "\"ops-alice\"") {
    WriteAggregatorConfig(allowed_agents, allowed_operators, cert);
    const launch::PodOptions pod = Pod();
    fs::remove(launch::AggregatorReadyFile(pod));
    aggregator_ = std::make_unique<ChildProcess>(launch::AggregatorArgs(pod),
                                                 launch::AggregatorReadyFile(pod),
                                                 std::vector<std::string>{}, P("aggregator.log"));
    ASSERT_TRUE(aggregator_->ready());
    addr_ = absl::StrCat("127.0.0.1:", aggregator_->info()["port"].get<int>());
  }
  // The pod's aggregator.toml (launch/ names it in the aggregator's --config).
  static void WriteAggregatorConfig(const std::string& allowed_agents,
                                    const std::string& allowed_operators,
                                    const std::string& cert = "aggregator") {
    std::ofstream(P("aggregator.toml"))
        << "listen = \"127.0.0.1:0\"\n"
        << "[agents]\nheartbeat_interval = \"500ms\"\nprobe_interval = \"1s\"\n"
        << "[tls]\ncert = \"" << P(cert + ".crt") << "\"\nkey = \"" << P(cert + ".key")
        << "\"\nca = \"" << P("ca.crt") << "\"\nallowed_agents = [" << allowed_agents << "]\n"
        << "allowed_operators = [" << allowed_operators << "]\n"
        << "[http]\nlisten = \"127.0.0.1:0\"\n";
  }
  // An agent with `identity`'s certificate, registering as `host` (default: its identity).
  // Its certificate files are `cert`.crt/.key (default: the identity's own).
  // `facade` is where its XProf facade listens ("none": off), `facade_clients` the TOML list of
  // tls.allowed_profiler_clients, `aggregators` that of tls.allowed_aggregators.
  std::unique_ptr<ChildProcess> StartAgent(const std::string& identity, int n,
                                           std::string host = "", std::string cert = "",
                                           const std::string& facade = "none",
                                           const std::string& facade_clients = "",
                                           const std::string& aggregators = "\"aggregator\"") {
    if (host.empty()) host = identity;
    if (cert.empty()) cert = identity;
    const std::string sn = std::to_string(n);
    launch::PodOptions pod = Pod();
    launch::HostOptions& h = pod.host.at(n);
    h.name = host;
    h.agent_profiler_service_listen = facade;
    h.agent_config_file = P("agent" + sn + ".toml");
    h.workload_metrics = "none";
    // An earlier test's ready files would be read as this one's (a facade port of 0).
    fs::remove(launch::SimhostReadyFile(pod, n));
    fs::remove(launch::AgentReadyFile(pod, n));
    const int64_t epoch = RealClock().NowNs();
    auto sim = std::make_unique<ChildProcess>(launch::SimhostArgs(pod, n, epoch),
                                              launch::SimhostReadyFile(pod, n));
    EXPECT_TRUE(sim->ready());
    std::ofstream(P("agent" + sn + ".toml"))
        << "[tls]\ncert = \"" << P(cert + ".crt") << "\"\nkey = \"" << P(cert + ".key")
        << "\"\nca = \"" << P("ca.crt") << "\"\nallowed_aggregators = [" << aggregators << "]\n"
        << "allowed_profiler_clients = [" << facade_clients << "]\n"
        << "[xprof]\nallowed_roots = [\"" << P("xprof") << "\"]\n";
    auto agent = std::make_unique<ChildProcess>(
        launch::AgentArgs(pod, n, epoch, sim->info(), addr_), launch::AgentReadyFile(pod, n),
        std::vector<std::string>{}, P("agent" + sn + ".log"));
    EXPECT_TRUE(agent->ready());
    sims_.push_back(std::move(sim));
    return agent;
  }

  // The serial of the certificate a daemon serves to a new connection (openssl s_client, with
  // an operator's certificate: the servers ask for one), or of a certificate file.
  static std::string ServedSerial(int port) {
    return Shell(absl::StrCat("openssl s_client -connect 127.0.0.1:", port, " -alpn h2 -cert ",
                              P("ops-alice.crt"), " -key ", P("ops-alice.key"), " -CAfile ",
                              P("ca.crt"),
                              " </dev/null 2>/dev/null | openssl x509 -noout -serial"));
  }
  static std::string FileSerial(const std::string& path) {
    return Shell("openssl x509 -noout -serial -in " + path);
  }
  static std::string Shell(const std::string& cmd) {
    std::string out;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char buf[256];
      while (fgets(buf, sizeof buf, f) != nullptr) out += buf;
      pclose(f);
    }
    return out;
  }
  // Waits (up to 20 s) until the aggregator lists `n` agents, each probed, as `who` reads
  // them; returns the last list.
  nlohmann::json WaitForAgents(size_t n, const std::string& who = "ops-alice") {
    nlohmann::json agents;
    podprof::testing::WaitFor(
        [&] {
          PodprofResult r =
              RunPodprof("agents --format json --aggregator " + addr_ + TlsFlags(who));
          EXPECT_EQ(r.exit_code, 0) << r.err;
          agents = nlohmann::json::parse(r.out, nullptr, false)["agents"];
          bool probed = agents.is_array() && agents.size() == n;
          for (const auto& a : agents) probed = probed && a["probe_count"].get<int>() > 0;
          return probed;
        },
        absl::Seconds(20), absl::Milliseconds(100));
    return agents;
  }

  static fs::path* dir_;
  std::string addr_;
  std::unique_ptr<ChildProcess> aggregator_;
  std::vector<std::unique_ptr<ChildProcess>> sims_;
};
fs::path* TlsTest::dir_ = nullptr;

TEST_F(TlsTest, OnlyCertifiedCallersInTheirRoles) {
  StartAggregator();
  auto agent = StartAgent("agent-0", 0);
  auto rogue = StartAgent("rogue-agent", 1);  // a valid certificate, but not a listed agent

  // The operator sees agent-0 registered and probed (the aggregator dialled it over TLS)...
  const nlohmann::json agents = WaitForAgents(1);
  ASSERT_EQ(agents.size(), 1u) << agents.dump() << " (rogue-agent must not be registered)";
  EXPECT_EQ(agents[0]["host"], "agent-0");

  // ...and captures it end to end.
  PodprofResult cap = RunPodprof("capture --duration 300ms --format json --aggregator " + addr_ +
                                 TlsFlags("ops-alice"));
  ASSERT_EQ(cap.exit_code, 0) << cap.err;
  auto cj = nlohmann::json::parse(cap.out);
  EXPECT_EQ(cj["state"], "complete");
  EXPECT_GT(cj["hosts"][0]["events"].get<int64_t>(), 100);

  // A viewer may read but not start captures.
  PodprofResult list = RunPodprof("captures --aggregator " + addr_ + TlsFlags("viewer-bob"));
  EXPECT_EQ(list.exit_code, 0) << list.err;
  PodprofResult denied =
      RunPodprof("capture --duration 300ms --aggregator " + addr_ + TlsFlags("viewer-bob"));
  EXPECT_EQ(denied.exit_code, 4) << denied.err;  // not allowed: its own exit status
  EXPECT_TRUE(absl::StrContains(denied.err,
                                "caller viewer-bob may not act as an operator (not "
                                "in tls.allowed_operators)"))
      << denied.err;

  // Plaintext, and a certificate from another CA (even with the operator's name), fail the
  // handshake.
  PodprofResult plain = RunPodprof("captures --timeout 5s --aggregator " + addr_);
  EXPECT_EQ(plain.exit_code, 3) << plain.err;
  EXPECT_TRUE(absl::StrContains(plain.err, "this aggregator likely requires TLS")) << plain.err;
  PodprofResult intruder =
      RunPodprof("capture --timeout 5s --aggregator " + addr_ + TlsFlags("intruder", "ca"));
  EXPECT_EQ(intruder.exit_code, 3) << intruder.err;
  EXPECT_TRUE(absl::StrContains(intruder.err, "the TLS handshake failed")) << intruder.err;
  // The TLS flags may also come first, like --aggregator.
  PodprofResult first = RunPodprof(TlsFlags("viewer-bob") + " captures --aggregator " + addr_);
  EXPECT_EQ(first.exit_code, 0) << first.err;

  // TLS without a client certificate: refused too.
  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = ReadTestFile(P("ca.crt"));
  auto stub = v1::Aggregator::NewStub(grpc::CreateChannel(addr_, grpc::SslCredentials(no_cert)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ListCapturesResponse resp;
  grpc::Status s = stub->ListCaptures(&ctx, v1::ListCapturesRequest(), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();

  // Only the aggregator may start a capture on an agent, even for a valid operator.
  auto agent_stub = v1::Agent::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", agent->info()["agent_port"].get<int>()),
                          CredentialsOf("ops-alice")));
  grpc::ClientContext actx;
  actx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::CaptureRequest creq;
  creq.set_capture_id("not-from-the-aggregator");
  creq.set_duration_ms(100);
  auto creader = agent_stub->Capture(&actx, creq);
  v1::CaptureChunk chunk;
  while (creader->Read(&chunk)) {
  }
  grpc::Status cs = creader->Finish();
  EXPECT_EQ(cs.error_code(), grpc::StatusCode::PERMISSION_DENIED) << cs.error_message();
  EXPECT_TRUE(absl::StrContains(cs.error_message(), "ops-alice")) << cs.error_message();
}

// With the shipped defaults (every allow list empty) a role is the certificate's role URI,
// which make-certs writes: a certificate the CA signed without it (a viewer's) may read, but
// neither register as an agent, nor take a host's trace from an agent, nor start a capture.
// Before roles held by default, each of these was allowed to any certificate of the CA.
TEST_F(TlsTest, RolesHoldByDefaultWithTheShippedEmptyAllowLists) {
  StartAggregator("", "aggregator", "");
  auto agent = StartAgent("agent-0", 0, "", "", "none", "", "");
  // The start-up lines say which rule applies.
  const std::string agg_log = ReadTestFile(P("aggregator.log"));
  EXPECT_TRUE(absl::StrContains(agg_log,
                                "tls.allowed_agents is empty: only certificates carrying "
                                "urn:podprof:role:agent may act in that role"))
      << agg_log;
  EXPECT_TRUE(absl::StrContains(agg_log, "urn:podprof:role:operator")) << agg_log;
  EXPECT_TRUE(absl::StrContains(ReadTestFile(P("agent0.log")), "urn:podprof:role:aggregator"))
      << ReadTestFile(P("agent0.log"));

  // An agent certificate from make-certs registers; the viewer reads the list.
  const nlohmann::json agents = WaitForAgents(1, "viewer-bob");
  ASSERT_EQ(agents.size(), 1u) << agents.dump();
  EXPECT_EQ(agents[0]["host"], "agent-0");

  // The viewer may not register as an agent (not even the host its certificate names), nor
  // report telemetry (which fires the pod's snapshot triggers).
  auto as_viewer = v1::Aggregator::NewStub(grpc::CreateChannel(addr_, CredentialsOf("viewer-bob")));
  grpc::ClientContext rctx;
  v1::RegisterRequest reg;
  reg.mutable_host()->set_host_name("viewer-bob");
  reg.mutable_host()->set_agent_address("127.0.0.1:9");
  v1::RegisterResponse reg_resp;
  grpc::Status registered = as_viewer->Register(&rctx, reg, &reg_resp);
  EXPECT_EQ(registered.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << registered.error_message();
  EXPECT_TRUE(absl::StrContains(registered.error_message(),
                                "caller viewer-bob may not act as an agent (its certificate does "
                                "not carry urn:podprof:role:agent, and tls.allowed_agents is "
                                "empty)"))
      << registered.error_message();
  grpc::ClientContext tctx;
  v1::ReportTelemetryRequest tel;
  tel.set_host_name("agent-0");
  v1::ReportTelemetryResponse tel_resp;
  grpc::Status reported = as_viewer->ReportTelemetry(&tctx, tel, &tel_resp);
  EXPECT_EQ(reported.error_code(), grpc::StatusCode::PERMISSION_DENIED) << reported.error_message();
  EXPECT_TRUE(absl::StrContains(reported.error_message(), "may not act as an agent"))
      << reported.error_message();

  // Nor call an agent's Capture and receive its trace; nor may an operator, whose role is not
  // the aggregator's.
  const std::string agent_addr = absl::StrCat("127.0.0.1:", agent->info()["agent_port"].get<int>());
  for (const std::string who : {"viewer-bob", "ops-alice"}) {
    auto agent_stub = v1::Agent::NewStub(grpc::CreateChannel(agent_addr, CredentialsOf(who)));
    grpc::ClientContext actx;
    v1::CaptureRequest creq;
    creq.set_capture_id("not-from-the-aggregator-" + who);
    creq.set_duration_ms(100);
    auto creader = agent_stub->Capture(&actx, creq);
    v1::CaptureChunk chunk;
    int chunks = 0;
    while (creader->Read(&chunk)) ++chunks;
    grpc::Status cs = creader->Finish();
    EXPECT_EQ(cs.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << who << ": " << cs.error_message();
    EXPECT_EQ(chunks, 0) << who;
    EXPECT_TRUE(absl::StrContains(cs.error_message(), "urn:podprof:role:aggregator"))
        << cs.error_message();
  }

  // Nor start a capture, over gRPC or HTTPS; the operator's certificate may, and the aggregator's
  // certificate takes the trace from the agent.
  PodprofResult denied =
      RunPodprof("capture --duration 300ms --aggregator " + addr_ + TlsFlags("viewer-bob"));
  EXPECT_EQ(denied.exit_code, 4) << denied.err;
  EXPECT_TRUE(absl::StrContains(denied.err, "caller viewer-bob may not act as an operator"))
      << denied.err;
  const std::string base =
      absl::StrCat("https://127.0.0.1:", aggregator_->info()["http_port"].get<int>());
  const std::string start =
      "-X POST -H 'Content-Type: application/json' --data-binary '{\"duration_ms\": 300}' " + base +
      "/api/v1/captures";
  EXPECT_EQ(CurlAs("viewer-bob", start).status, 403);
  EXPECT_EQ(nlohmann::json::parse(CurlAs("viewer-bob", base + "/api/v1/ui").body)["operator"],
            false);
  EXPECT_EQ(nlohmann::json::parse(CurlAs("ops-alice", base + "/api/v1/ui").body)["operator"], true);
  PodprofResult cap = RunPodprof("capture --duration 300ms --format json --aggregator " + addr_ +
                                 TlsFlags("ops-alice"));
  ASSERT_EQ(cap.exit_code, 0) << cap.err;
  auto cj = nlohmann::json::parse(cap.out);
  EXPECT_EQ(cj["state"], "complete");
  EXPECT_GT(cj["hosts"][0]["events"].get<int64_t>(), 100);
}

// A certificate made before roles (no role URI) acts in a role only when a list names it; a
// non-empty list decides alone, so a role URI does not widen it. Checked on the rule itself.
TEST(RoleAclTest, AnEmptyListTakesTheRoleAndAListDecidesAlone) {
  const security::RoleAcl agents{security::kAgentRole, {}, "tls.allowed_agents", false};
  EXPECT_OK(agents.CheckIdentities({"tpu-host-0"}, {"agent"}, "an agent"));
  EXPECT_FALSE(agents.CheckIdentities({"tpu-host-0"}, {}, "an agent").ok());
  EXPECT_FALSE(agents.CheckIdentities({"tpu-host-0"}, {"operator"}, "an agent").ok());
  EXPECT_FALSE(agents.CheckIdentities({}, {}, "an agent").ok());
  // A name that reads like a role URI is a name, not a role.
  EXPECT_FALSE(agents.CheckIdentities({"urn:podprof:role:agent"}, {}, "an agent").ok());

  const security::RoleAcl listed{security::kAgentRole, {"old-host"}, "tls.allowed_agents", false};
  EXPECT_OK(listed.CheckIdentities({"old-host"}, {}, "an agent"));
  absl::Status other = listed.CheckIdentities({"new-host"}, {"agent"}, "an agent");
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(other.message(), "caller new-host may not act as an agent (not in tls.allowed_agents)");

  // Plaintext (insecure = true, warned of at start-up): nobody has a certificate.
  const security::RoleAcl plain{security::kAgentRole, {}, "tls.allowed_agents", true};
  EXPECT_OK(plain.CheckIdentities({}, {}, "an agent"));
  // A role no certificate names (the XProf facade's clients): any certificate of the CA.
  const security::RoleAcl clients{"", {}, "tls.allowed_profiler_clients", false};
  EXPECT_OK(clients.CheckIdentities({"workload"}, {}, "an XProf client"));
}

// The HTTP API over HTTPS: the same CA, the same roles as gRPC.
TEST_F(TlsTest, TheHttpApiHoldsTheSameRoles) {
  StartAggregator();
  auto agent = StartAgent("agent-0", 0);
  const std::string base =
      absl::StrCat("https://127.0.0.1:", aggregator_->info()["http_port"].get<int>());
  // curl as `who` ("" for no certificate).
  for (int i = 0; i < 100; ++i) {  // until agent-0 is registered and probed
    auto [status, body] = CurlAs("viewer-bob", base + "/api/v1/agents");
    ASSERT_EQ(status, 200) << body;
    auto agents = nlohmann::json::parse(body)["agents"];
    if (agents.size() == 1 && agents[0]["clock_uncertainty_ns"].get<int64_t>() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::string start =
      "-X POST -H 'Content-Type: application/json' --data-binary '{\"duration_ms\": 300}' " + base +
      "/api/v1/captures";
  auto [denied, why] = CurlAs("viewer-bob", start);
  EXPECT_EQ(denied, 403);
  EXPECT_TRUE(absl::StrContains(why, "caller viewer-bob may not act as an operator")) << why;
  auto [started, body] = CurlAs("ops-alice", start);
  ASSERT_EQ(started, 201) << body;
  const std::string id = nlohmann::json::parse(body)["capture"];
  EXPECT_EQ(nlohmann::json::parse(body)["hosts"][0], "agent-0");
  EXPECT_EQ(CurlAs("viewer-bob", base + "/api/v1/captures/" + id).status, 200);
  EXPECT_EQ(CurlAs("viewer-bob", base + "/metrics").status, 200);
  EXPECT_NE(CurlAs("", base + "/api/v1/captures").status, 200);          // no client certificate
  EXPECT_NE(CurlAs("intruder", base + "/api/v1/captures").status, 200);  // another CA's
  // The pages too; and they offer the start form to operators only.
  EXPECT_NE(CurlAs("", base + "/").status, 200);
  EXPECT_NE(CurlAs("", base + "/assets/app.js").status, 200);
  EXPECT_EQ(CurlAs("viewer-bob", base + "/captures/" + id).status, 200);
  EXPECT_EQ(nlohmann::json::parse(CurlAs("viewer-bob", base + "/api/v1/ui").body)["operator"],
            false);
  EXPECT_EQ(nlohmann::json::parse(CurlAs("ops-alice", base + "/api/v1/ui").body)["operator"], true);
  EXPECT_EQ(CurlAs("viewer-bob", "-X POST -H 'Content-Type: application/json' " + base +
                                     "/api/v1/captures/" + id + "/cancel")
                .status,
            403);
  // Malformed and oversized requests get a 4xx, and the server serves on.
  EXPECT_EQ(
      CurlAs("ops-alice",
             "-X POST -H 'Content-Type: application/json' --data-binary '{\"duration_ms\": ' " +
                 base + "/api/v1/captures")
          .status,
      400);
  EXPECT_EQ(CurlAs("viewer-bob", base + "/api/v1/captures/" + id + "/timeline?width=99999").status,
            400);
  EXPECT_EQ(CurlAs("viewer-bob", base + "/api/v1/captures/" + id).status, 200);
}

// What a hostile page can make a browser that holds an operator's certificate send (the
// browser presents it on a cross-site form POST), and the hostile patterns a mere viewer can
// send over gRPC and HTTPS: each refused with a 4xx, and the aggregator serves on.
TEST_F(TlsTest, HostileRequestsWithRealCertificatesAreRefused) {
  StartAggregator();
  auto agent = StartAgent("agent-0", 0);
  const std::string base =
      absl::StrCat("https://127.0.0.1:", aggregator_->info()["http_port"].get<int>());
  const std::string body = " --data-binary '{\"duration_ms\": 300}' " + base + "/api/v1/captures";
  const std::string cross = "-H 'Origin: https://evil.example' -H 'Sec-Fetch-Site: cross-site' ";
  EXPECT_EQ(CurlAs("ops-alice", cross + "-H 'Content-Type: text/plain'" + body).status, 403);
  EXPECT_EQ(CurlAs("ops-alice", "-H 'Content-Type: text/plain'" + body).status, 415);
  EXPECT_EQ(CurlAs("ops-alice",
                   "-H 'Origin: https://evil.example' "
                   "-H 'Content-Type: application/json'" +
                       body)
                .status,
            403);
  EXPECT_EQ(
      CurlAs("ops-alice", "-H 'Host: evil.example' -H 'Content-Type: application/json'" + body)
          .status,
      421);
  // The page's own origin under TLS is https://<host>.
  const std::string own = "-H 'Origin: " + base + "' -H 'Content-Type: application/json'";
  EXPECT_EQ(CurlAs("ops-alice", own + body).status, 201);
  EXPECT_EQ(CurlAs("viewer-bob", own + body).status, 403);  // and roles still hold

  std::string nested(20000, '(');
  nested += std::string(20000, ')');
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(
      CurlAs("viewer-bob", "'" + base + "/api/v1/captures/x/kernels?kernel=" + nested + "'").status,
      400);
  auto stub = v1::Aggregator::NewStub(grpc::CreateChannel(addr_, CredentialsOf("viewer-bob")));
  for (const std::string& pattern : {nested, std::string("(.*)*#")}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GetKernelStatsRequest req;
    req.set_capture_id("x");
    req.mutable_filter()->set_op_regex(pattern);
    v1::GetKernelStatsResponse res;
    grpc::Status s = stub->GetKernelStats(&ctx, req, &res);
    EXPECT_NE(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    if (pattern.size() > 100) {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    }
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(CurlAs("viewer-bob", base + "/api/v1/agents").status, 200);
  EXPECT_EQ(kill(aggregator_->pid(), 0), 0);  // alive
}

TEST_F(TlsTest, AnAgentCannotTakeOverAnotherHost) {
  StartAggregator("\"agent-0\", \"agent-1\"");
  auto real = StartAgent("agent-1", 0);
  const std::string real_address =
      absl::StrCat("127.0.0.1:", real->info()["agent_port"].get<int>());
  // agent-0 holds a valid, allowed certificate, and claims to be agent-1.
  auto impostor = StartAgent("agent-0", 1, "agent-1");

  // Its registration is refused, saying why.
  auto stub = v1::Aggregator::NewStub(grpc::CreateChannel(addr_, CredentialsOf("agent-0")));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::RegisterRequest req;
  req.mutable_host()->set_host_name("agent-1");
  req.mutable_host()->set_agent_address("127.0.0.1:9");
  v1::RegisterResponse resp;
  grpc::Status s = stub->Register(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "may not register host agent-1"))
      << s.error_message();

  // Over several heartbeats the real agent keeps its entry and its address...
  nlohmann::json agents;
  for (int i = 0; i < 30; ++i) {
    PodprofResult r =
        RunPodprof("agents --format json --aggregator " + addr_ + TlsFlags("ops-alice"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    agents = nlohmann::json::parse(r.out)["agents"];
    if (i >= 10 && agents.size() == 1 && agents[0]["probe_count"].get<int>() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(agents.size(), 1u) << agents.dump();
  EXPECT_EQ(agents[0]["host"], "agent-1");
  EXPECT_EQ(agents[0]["address"], real_address);
  EXPECT_EQ(agents[0]["state"], "online");

  // ...and is captured, also after the impostor is gone.
  impostor.reset();
  PodprofResult cap = RunPodprof(
      "capture --hosts agent-1 --duration 300ms --format json "
      "--aggregator " +
      addr_ + TlsFlags("ops-alice"));
  ASSERT_EQ(cap.exit_code, 0) << cap.err;
  EXPECT_EQ(nlohmann::json::parse(cap.out)["state"], "complete");
}

TEST_F(TlsTest, EachBadCredentialIsNamedAtLoad) {
  // The clock is a parameter, so validity is tried at instants around the 2-day certificates.
  const int64_t now = RealClock().NowNs();
  constexpr int64_t kDayNs = int64_t{86400} * 1'000'000'000;
  auto material = [&](const std::string& cert, const std::string& key, const std::string& ca) {
    security::TlsMaterial m;
    m.cert = ReadTestFile(P(cert)), m.key = ReadTestFile(P(key)), m.ca = ReadTestFile(P(ca));
    m.cert_path = P(cert), m.key_path = P(key), m.ca_path = P(ca);
    return m;
  };
  auto error_of = [&](const security::TlsMaterial& m, int64_t at_ns) {
    absl::StatusOr<security::CertificateSummary> s = security::CheckTlsMaterial(m, at_ns);
    return s.ok() ? std::string("OK") : std::string(s.status().message());
  };
  absl::StatusOr<security::CertificateSummary> good =
      security::CheckTlsMaterial(material("agent-0.crt", "agent-0.key", "ca.crt"), now);
  ASSERT_OK(good);
  EXPECT_EQ(good->names, (std::vector<std::string>{"agent-0", "localhost", "127.0.0.1"}));
  // make-certs gives an agent its role as a URI SAN, which is not one of its names.
  EXPECT_EQ(good->roles, std::vector<std::string>{"agent"});
  EXPECT_TRUE(absl::StrContains(good->Describe(), "role agent")) << good->Describe();
  EXPECT_EQ(security::PemCertificateRoles(ReadTestFile(P("aggregator.crt"))),
            std::vector<std::string>{"aggregator"});
  EXPECT_EQ(security::PemCertificateRoles(ReadTestFile(P("ops-alice.crt"))),
            std::vector<std::string>{"operator"});
  EXPECT_TRUE(security::PemCertificateRoles(ReadTestFile(P("viewer-bob.crt"))).empty());
  EXPECT_TRUE(security::PemCertificateRoles("not a certificate").empty());
  EXPECT_TRUE(absl::StrContains(good->issuer, "CN=ca")) << good->issuer;
  EXPECT_TRUE(good->expires_soon);  // two days left: the daemon warns
  MakeCert("ca", "agent", "long-lived", "", 30);
  // Checked a minute on: made after `now` was read, it may not have been valid yet at `now`.
  absl::StatusOr<security::CertificateSummary> later = security::CheckTlsMaterial(
      material("long-lived.crt", "long-lived.key", "ca.crt"), now + 60'000'000'000);
  ASSERT_OK(later);
  EXPECT_FALSE(later->expires_soon);

  Run("openssl pkey -in " + P("agent-0.key") + " -aes256 -passout pass:secret -out " +
      P("encrypted.key"));
  const std::vector<std::pair<security::TlsMaterial, std::string>> bad = {
      {material("agent-0.crt", "agent-1.key", "ca.crt"), "is not the key of the certificate in"},
      {material("agent-0.crt", "encrypted.key", "ca.crt"), "is encrypted"},
      {material("intruder.crt", "intruder.key", "ca.crt"),
       "does not chain to the CA bundle in tls.ca"},
      {material("agent-0.crt", "agent-0.key", "agent-0.crt"), "does not chain"},
      {material("agent-0.key", "agent-0.key", "ca.crt"), "holds no certificate"},
      {material("ops-alice.crt", "ops-alice.key", "ca.crt"),
       "is not for both TLS server and client use"}};
  for (const auto& [m, want] : bad) {
    const std::string got = error_of(m, now);
    EXPECT_TRUE(absl::StrContains(got, want)) << got << " (want: " << want << ")";
  }
  const std::string expired =
      error_of(material("agent-0.crt", "agent-0.key", "ca.crt"), now + 3 * kDayNs);
  EXPECT_TRUE(absl::StrContains(expired, "expired at")) << expired;
  EXPECT_TRUE(absl::StrContains(expired, P("agent-0.crt"))) << expired;

  // A daemon given a key that is not its certificate's says so and exits 2; it never aborts.
  launch::PodOptions mismatch = Pod("mismatch");
  mismatch.aggregator_config =
      absl::StrCat("listen = \"127.0.0.1:0\"\n[tls]\ncert = \"", P("aggregator.crt"),
                   "\"\nkey = \"", P("agent-0.key"), "\"\nca = \"", P("ca.crt"), "\"\n");
  ASSERT_OK(launch::WritePodFiles(mismatch));
  ChildProcess agg(launch::AggregatorArgs(mismatch), "");
  int status = agg.Wait();
  ASSERT_TRUE(WIFEXITED(status)) << "signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

TEST_F(TlsTest, AllowListsReloadOnSighup) {
  StartAggregator();
  auto stub = v1::Aggregator::NewStub(grpc::CreateChannel(addr_, CredentialsOf("viewer-bob")));
  auto cancel = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::CancelCaptureRequest req;
    req.set_capture_id("cap-none");
    v1::CancelCaptureResponse resp;
    return stub->CancelCapture(&ctx, req, &resp);
  };
  grpc::Status before = cancel();
  EXPECT_EQ(before.error_code(), grpc::StatusCode::PERMISSION_DENIED) << before.error_message();
  EXPECT_TRUE(absl::StrContains(before.error_message(), "not in tls.allowed_operators"))
      << before.error_message();

  // viewer-bob becomes an operator: the file changes and SIGHUP reloads it, no restart.
  WriteAggregatorConfig("\"agent-0\"", "\"ops-alice\", \"viewer-bob\"");
  aggregator_->Signal(SIGHUP);
  grpc::Status after;
  for (int i = 0; i < 50; ++i) {
    after = cancel();
    if (after.error_code() != grpc::StatusCode::PERMISSION_DENIED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Past the role check: the capture is unknown.
  EXPECT_EQ(after.error_code(), grpc::StatusCode::NOT_FOUND) << after.error_message();
}

TEST_F(TlsTest, CertificatesRotateOnSighupWhileACaptureRuns) {
  // The daemons read working copies, which a renewal job replaces while a capture runs.
  auto install = [&](const std::string& from, const std::string& to) {
    for (const char* ext : {".crt", ".key"}) {
      fs::copy_file(from + ext, P(to + ext), fs::copy_options::overwrite_existing);
    }
  };
  install(P("aggregator"), "agg-live");
  install(P("agent-0"), "agent-live");
  StartAggregator("\"agent-0\"", "agg-live");
  auto agent = StartAgent("agent-0", 0, "", "agent-live");
  ASSERT_EQ(WaitForAgents(1).size(), 1u);
  const int agg_port = aggregator_->info()["port"].get<int>();
  const int agent_port = agent->info()["agent_port"].get<int>();
  ASSERT_EQ(ServedSerial(agg_port), FileSerial(P("aggregator.crt")));

  // Renewed certificates: the same names and CA, new keys and serials.
  fs::create_directories(P("renewed"));
  for (const char* f : {"ca.crt", "ca.key"}) {
    fs::copy_file(P(f), P("renewed/") + f, fs::copy_options::overwrite_existing);
  }
  Run(absl::StrCat(kMakeCerts, " --dir ", P("renewed"),
                   " aggregator aggregator localhost "
                   "127.0.0.1"));
  Run(absl::StrCat(kMakeCerts, " --dir ", P("renewed"), " agent agent-0 localhost 127.0.0.1"));

  PodprofResult cap;
  std::thread capture([&] {
    cap = RunPodprof("capture --duration 3s --format json --aggregator " + addr_ +
                     TlsFlags("ops-alice"));
  });
  // The material changes while the capture runs: once the aggregator has sent its requests.
  ASSERT_TRUE(podprof::testing::WaitFor(
      [&] { return absl::StrContains(ReadTestFile(P("aggregator.log")), "requests sent"); },
      absl::Seconds(10)))
      << ReadTestFile(P("aggregator.log"));
  install(P("renewed/aggregator"), "agg-live");
  install(P("renewed/agent-0"), "agent-live");
  aggregator_->Signal(SIGHUP);
  agent->Signal(SIGHUP);
  capture.join();
  // The capture that was running when the material changed completes.
  ASSERT_EQ(cap.exit_code, 0) << cap.err;
  auto cj = nlohmann::json::parse(cap.out);
  EXPECT_EQ(cj["state"], "complete");
  EXPECT_GT(cj["hosts"][0]["events"].get<int64_t>(), 100);

  // New connections get the renewed certificates, on both daemons, without a restart.
  std::string served_agg, served_agent;
  for (int i = 0; i < 50; ++i) {
    served_agg = ServedSerial(agg_port);
    served_agent = ServedSerial(agent_port);
    if (served_agg == FileSerial(P("renewed/aggregator.crt")) &&
        served_agent == FileSerial(P("renewed/agent-0.crt"))) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(served_agg, FileSerial(P("renewed/aggregator.crt")));
  EXPECT_EQ(served_agent, FileSerial(P("renewed/agent-0.crt")));
  EXPECT_NE(served_agg, FileSerial(P("aggregator.crt")));
  EXPECT_TRUE(absl::StrContains(ReadTestFile(P("aggregator.log")), "changed: TLS material"))
      << ReadTestFile(P("aggregator.log"));

  // Both directions work with the renewed material: the aggregator dials the agent anew.
  PodprofResult after = RunPodprof("capture --duration 300ms --format json --aggregator " + addr_ +
                                   TlsFlags("ops-alice"));
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(nlohmann::json::parse(after.out)["state"], "complete");

  // A bad renewal (a key that is not the certificate's) is refused, naming the file, and the
  // renewed material stays in service.
  fs::copy_file(P("agent-1.key"), P("agg-live.key"), fs::copy_options::overwrite_existing);
  aggregator_->Signal(SIGHUP);
  std::string log;
  for (int i = 0; i < 50 && !absl::StrContains(log, "reload refused"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = ReadTestFile(P("aggregator.log"));
  }
  EXPECT_TRUE(absl::StrContains(log, "reload refused")) << log;
  EXPECT_TRUE(absl::StrContains(log, P("agg-live.key"))) << log;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // past a watcher refresh
  EXPECT_EQ(ServedSerial(agg_port), FileSerial(P("renewed/aggregator.crt")));
}

TEST_F(TlsTest, ARefusedAgentStopsAskingUntilReloadedAndTheRefusalIsLoggedOnce) {
  StartAggregator();  // allows agent-0 only
  auto rogue = StartAgent("rogue-agent", 0);
  // The refusal is final until something changes: the agent says so once and stops asking.
  std::string agent_log;
  for (int i = 0; i < 50 && !absl::StrContains(agent_log, "not asking again"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    agent_log = ReadTestFile(P("agent0.log"));
  }
  EXPECT_TRUE(
      absl::StrContains(agent_log,
                        "caller rogue-agent/localhost/127.0.0.1 may not act as an agent (not in "
                        "tls.allowed_agents); not asking again until this agent is "
                        "reloaded (SIGHUP) or restarted"))
      << agent_log;
  // The aggregator names the caller's address and the setting; viewer-bob's repeated denied
  // calls are one line.
  for (int i = 0; i < 5; ++i) {
    RunPodprof("capture --duration 100ms --aggregator " + addr_ + TlsFlags("viewer-bob"));
  }
  const std::string agg_log = ReadTestFile(P("aggregator.log"));
  EXPECT_TRUE(absl::StrContains(agg_log, "refused ipv4:127.0.0.1:")) << agg_log;
  EXPECT_TRUE(
      absl::StrContains(agg_log,
                        "caller rogue-agent/localhost/127.0.0.1 may not act as an agent (not in "
                        "tls.allowed_agents)"))
      << agg_log;
  EXPECT_EQ(Count(agg_log, "caller viewer-bob may not act as an operator"), 1u) << agg_log;
  // A plaintext client's failed handshake is logged with what it means.
  RunPodprof("captures --timeout 2s --aggregator " + addr_);
  EXPECT_TRUE(absl::StrContains(ReadTestFile(P("aggregator.log")),
                                "TLS handshake failed: the other side spoke plaintext"))
      << ReadTestFile(P("aggregator.log"));

  // The operator allows it; the agent asks again only once it is reloaded too.
  WriteAggregatorConfig("\"agent-0\", \"rogue-agent\"", "\"ops-alice\"");
  const size_t reloads = Count(ReadTestFile(P("aggregator.log")), "reloaded;");
  aggregator_->Signal(SIGHUP);
  ASSERT_TRUE(podprof::testing::WaitFor(
      [&] { return Count(ReadTestFile(P("aggregator.log")), "reloaded;") > reloads; },
      absl::Seconds(10)))
      << ReadTestFile(P("aggregator.log"));
  PodprofResult r =
      RunPodprof("agents --format json --aggregator " + addr_ + TlsFlags("ops-alice"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["agents"].empty()) << r.out;
  rogue->Signal(SIGHUP);
  nlohmann::json agents = WaitForAgents(1);
  ASSERT_EQ(agents.size(), 1u) << agents.dump();
  EXPECT_EQ(agents[0]["host"], "rogue-agent");
}

TEST_F(TlsTest, TheXprofFacadeBeyondLoopbackSpeaksMutualTlsToAllowedClientsOnly) {
  StartAggregator();
  auto agent = StartAgent("agent-0", 0, "", "", "0.0.0.0:0", "\"ops-alice\"");
  const std::string facade =
      absl::StrCat("127.0.0.1:", agent->info()["profiler_service_port"].get<int>());
  auto profile = [&](std::shared_ptr<grpc::ChannelCredentials> creds) {
    auto stub = tensorflow::ProfilerService::NewStub(grpc::CreateChannel(facade, creds));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    tensorflow::ProfileRequest req;
    req.set_repository_root(P("xprof"));
    req.set_session_id("s1");
    req.set_host_name("agent-0");
    req.mutable_opts()->set_duration_ms(100);
    tensorflow::ProfileResponse resp;
    return stub->Profile(&ctx, req, &resp);
  };
  // Reachable from other hosts, it takes no plaintext and only listed identities.
  grpc::Status plain = profile(grpc::InsecureChannelCredentials());
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE) << plain.error_message();
  grpc::Status bob = profile(CredentialsOf("viewer-bob"));
  EXPECT_EQ(bob.error_code(), grpc::StatusCode::PERMISSION_DENIED) << bob.error_message();
  EXPECT_TRUE(absl::StrContains(bob.error_message(), "not in tls.allowed_profiler_clients"))
      << bob.error_message();
  grpc::Status alice = profile(CredentialsOf("ops-alice"));
  EXPECT_OK(alice);
  EXPECT_TRUE(fs::exists(P("xprof/s1/agent-0.xplane.pb")));
  EXPECT_TRUE(absl::StrContains(ReadTestFile(P("agent0.log")), "XProf capture s1 for ipv4:"));
}

TEST_F(TlsTest, TheCliSaysWhyADialFailed) {
  StartAggregator("\"agent-0\"", "agg-nosan");
  // The server's certificate does not name 127.0.0.1.
  PodprofResult name =
      RunPodprof("captures --timeout 5s --aggregator " + addr_ + TlsFlags("ops-alice"));
  EXPECT_EQ(name.exit_code, 3) << name.err;
  EXPECT_TRUE(
      absl::StrContains(name.err, "the server's certificate does not name the address dialled"))
      << name.err;
  // The CLI's bundle does not verify the server's certificate.
  PodprofResult ca =
      RunPodprof("captures --timeout 5s --aggregator " + addr_ + TlsFlags("ops-alice", "other-ca"));
  EXPECT_EQ(ca.exit_code, 3) << ca.err;
  EXPECT_TRUE(absl::StrContains(ca.err, "did not verify against the CA bundle")) << ca.err;
  // A key that is not the certificate's is named before anything is dialled.
  PodprofResult key = RunPodprof("captures --timeout 5s --aggregator " + addr_ + " --tls-cert " +
                                 P("ops-alice.crt") + " --tls-key " + P("viewer-bob.key") +
                                 " --tls-ca " + P("ca.crt"));
  EXPECT_EQ(key.exit_code, 2) << key.err;
  EXPECT_TRUE(absl::StrContains(key.err, "is not the key of the certificate")) << key.err;
  EXPECT_FALSE(absl::StrContains(key.err, "address list")) << key.err;
  // None of this reaches the terminal as gRPC's own log lines.
  for (const PodprofResult* r : {&name, &ca, &key}) {
    EXPECT_FALSE(absl::StrContains(r->err, "ssl_transport_security")) << r->err;
  }
}

TEST_F(TlsTest, NoTlsMaterialAndNoInsecureIsRefusedAtStart) {
  // A pod of its own whose configurations hold no [tls] table.
  launch::PodOptions bare = Pod("bare");
  bare.aggregator_config = "listen = \"127.0.0.1:0\"\n";
  bare.host[0].workload_profiler = "127.0.0.1:1";
  bare.host[0].workload_metrics = "none";
  ASSERT_OK(launch::WritePodFiles(bare));
  ChildProcess agg(launch::AggregatorArgs(bare), "");
  int status = agg.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  ChildProcess agent(launch::AgentArgs(bare, 0, RealClock().NowNs(), nlohmann::json::object(), ""),
                     "");
  status = agent.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace podprof
