// The aggregator's configuration: the example file, defaults, errors naming the file and the
// key, flags over the file, and the keys a SIGHUP reload applies.
#include "aggregator/config.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/config.h"
#include "gtest/gtest.h"
#include "tests/util/shipped_config.h"
#include "tests/util/status_matchers.h"

namespace podprof::aggregator {
namespace {

// Writes `text` to a file of its own under the test's temporary directory.
std::string WriteConfig(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/agg_config_", name, ".toml");
  std::ofstream(path) << text;
  return path;
}

// #53: deploy/aggregator.toml sets every key the loader knows (it lacked [telemetry] and
// [triggers]), each at its compiled default; none is deliberately different.
TEST(AggregatorConfigTest, TheShippedFileSetsEveryKeyAtItsDefault) {
  const std::string path = std::string(PODPROF_SOURCE_DIR) + "/deploy/aggregator.toml";
  absl::StatusOr<ConfigFile> file = ConfigFile::Load(path);
  ASSERT_OK(file);
  EXPECT_EQ(testing::KeysNotSet(*file, AggregatorConfigKeys()), std::vector<std::string>{});
  absl::StatusOr<AggregatorConfig> shipped = LoadAggregatorConfig(path);
  ASSERT_OK(shipped);
  using C = AggregatorConfig;
  using J = nlohmann::json;
  const std::map<std::string, testing::KeyValue<C>> values = {
      {"listen", [](const C& c) { return J(c.listen); }},
      {"db", [](const C& c) { return J(c.db); }},
      {"insecure", [](const C& c) { return J(c.tls.insecure); }},
      {"retention.max_age", [](const C& c) { return J(c.retention_max_age_ns); }},
      {"retention.max_bytes", [](const C& c) { return J(c.retention_max_bytes); }},
      {"retention.keep_timelines", [](const C& c) { return J(c.retention_keep_timelines_ns); }},
      {"retention.interval", [](const C& c) { return J(c.retention_interval_ns); }},
      {"import.spool_dir", [](const C& c) { return J(c.spool_dir); }},
      {"agents.heartbeat_interval", [](const C& c) { return J(c.heartbeat_interval_ns); }},
      {"agents.probe_interval", [](const C& c) { return J(c.probe_interval_ns); }},
      {"tls.cert", [](const C& c) { return J(c.tls.cert); }},
      {"tls.key", [](const C& c) { return J(c.tls.key); }},
      {"tls.ca", [](const C& c) { return J(c.tls.ca); }},
      {"tls.allowed_agents", [](const C& c) { return J(c.allowed_agents); }},
      {"tls.allowed_operators", [](const C& c) { return J(c.allowed_operators); }},
      {"tls.agent_hosts.*", [](const C& c) { return J(c.agent_hosts); }},
      {"limits.max_capture_duration", [](const C& c) { return J(c.max_capture_duration_ns); }},
      {"limits.max_concurrent_captures", [](const C& c) { return J(c.max_concurrent_captures); }},
      {"limits.max_captures_per_minute", [](const C& c) { return J(c.max_captures_per_minute); }},
      {"limits.max_message_bytes", [](const C& c) { return J(c.max_message_bytes); }},
      {"limits.max_concurrent_streams", [](const C& c) { return J(c.max_concurrent_streams); }},
      {"ingest.workers", [](const C& c) { return J(c.ingest_workers); }},
      {"ingest.max_active_hosts", [](const C& c) { return J(c.ingest_max_active_hosts); }},
      {"ingest.max_host_stream_bytes",
       [](const C& c) { return J(c.ingest_max_host_stream_bytes); }},
      {"ingest.max_stream_bytes", [](const C& c) { return J(c.ingest_max_stream_bytes); }},
      {"http.listen", [](const C& c) { return J(c.http.listen); }},
      {"http.max_request_bytes", [](const C& c) { return J(c.http.max_request_bytes); }},
      {"http.max_requests_per_second",
       [](const C& c) { return J(c.http.max_requests_per_second); }},
      {"http.perfetto_ui", [](const C& c) { return J(c.http.perfetto_ui); }},
      {"http.allowed_hosts", [](const C& c) { return J(c.http.allowed_hosts); }},
      {"http.external_url", [](const C& c) { return J(c.http.external_url); }},
      {"http.insecure_writes", [](const C& c) { return J(c.http.insecure_writes); }},
      {"fleet.clickhouse_url", [](const C& c) { return J(c.fleet.clickhouse_url); }},
      {"fleet.database", [](const C& c) { return J(c.fleet.database); }},
      {"fleet.user", [](const C& c) { return J(c.fleet.user); }},
      {"fleet.password_file", [](const C& c) { return J(c.fleet.password_file); }},
      {"fleet.pod", [](const C& c) { return J(c.fleet.pod); }},
      {"fleet.cluster", [](const C& c) { return J(c.fleet.cluster); }},
      {"fleet.batch_size", [](const C& c) { return J(c.fleet.batch_size); }},
      {"fleet.flush_interval", [](const C& c) { return J(c.fleet.flush_interval_ns); }},
      {"fleet.backlog_limit", [](const C& c) { return J(c.fleet.backlog_limit); }},
      {"fleet.timeout", [](const C& c) { return J(c.fleet.timeout_ns); }},
      {"fleet.backfill", [](const C& c) { return J(c.fleet.backfill_ns); }},
      {"telemetry.store_interval", [](const C& c) { return J(c.telemetry.store_interval_ns); }},
      {"telemetry.retention", [](const C& c) { return J(c.telemetry.retention_ns); }},
      {"triggers.enabled", [](const C& c) { return J(c.triggers.enabled); }},
      {"triggers.window", [](const C& c) { return J(c.triggers.window_ns); }},
      {"triggers.recent", [](const C& c) { return J(c.triggers.recent_s); }},
      {"triggers.baseline", [](const C& c) { return J(c.triggers.baseline_s); }},
      {"triggers.step_regression", [](const C& c) { return J(c.triggers.step_regression); }},
      {"triggers.straggler", [](const C& c) { return J(c.triggers.straggler); }},
      {"triggers.duty_drop", [](const C& c) { return J(c.triggers.duty_drop); }},
      {"triggers.hang_after", [](const C& c) { return J(c.triggers.hang_ns); }},
      {"triggers.dcn_regression", [](const C& c) { return J(c.triggers.dcn_regression); }},
      {"triggers.dcn_margin_us", [](const C& c) { return J(c.triggers.dcn_margin_us); }},
      {"triggers.dcn_intervals", [](const C& c) { return J(c.triggers.dcn_intervals); }},
      {"triggers.cooldown", [](const C& c) { return J(c.triggers.cooldown_ns); }},
      {"triggers.hourly_budget", [](const C& c) { return J(c.triggers.hourly_budget); }},
      {"triggers.min_gap", [](const C& c) { return J(c.triggers.min_gap_ns); }},
      {"snapshots.without_recorder", [](const C& c) { return J(c.snapshots_without_recorder); }},
  };
  testing::ExpectShippedDefaults(AggregatorConfigKeys(), values, *shipped, AggregatorConfig(),
                                 /*differ=*/{});
}

TEST(AggregatorConfigTest, TheExampleLoadsWithTheDefaults) {
  absl::StatusOr<AggregatorConfig> c =
      LoadAggregatorConfig(std::string(PODPROF_SOURCE_DIR) + "/deploy/aggregator.toml");
  ASSERT_OK(c);
  const AggregatorConfig defaults;
  EXPECT_EQ(c->listen, defaults.listen);
  EXPECT_EQ(c->db, defaults.db);
  EXPECT_EQ(c->retention_interval_ns, 3'600'000'000'000);
  EXPECT_EQ(c->max_capture_duration_ns, defaults.max_capture_duration_ns);
  EXPECT_EQ(c->max_message_bytes, defaults.max_message_bytes);
  EXPECT_EQ(c->ingest_max_active_hosts, defaults.ingest_max_active_hosts);
  EXPECT_FALSE(c->tls.insecure);
}

// [snapshots] without_recorder (#53): capture-after by default and in the shipped file, refuse
// when asked, and anything else named as the bad key.
TEST(AggregatorConfigTest, SnapshotsWithoutARecorderCaptureAfterOrRefuse) {
  absl::StatusOr<AggregatorConfig> shipped =
      LoadAggregatorConfig(std::string(PODPROF_SOURCE_DIR) + "/deploy/aggregator.toml");
  ASSERT_OK(shipped);
  EXPECT_EQ(shipped->snapshots_without_recorder, "capture-after");
  absl::StatusOr<AggregatorConfig> refuse =
      LoadAggregatorConfig(WriteConfig("refuse", "[snapshots]\nwithout_recorder = \"refuse\"\n"));
  ASSERT_OK(refuse);
  EXPECT_EQ(refuse->snapshots_without_recorder, "refuse");
  absl::StatusOr<AggregatorConfig> bad = LoadAggregatorConfig(
      WriteConfig("bad_snap", "[snapshots]\nwithout_recorder = \"capture-before\"\n"));
  if (bad.ok()) {
    absl::Status s = ValidateAggregatorConfig(*bad);
    EXPECT_FALSE(s.ok());
    EXPECT_TRUE(absl::StrContains(s.message(), "snapshots.without_recorder")) << s;
  } else {
    EXPECT_TRUE(absl::StrContains(bad.status().message(), "snapshots.without_recorder"))
        << bad.status();
  }
}

TEST(AggregatorConfigTest, AFileOverridesOnlyItsKeys) {
  const std::string path = WriteConfig("good", R"(
db = "/srv/podprof.db"
[retention]
max_age = "720h"
max_bytes = 1000000
[agents]
probe_interval = "2s"
[tls]
allowed_operators = ["ops"]
)");
  absl::StatusOr<AggregatorConfig> c = LoadAggregatorConfig(path);
  ASSERT_OK(c);
  EXPECT_EQ(c->db, "/srv/podprof.db");
  EXPECT_EQ(c->retention_max_age_ns, int64_t{720} * 3'600'000'000'000);
  EXPECT_EQ(c->retention_max_bytes, 1'000'000);
  EXPECT_EQ(c->probe_interval_ns, 2'000'000'000);
  EXPECT_EQ(c->allowed_operators, std::vector<std::string>{"ops"});
  EXPECT_EQ(c->listen, AggregatorConfig().listen);
  EXPECT_FALSE(c->listen_set);
  EXPECT_EQ(c->heartbeat_interval_ns, AggregatorConfig().heartbeat_interval_ns);
}

TEST(AggregatorConfigTest, AnUnknownKeyIsNamedWithTheFile) {
  const std::string path = WriteConfig("unknown", "[retention]\nmax_agee = \"1h\"\n");
  absl::StatusOr<AggregatorConfig> c = LoadAggregatorConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "retention.max_agee")) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), path)) << c.status();
}

