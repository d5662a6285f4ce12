// The start-up check of the address an agent advertises (agent/advertise_check.h), with a fake
// resolver (no test here may depend on DNS) and the system's on numeric loopback addresses,
// which resolve without a network.
#include "agent/advertise_check.h"

#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/status_matchers.h"

namespace podprof::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Resolves every name but those it is told are unknown, and remembers what it was asked.
class FakeResolver final : public Resolver {
 public:
  explicit FakeResolver(std::set<std::string> unknown = {}) : unknown_(std::move(unknown)) {}
  absl::Status Resolve(const std::string& host) override {
    asked.push_back(host);
    if (unknown_.count(host) > 0) return absl::NotFoundError("Name or service not known");
    return absl::OkStatus();
  }
  std::vector<std::string> asked;

 private:
  std::set<std::string> unknown_;
};

AgentConfig Registering() {
  AgentConfig c;
  c.aggregator = "10.0.0.5:7100";
  c.listen = "0.0.0.0:7101";
  c.host_name = "tpu-host-7.invalid";
  return c;
}

TEST(AdvertiseCheckTest, AHostNameThatDoesNotResolveIsAWarningSayingWhatToSet) {
  FakeResolver resolver({"tpu-host-7.invalid"});
  std::string warning;
  ASSERT_OK(CheckAdvertisedAddress(Registering(), resolver, &warning));
  EXPECT_EQ(resolver.asked, std::vector<std::string>{"tpu-host-7.invalid"});
  EXPECT_THAT(warning, HasSubstr("dials this agent at tpu-host-7.invalid (its host name: "
                                 "advertise is not set), which does not resolve on this host "
                                 "(Name or service not known)"));
  EXPECT_THAT(warning, HasSubstr("set --advertise (advertise in agent.toml)"));
  EXPECT_THAT(warning, HasSubstr("or --host-name to a name that resolves"));
}

TEST(AdvertiseCheckTest, RefuseFailsTheStartWithTheSameSentence) {
  AgentConfig c = Registering();
  c.advertise_check = "refuse";
  FakeResolver resolver({"tpu-host-7.invalid"});
  std::string warning;
  absl::Status s = CheckAdvertisedAddress(c, resolver, &warning);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("at tpu-host-7.invalid (its host name: advertise is not "
                                     "set), which does not resolve"));
  EXPECT_THAT(s.message(), HasSubstr("advertise_check = \"refuse\""));
  EXPECT_THAT(warning, IsEmpty());
}

TEST(AdvertiseCheckTest, TheAdvertiseAddressIsCheckedNotTheHostName) {
  AgentConfig c = Registering();
  c.advertise = "[fd00::7]:7101";
  FakeResolver resolver({"tpu-host-7.invalid"});
  std::string warning = "left over";
  ASSERT_OK(CheckAdvertisedAddress(c, resolver, &warning));
  EXPECT_EQ(resolver.asked, std::vector<std::string>{"fd00::7"});  // without its brackets
  EXPECT_THAT(warning, IsEmpty());

  c.advertise = "gone.invalid:7101";
  FakeResolver gone({"gone.invalid"});
  ASSERT_OK(CheckAdvertisedAddress(c, gone, &warning));
  EXPECT_THAT(warning, HasSubstr("at gone.invalid (advertise = gone.invalid:7101), which does "
                                 "not resolve"));
  EXPECT_THAT(warning, ::testing::Not(HasSubstr("--host-name")));
}

TEST(AdvertiseCheckTest, AnAgentThatRegistersNowhereIsNotChecked) {
  AgentConfig c = Registering();
  c.aggregator.clear();
  FakeResolver resolver({"tpu-host-7.invalid"});
  std::string warning;
  ASSERT_OK(CheckAdvertisedAddress(c, resolver, &warning));
  EXPECT_THAT(resolver.asked, IsEmpty());
}

// The system's resolver on literal loopback addresses: parsed, no network asked.
TEST(AdvertiseCheckTest, ALiteralLoopbackAddressResolvesWithTheSystemResolver) {
  SystemResolver system;
  EXPECT_OK(system.Resolve("127.0.0.1"));
  EXPECT_OK(system.Resolve("::1"));
  AgentConfig c = Registering();
  c.advertise = "127.0.0.1:7101";
  std::string warning;
  ASSERT_OK(CheckAdvertisedAddress(c, system, &warning));
  EXPECT_THAT(warning, IsEmpty());
  c.advertise = "[::1]:7101";
  ASSERT_OK(CheckAdvertisedAddress(c, system, &warning));
  EXPECT_THAT(warning, IsEmpty());
}

TEST(AdvertiseCheckTest, TheSettingIsWarnOrRefuseFromTheFileOrTheFlag) {
  AgentFlags flags;
  flags.config = "/nonexistent/agent.toml";  // not given: the defaults
  absl::StatusOr<AgentConfig> c = BuildAgentConfig(flags);
  ASSERT_OK(c);
  EXPECT_EQ(c->advertise_check, "warn");
  flags.advertise_check = "refuse";
  c = BuildAgentConfig(flags);
  ASSERT_OK(c);
  EXPECT_EQ(c->advertise_check, "refuse");
  flags.advertise_check = "maybe";
  c = BuildAgentConfig(flags);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("advertise_check must be \"warn\" or \"refuse\""));
}

}  // namespace
}  // namespace podprof::agent
