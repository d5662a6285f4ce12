// The aggregator's registry of agents on a fake clock: registration and heartbeats, liveness by
// the age of the last heartbeat, selection by host and label, and the clock model each agent
// gets from probes (over real gRPC to an in-process agent on loopback), which survives a
// re-registration from the same address and not one from a new address.
#include "aggregator/capture/registry.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/aggregator/loopback_agent.h"
#include "tests/util/status_matchers.h"

namespace podprof::aggregator {
namespace {

namespace v1 = podprof::v1;

constexpr int64_t kHeartbeatNs = 1'000'000'000;
constexpr int64_t kProbeIntervalNs = 10'000'000'000;

v1::RegisterRequest Request(const std::string& host, const std::string& address,
                            const std::map<std::string, std::string>& labels = {}) {
  v1::RegisterRequest r;
  r.mutable_host()->set_host_name(host);
  r.mutable_host()->set_agent_address(address);
  for (const auto& [k, v] : labels) (*r.mutable_host()->mutable_labels())[k] = v;
  r.mutable_host()->add_chips()->set_ordinal(0);
  r.set_agent_start_ns(123);
  auto* ep = r.add_workload_endpoints();
  ep->set_address("localhost:8466");
  ep->set_reachable(true);
  return r;
}

v1::HeartbeatRequest Beat(const std::string& host, const std::string& capture = "") {
  v1::HeartbeatRequest h;
  h.set_host_name(host);
  h.set_active_capture_id(capture);
  return h;
}

class RegistryTest : public ::testing::Test {
 protected:
  // Near the real time: the registry turns its clock's readings into gRPC deadlines.
  FakeClock clock_{RealClock().NowNs()};
  Registry registry_{clock_, kHeartbeatNs, kProbeIntervalNs};