TEST(AggregatorConfigTest, BadValuesAreNamedWithTheFile) {
  struct Case {
    std::string text, says;
  };
  for (const Case& c : std::vector<Case>{
           {"[retention]\ninterval = \"10ms\"\n", "retention.interval must be at least 1s"},
           {"[retention]\nmax_bytes = -1\n", "retention values cannot be negative"},
           {"[agents]\nheartbeat_interval = \"1ms\"\n", "agents.heartbeat_interval"},
           {"[limits]\nmax_message_bytes = 10\n", "max_message_bytes 64 KiB..1 GiB"},
           {"[ingest]\nworkers = 5000\n", "ingest: workers"},
           {"[retention]\nmax_age = 5\n", "key 'retention.max_age'"},
           {"db = 3\n", "key 'db'"},
           {"[fleet]\nclickhouse_url = \"https://ch:8443\"\n", "fleet.clickhouse_url"},
           {"[fleet]\ndatabase = \"pod-prof\"\n", "fleet.database 'pod-prof'"},
           {"[fleet]\nbatch_size = 0\n", "fleet: batch_size must be 1..10000"},
           {"[http]\nmax_request_bytes = 10\n", "http: max_request_bytes"},
           {"[http]\nperfetto_ui = \"ui.perfetto.dev\"\n",
            "http.perfetto_ui \"ui.perfetto.dev\" is not an http:// or https:// address"},
           {"[http]\nallowed_hosts = [\"podprof.example.com:7180\"]\n",
            "http.allowed_hosts: \"podprof.example.com:7180\" is not a lower-case host name"},
           {"[http]\nexternal_url = \"podprof.example.com\"\n",
            "http.external_url \"podprof.example.com\" is not an http:// or https:// address"},
       }) {
    const std::string path = WriteConfig("bad", c.text);
    absl::StatusOr<AggregatorConfig> loaded = LoadAggregatorConfig(path);
    ASSERT_FALSE(loaded.ok()) << c.text;
    EXPECT_TRUE(absl::StrContains(loaded.status().message(), c.says)) << loaded.status();
    EXPECT_TRUE(absl::StrContains(loaded.status().message(), path)) << loaded.status();
  }
}

