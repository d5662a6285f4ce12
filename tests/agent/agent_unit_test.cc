#include <fstream>
#include <map>

#include "absl/strings/match.h"
#include "agent/agent.h"
#include "agent/config.h"
#include "agent/discovery.h"
#include "gtest/gtest.h"

namespace podprof::agent {
namespace {

std::string DataDir() { return std::string(PODPROF_SOURCE_DIR) + "/tests/data"; }

std::string WriteConfig(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(AgentConfigTest, TheExampleFileLoadsWithTheDefaults) {
  auto c = LoadAgentConfig(std::string(PODPROF_SOURCE_DIR) + "/deploy/agent.toml");
  ASSERT_TRUE(c.ok()) << c.status();
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
  ASSERT_TRUE(c.ok()) << c.status();
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
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->aggregator, "other:7100");
  EXPECT_EQ(c->counter_interval_ns, 20'000'000);
  EXPECT_EQ(c->labels, (std::map<std::string, std::string>{{"job", "train"}, {"pod", "p1"}}));
  EXPECT_TRUE(c->workload_metrics.empty());
  EXPECT_TRUE(c->profiler_service_listen.empty());
}

TEST(AgentConfigTest, NoneTurnsTheXprofFacadeOffInTheFileToo) {
  AgentFlags flags;
  flags.config = WriteConfig("facade-none.toml", "profiler_service_listen = \"none\"\n");
  flags.config_given = true;
  absl::StatusOr<AgentConfig> c = BuildAgentConfig(flags);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->profiler_service_listen.empty());
}

TEST(AgentConfigTest, BadFlagsAndAMissingNamedFileAreNamed) {
  AgentFlags flags;
  flags.config = ::testing::TempDir() + "/missing-agent.toml";
  EXPECT_TRUE(BuildAgentConfig(flags).ok()) << "the default path may be absent";
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
  ASSERT_TRUE(chips.ok()) << chips.status();
  ASSERT_EQ(chips->size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ((*chips)[i].pci_address, "0000:00:0" + std::to_string(4 + i) + ".0");
    EXPECT_EQ((*chips)[i].generation, "v6e");
    EXPECT_EQ((*chips)[i].device_id, 0x006f);
  }
}

TEST(DiscoveryTest, NoTreeIsNoChipsAndDamageIsNamed) {
  auto none = DiscoverChips(DataDir() + "/sysfs/does_not_exist");
  ASSERT_TRUE(none.ok());
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

TEST(RegistrarTest, BackoffDoublesFromOneSecondUpToTheCap) {
  int64_t b = 0;
  std::vector<int64_t> seen;
  for (int i = 0; i < 7; ++i) seen.push_back(b = NextBackoffNs(b, 30'000'000'000));
  EXPECT_EQ(seen, (std::vector<int64_t>{1'000'000'000, 2'000'000'000, 4'000'000'000, 8'000'000'000,
                                        16'000'000'000, 30'000'000'000, 30'000'000'000}));
}

}  // namespace
}  // namespace podprof::agent