  std::map<std::string, v1::AgentStatus> ListAll() {
    std::map<std::string, v1::AgentStatus> out;
    for (v1::AgentStatus& s : registry_.List({})) out[s.host().host_name()] = std::move(s);
    return out;
  }
  std::vector<std::string> SelectedHosts(const std::vector<std::string>& hosts,
                                         const std::map<std::string, std::string>& selector,
                                         std::vector<std::string>* missing) {
    std::vector<std::string> names;
    for (const Registry::Handle& h : registry_.Select(hosts, selector, missing)) {
      EXPECT_NE(h.stub, nullptr) << h.host;
      EXPECT_NE(h.channel, nullptr) << h.host;
      names.push_back(h.host);
    }
    return names;
  }
};

TEST_F(RegistryTest, RegisterListsTheAgentOnline) {
  const int64_t t0 = clock_.NowNs();
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:1", {{"pool", "a"}})));
  auto agents = ListAll();
  ASSERT_EQ(agents.size(), 1u);
  const v1::AgentStatus& s = agents.at("h1");
  EXPECT_EQ(s.state(), v1::AGENT_STATE_ONLINE);
  EXPECT_EQ(s.host().agent_address(), "127.0.0.1:1");
  EXPECT_EQ(s.host().labels().at("pool"), "a");
  EXPECT_EQ(s.host().chips_size(), 1);
  EXPECT_EQ(s.registered_ns(), t0);
  EXPECT_EQ(s.last_heartbeat_ns(), t0);
  ASSERT_EQ(s.workload_endpoints_size(), 1);
  EXPECT_EQ(s.workload_endpoints(0).address(), "localhost:8466");
  EXPECT_FALSE(s.has_clock()) << "not probed yet";
}

TEST_F(RegistryTest, HeartbeatOfAnUnknownHostAsksForRegistration) {
  EXPECT_FALSE(registry_.Heartbeat(Beat("nobody")).value());
  registry_.Touch("nobody");  // harmless
  EXPECT_TRUE(registry_.List({}).empty());
}

TEST_F(RegistryTest, HeartbeatRecordsTheActiveCaptureAndNewEndpoints) {
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:1")));
  clock_.AdvanceNs(kHeartbeatNs);
  v1::HeartbeatRequest beat = Beat("h1", "cap-1");
  EXPECT_TRUE(registry_.Heartbeat(beat).value());
  v1::AgentStatus s = ListAll().at("h1");
  EXPECT_EQ(s.last_heartbeat_ns(), clock_.NowNs());
  EXPECT_EQ(s.active_capture_id(), "cap-1");
  EXPECT_EQ(s.workload_endpoints_size(), 1) << "a heartbeat without endpoints keeps the old";

  auto* ep = beat.add_workload_endpoints();
  ep->set_address("localhost:9999");
  ep->set_reachable(false);
  beat.set_active_capture_id("");
  EXPECT_TRUE(registry_.Heartbeat(beat).value());
  s = ListAll().at("h1");
  ASSERT_EQ(s.workload_endpoints_size(), 1);
  EXPECT_EQ(s.workload_endpoints(0).address(), "localhost:9999");
  EXPECT_EQ(s.active_capture_id(), "") << "the capture ended";
}

// What an agent found wrong with its own set-up (an advertised name that does not resolve) is
// listed with it until it registers without it, and bounded like the rest of a registration.
TEST_F(RegistryTest, AnAgentsStartUpWarningsAreListedUntilItRegistersWithout) {
  v1::RegisterRequest r = Request("h1", "tpu-7.invalid:7101");
  r.add_warnings("the address this agent advertises, tpu-7.invalid:7101, does not resolve");
  ASSERT_OK(registry_.Register(r));
  v1::AgentStatus s = ListAll().at("h1");
  ASSERT_EQ(s.agent_warnings_size(), 1);
  EXPECT_EQ(s.agent_warnings(0), r.warnings(0));
  EXPECT_TRUE(registry_.Heartbeat(Beat("h1")).value());
  EXPECT_EQ(ListAll().at("h1").agent_warnings_size(), 1) << "kept through heartbeats";
  ASSERT_OK(registry_.Register(Request("h1", "10.0.0.7:7101")));
  EXPECT_EQ(ListAll().at("h1").agent_warnings_size(), 0);

  v1::RegisterRequest many = Request("h2", "127.0.0.1:2");
  for (int i = 0; i <= kMaxAgentWarnings; ++i) many.add_warnings("w");
  EXPECT_EQ(registry_.Register(many).code(), absl::StatusCode::kInvalidArgument);
  v1::RegisterRequest long_one = Request("h2", "127.0.0.1:2");
  long_one.add_warnings(std::string(kMaxAgentWarningBytes + 1, 'w'));
  EXPECT_EQ(registry_.Register(long_one).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RegistryTest, LivenessFollowsTheAgeOfTheLastHeartbeat) {
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:1")));
  auto state = [&] { return ListAll().at("h1").state(); };
  std::vector<std::string> missing;

  // Up to three intervals silent: online (a missed heartbeat or two is a hiccup).
  clock_.AdvanceNs(3 * kHeartbeatNs);
  EXPECT_EQ(state(), v1::AGENT_STATE_ONLINE);
  EXPECT_EQ(SelectedHosts({"h1"}, {}, &missing), std::vector<std::string>{"h1"});

  // Beyond that, stale, and no longer chosen for captures.
  clock_.AdvanceNs(1);
  EXPECT_EQ(state(), v1::AGENT_STATE_STALE);
  EXPECT_TRUE(SelectedHosts({"h1"}, {}, &missing).empty());
  EXPECT_EQ(missing, std::vector<std::string>{"h1"});
  missing.clear();
  EXPECT_TRUE(SelectedHosts({}, {}, &missing).empty());
  EXPECT_TRUE(missing.empty()) << "only named hosts are reported missing";

  // Beyond ten intervals, offline.
  clock_.AdvanceNs(7 * kHeartbeatNs);
  EXPECT_EQ(state(), v1::AGENT_STATE_OFFLINE);

  // A heartbeat brings it back at once; so does Touch (it was heard from while streaming).
  EXPECT_TRUE(registry_.Heartbeat(Beat("h1")).value());
  EXPECT_EQ(state(), v1::AGENT_STATE_ONLINE);
  clock_.AdvanceNs(20 * kHeartbeatNs);
  EXPECT_EQ(state(), v1::AGENT_STATE_OFFLINE);
  registry_.Touch("h1");
  EXPECT_EQ(state(), v1::AGENT_STATE_ONLINE);
  EXPECT_EQ(ListAll().at("h1").last_heartbeat_ns(), clock_.NowNs());
}

TEST_F(RegistryTest, TouchNeverMovesTheLastHeartbeatBack) {
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:1")));
  clock_.AdvanceNs(kHeartbeatNs);
  EXPECT_TRUE(registry_.Heartbeat(Beat("h1")).value());
  const int64_t beat_ns = clock_.NowNs();
  clock_.SetNs(beat_ns - 500'000'000);  // the wall clock stepped back
  registry_.Touch("h1");
  EXPECT_EQ(ListAll().at("h1").last_heartbeat_ns(), beat_ns);
}

TEST_F(RegistryTest, SelectorsMatchEveryLabelPair) {
  ASSERT_OK(registry_.Register(Request("a1", "127.0.0.1:1", {{"pool", "a"}, {"zone", "x"}})));
  ASSERT_OK(registry_.Register(Request("a2", "127.0.0.1:2", {{"pool", "a"}, {"zone", "y"}})));
  ASSERT_OK(registry_.Register(Request("b1", "127.0.0.1:3", {{"pool", "b"}})));
  auto names = [](const std::vector<v1::AgentStatus>& list) {
    std::vector<std::string> out;
    for (const auto& s : list) out.push_back(s.host().host_name());
    return out;
  };
  EXPECT_EQ(names(registry_.List({})), (std::vector<std::string>{"a1", "a2", "b1"}));
  EXPECT_EQ(names(registry_.List({{"pool", "a"}})), (std::vector<std::string>{"a1", "a2"}));
  EXPECT_EQ(names(registry_.List({{"pool", "a"}, {"zone", "y"}})), std::vector<std::string>{"a2"});
  EXPECT_TRUE(registry_.List({{"pool", "c"}}).empty());
  EXPECT_TRUE(registry_.List({{"rack", "a"}}).empty()) << "a missing label does not match";

  std::vector<std::string> missing;
  EXPECT_EQ(SelectedHosts({}, {{"pool", "a"}}, &missing), (std::vector<std::string>{"a1", "a2"}));
  // Named hosts must also match the selector; those that do not are missing.
  EXPECT_EQ(SelectedHosts({"a1", "b1", "zz"}, {{"pool", "a"}}, &missing),
            std::vector<std::string>{"a1"});
  EXPECT_EQ(missing, (std::vector<std::string>{"b1", "zz"}));
}

// A host's slice selects it beside its name and labels; a host that knows no slice is in none.
TEST_F(RegistryTest, SlicesSelectTheHostsInThem) {
  auto in_slice = [](v1::RegisterRequest r, int slice) {
    r.mutable_host()->set_slice(slice);
    return r;
  };
  ASSERT_OK(registry_.Register(in_slice(Request("s0", "127.0.0.1:1", {{"pool", "a"}}), 0)));
  ASSERT_OK(registry_.Register(in_slice(Request("s1", "127.0.0.1:2", {{"pool", "b"}}), 1)));
  ASSERT_OK(registry_.Register(in_slice(Request("s2", "127.0.0.1:3", {{"pool", "a"}}), 2)));
  ASSERT_OK(registry_.Register(Request("none", "127.0.0.1:4", {{"pool", "a"}})));
  auto selected = [&](const std::vector<std::string>& hosts,
                      const std::map<std::string, std::string>& selector,
                      const std::vector<int>& slices, std::vector<std::string>* missing) {
    std::vector<std::string> out;
    for (const Registry::Handle& h : registry_.Select(hosts, selector, missing, slices)) {
      out.push_back(absl::StrCat(h.host, ":", h.slice));
    }
    return out;
  };
  std::vector<std::string> missing;
  EXPECT_EQ(selected({}, {}, {}, &missing),
            (std::vector<std::string>{"none:-1", "s0:0", "s1:1", "s2:2"}));
  EXPECT_EQ(selected({}, {}, {0, 2}, &missing), (std::vector<std::string>{"s0:0", "s2:2"}));
  EXPECT_EQ(selected({}, {{"pool", "b"}}, {0, 1}, &missing), std::vector<std::string>{"s1:1"});
  EXPECT_TRUE(selected({}, {}, {7}, &missing).empty());
  EXPECT_EQ(selected({"s0", "s1", "none"}, {}, {1}, &missing), std::vector<std::string>{"s1:1"});
  EXPECT_EQ(missing, (std::vector<std::string>{"s0", "none"}));

  v1::RegisterRequest negative = in_slice(Request("bad", "127.0.0.1:5"), -3);
  EXPECT_THAT(registry_.Register(negative),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("host bad registers slice -3")));
}

TEST_F(RegistryTest, ReRegistrationReplacesTheHostInfo) {
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:1", {{"pool", "a"}})));
  clock_.AdvanceNs(5 * kHeartbeatNs);
  v1::RegisterRequest again = Request("h1", "127.0.0.1:2", {{"pool", "b"}});
  again.mutable_host()->add_chips()->set_ordinal(1);
  ASSERT_OK(registry_.Register(again));
  auto agents = ListAll();
  ASSERT_EQ(agents.size(), 1u) << "one entry per host name";
  const v1::AgentStatus& s = agents.at("h1");
  EXPECT_EQ(s.host().agent_address(), "127.0.0.1:2");
  EXPECT_EQ(s.host().labels().at("pool"), "b");
  EXPECT_EQ(s.host().chips_size(), 2);
  EXPECT_EQ(s.registered_ns(), clock_.NowNs());
  EXPECT_EQ(s.state(), v1::AGENT_STATE_ONLINE);
}

TEST_F(RegistryTest, ProbesBuildAClockModelThatANewAddressDiscards) {
  constexpr int64_t kOffsetNs = 5'000'000;
  podprof::testing::LoopbackAgent agent(clock_, kOffsetNs);
  ASSERT_TRUE(agent.started());
  ASSERT_OK(registry_.Register(Request("h1", agent.address())));

  ClockEstimate est;
  EXPECT_FALSE(registry_.Estimate("h1", clock_.NowNs(), &est)) << "unprobed";
  EXPECT_FALSE(registry_.Estimate("nobody", clock_.NowNs(), &est));
  EXPECT_EQ(registry_.ProbeDue(/*burst=*/4), 1);
  ASSERT_TRUE(registry_.Estimate("h1", clock_.NowNs(), &est));
  EXPECT_EQ(est.offset_ns, kOffsetNs);
  EXPECT_TRUE(ListAll().at("h1").has_clock());
  EXPECT_EQ(ListAll().at("h1").clock().offset_ns(), kOffsetNs);

  // Probed within the interval: not due until it passes, unless forced.
  EXPECT_EQ(registry_.ProbeDue(4), 0);
  EXPECT_EQ(registry_.ProbeDue(4, /*force=*/true), 1);
  clock_.AdvanceNs(kProbeIntervalNs);
  EXPECT_EQ(registry_.ProbeDue(4), 1);

  // The agent restarted at the same address: same clock, the model stays.
  ASSERT_OK(registry_.Register(Request("h1", agent.address())));
  EXPECT_TRUE(registry_.Estimate("h1", clock_.NowNs(), &est));
  EXPECT_EQ(registry_.ProbeDue(4), 0) << "the last burst is still recent";

  // It came back at another address (another machine, maybe): its clock is unknown again, and
  // it is due for probing at once.
  podprof::testing::LoopbackAgent moved(clock_, -kOffsetNs);
  ASSERT_TRUE(moved.started());
  ASSERT_OK(registry_.Register(Request("h1", moved.address())));
  EXPECT_FALSE(registry_.Estimate("h1", clock_.NowNs(), &est));
  EXPECT_FALSE(ListAll().at("h1").has_clock());
  EXPECT_EQ(registry_.ProbeDue(4), 1);
  ASSERT_TRUE(registry_.Estimate("h1", clock_.NowNs(), &est));
  EXPECT_EQ(est.offset_ns, -kOffsetNs) << "probed at the new address";
}

TEST_F(RegistryTest, AnUnreachableAgentAnswersNoProbes) {
  // Nothing listens on port 1: the burst ends at the first failed ping.
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:1")));
  EXPECT_EQ(registry_.ProbeDue(4, /*force=*/true), 0);
  ClockEstimate est;
  EXPECT_FALSE(registry_.Estimate("h1", clock_.NowNs(), &est));
  // Liveness (which captures select by) is the heartbeats' business; what the listing shows
  // is that the aggregator cannot dial it (#53).
  EXPECT_EQ(ListAll().at("h1").state(), v1::AGENT_STATE_UNREACHABLE);
  std::vector<std::string> missing;
  EXPECT_EQ(SelectedHosts({"h1"}, {}, &missing), std::vector<std::string>{"h1"});
}

TEST_F(RegistryTest, OverTlsAHostBelongsToTheIdentityThatNamesIt) {
  const Registry::Identities agent_b = {"agent-b"}, agent_a = {"agent-a"};
  ASSERT_OK(registry_.Register(Request("agent-b", "127.0.0.1:2"), agent_b));
  // agent-a's certificate does not name agent-b: the takeover is refused, naming the rule.
  absl::Status hijack = registry_.Register(Request("agent-b", "127.0.0.1:66"), agent_a);
  EXPECT_EQ(hijack.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(hijack.message().find("does not name that host"), std::string::npos)
      << hijack.message();
  EXPECT_EQ(ListAll()["agent-b"].host().agent_address(), "127.0.0.1:2");
  // Nor may it keep agent-b alive.
  EXPECT_EQ(registry_.Heartbeat(Beat("agent-b"), agent_a).status().code(),
            absl::StatusCode::kPermissionDenied);
  // The owner moves freely.
  ASSERT_OK(registry_.Register(Request("agent-b", "127.0.0.1:3"), agent_b));
  EXPECT_EQ(ListAll()["agent-b"].host().agent_address(), "127.0.0.1:3");
}

TEST_F(RegistryTest, AgentHostsGiveAnIdentityMoreHostsButNotAnOwnedOne) {
  registry_.SetAgentHosts({{"pool-cert", {"h1", "h2"}}, {"other-cert", {"h2"}}});
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:1"), {"pool-cert"}));
  ASSERT_OK(registry_.Register(Request("h2", "127.0.0.1:2"), {"pool-cert"}));
  EXPECT_EQ(registry_.Register(Request("h3", "127.0.0.1:3"), {"pool-cert"}).code(),
            absl::StatusCode::kPermissionDenied);
  // other-cert may name h2 too, but pool-cert holds it.
  absl::Status taken = registry_.Register(Request("h2", "127.0.0.1:9"), {"other-cert"});
  EXPECT_EQ(taken.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(taken.message().find("is registered by agent pool-cert"), std::string::npos)
      << taken.message();
}

TEST_F(RegistryTest, AHeartbeatFromAnotherAddressAsksTheAgentToRegisterAgain) {
  // Over plaintext nobody owns a host: another registration may move it, but the real agent's
  // next heartbeat names its own address, and registering again puts it back.
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:1")));
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:66")));
  v1::HeartbeatRequest beat = Beat("h1");
  beat.set_agent_address("127.0.0.1:1");
  EXPECT_FALSE(registry_.Heartbeat(beat).value());
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:1")));
  EXPECT_TRUE(registry_.Heartbeat(beat).value());
  EXPECT_EQ(ListAll()["h1"].host().agent_address(), "127.0.0.1:1");
}

// A registration is kept as long as its host lives: 100,000 chips or 12.6 MB of labels were
// taken. Each bound is refused naming the host and the limit, and the host stays unregistered.
TEST_F(RegistryTest, ARegistrationPastItsBoundsIsRefused) {
  auto refused = [&](const v1::RegisterRequest& r, const std::string& says) {
    absl::Status s = registry_.Register(r);
    EXPECT_THAT(s, testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                     ::testing::AllOf(::testing::HasSubstr("host h"),
                                                      ::testing::HasSubstr(says))));
    EXPECT_EQ(ListAll().count("h"), 0u);
  };
  v1::RegisterRequest r = Request("h", "127.0.0.1:1");
  for (int i = 1; i <= 300; ++i) r.mutable_host()->add_chips()->set_ordinal(i);
  refused(r, "301 chips, more than 256");
  r = Request("h", "127.0.0.1:1");
  r.mutable_host()->add_chips()->set_ordinal(0);
  refused(r, "chip ordinal 0 twice");
  r = Request("h", "127.0.0.1:1");
  for (int i = 0; i < 65; ++i) (*r.mutable_host()->mutable_labels())[std::to_string(i)] = "v";
  refused(r, "65 labels, more than 64");
  r = Request("h", "127.0.0.1:1", {{"big", std::string(100'000, 'x')}});
  refused(r, "bytes, more than 65536");
  ASSERT_OK(registry_.Register(Request("h", "127.0.0.1:1")));
}

// An agent that heartbeats but cannot be dialled (here a closed loopback port; an advertised
// name that does not resolve is the same to the aggregator) was listed online while every
// capture of it failed: it is unreachable, saying why, until a probe reaches it again.
TEST_F(RegistryTest, AnAgentTheProbesCannotReachIsUnreachableNotOnline) {
  ASSERT_OK(registry_.Register(Request("h1", "127.0.0.1:1")));
  EXPECT_EQ(ListAll().at("h1").state(), v1::AGENT_STATE_ONLINE) << "not probed yet";
  EXPECT_EQ(registry_.ProbeDue(/*burst=*/2), 0);
  v1::AgentStatus s = ListAll().at("h1");
  EXPECT_EQ(s.state(), v1::AGENT_STATE_UNREACHABLE);
  EXPECT_THAT(s.dial_error(), ::testing::HasSubstr("the aggregator cannot reach 127.0.0.1:1"));
  std::vector<std::string> missing;
  EXPECT_EQ(SelectedHosts({"h1"}, {}, &missing), std::vector<std::string>{"h1"})
      << "captures still try it";
  // Back at an address the aggregator reaches: online again.
  podprof::testing::LoopbackAgent agent(clock_, 0);
  ASSERT_TRUE(agent.started());
  ASSERT_OK(registry_.Register(Request("h1", agent.address())));
  EXPECT_EQ(registry_.ProbeDue(2), 1);
  s = ListAll().at("h1");
  EXPECT_EQ(s.state(), v1::AGENT_STATE_ONLINE);
  EXPECT_EQ(s.dial_error(), "");
}

}  // namespace
}  // namespace podprof::aggregator