// Plaintext beyond loopback made every HTTP caller an operator: now it takes an opt-in.
TEST(AggregatorConfigTest, PlaintextHttpBeyondLoopbackIsReadOnlyUnlessOptedIn) {
  AggregatorConfig c;
  EXPECT_EQ(HttpWritesRefused(c), "");  // TLS: the operator role decides
  c.tls.insecure = true;
  for (const char* loopback : {"127.0.0.1:7180", "localhost:7180", "[::1]:7180"}) {
    c.http.listen = loopback;
    EXPECT_EQ(HttpWritesRefused(c), "") << loopback;
  }
  c.http.listen = "0.0.0.0:7180";
  EXPECT_TRUE(absl::StrContains(HttpWritesRefused(c), "insecure_writes")) << HttpWritesRefused(c);
  c.http.listen = "10.1.2.3:7180";
  EXPECT_NE(HttpWritesRefused(c), "");
  c.http.insecure_writes = true;
  EXPECT_EQ(HttpWritesRefused(c), "");
}

TEST(AggregatorConfigTest, FlagsOverrideTheFile) {
  AggregatorFlags flags;
  flags.config = WriteConfig("flags", "listen = \"0.0.0.0:9000\"\ndb = \"/a.db\"\n");
  flags.config_given = true;
  flags.db = "/b.db";
  absl::StatusOr<AggregatorConfig> c = BuildAggregatorConfig(flags);
  ASSERT_OK(c);
  EXPECT_EQ(c->db, "/b.db");
  EXPECT_EQ(c->listen, "0.0.0.0:9000");
  flags.listen = "127.0.0.1:0";
  c = BuildAggregatorConfig(flags);
  ASSERT_OK(c);
  EXPECT_EQ(c->listen, "127.0.0.1:0");
}

TEST(AggregatorConfigTest, PlaintextWithoutAListenKeyStaysOnLoopback) {
  AggregatorFlags flags;
  flags.config = WriteConfig("empty", "");
  flags.config_given = true;
  flags.insecure = true;
  absl::StatusOr<AggregatorConfig> c = BuildAggregatorConfig(flags);
  ASSERT_OK(c);
  EXPECT_TRUE(c->tls.insecure);
  EXPECT_EQ(c->listen, "127.0.0.1:7100");
  flags.config = WriteConfig("listen", "listen = \"0.0.0.0:7200\"\n");
  c = BuildAggregatorConfig(flags);
  ASSERT_OK(c);
  EXPECT_EQ(c->listen, "0.0.0.0:7200");
}

TEST(AggregatorConfigTest, ANamedFileMustExistTheDefaultNeedNot) {
  AggregatorFlags flags;
  flags.config = ::testing::TempDir() + "/agg_config_missing.toml";
  std::filesystem::remove(flags.config);
  absl::StatusOr<AggregatorConfig> c = BuildAggregatorConfig(flags);
  ASSERT_OK(c);
  EXPECT_EQ(c->db, AggregatorConfig().db);
  flags.config_given = true;
  c = BuildAggregatorConfig(flags);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), flags.config)) << c.status();
}

TEST(AggregatorConfigTest, ReloadAppliesOnlyRetentionAndNamesWhatChanged) {
  AggregatorConfig running;
  AggregatorConfig fresh;
  fresh.retention_max_age_ns = 1'000'000'000;
  fresh.retention_interval_ns = 60'000'000'000;
  fresh.db = "/elsewhere.db";
  fresh.listen = "0.0.0.0:1";
  EXPECT_EQ(ApplyReloadable(fresh, &running),
            (std::vector<std::string>{"retention.max_age", "retention.interval"}));
  EXPECT_EQ(running.retention_max_age_ns, 1'000'000'000);
  EXPECT_EQ(running.retention_interval_ns, 60'000'000'000);
  // The database and the address need a restart.
  EXPECT_EQ(running.db, AggregatorConfig().db);
  EXPECT_EQ(running.listen, AggregatorConfig().listen);
  EXPECT_TRUE(ApplyReloadable(fresh, &running).empty());
}

TEST(AggregatorConfigTest, AgentHostsGiveIdentitiesHostsAndReload) {
  const std::string path = WriteConfig(
      "agent_hosts", "[tls.agent_hosts]\n\"pool-cert\" = \"h1, h2\"\n\"solo\" = \"h3\"\n");
  absl::StatusOr<AggregatorConfig> c = LoadAggregatorConfig(path);
  ASSERT_OK(c);
  EXPECT_EQ(c->agent_hosts["pool-cert"], (std::vector<std::string>{"h1", "h2"}));
  EXPECT_EQ(c->agent_hosts["solo"], (std::vector<std::string>{"h3"}));
  // A number where host names go is named with the file.
  absl::StatusOr<AggregatorConfig> bad =
      LoadAggregatorConfig(WriteConfig("agent_hosts_bad", "[tls.agent_hosts]\nx = 3\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tls.agent_hosts.x"), std::string::npos) << bad.status();
  AggregatorConfig running;
  EXPECT_EQ(ApplyReloadable(*c, &running), (std::vector<std::string>{"tls.agent_hosts"}));
  EXPECT_EQ(running.agent_hosts, c->agent_hosts);
}

}  // namespace
}  // namespace podprof::aggregator
