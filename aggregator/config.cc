#include "aggregator/config.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/config.h"
#include "common/status_macros.h"
#include "fleet/clickhouse.h"
#include "http/guard.h"
#include "http/server.h"

namespace podprof::aggregator {
namespace {

// Every key the file may hold; anything else is a typo reported with its line.
const std::vector<std::string>& KnownKeys() {
  static const auto* const keys = new std::vector<std::string>{"listen",
                                                               "db",
                                                               "retention.max_age",
                                                               "retention.max_bytes",
                                                               "retention.keep_timelines",
                                                               "retention.interval",
                                                               "import.spool_dir",
                                                               "agents.heartbeat_interval",
                                                               "agents.probe_interval",
                                                               "insecure",
                                                               "tls.cert",
                                                               "tls.key",
                                                               "tls.ca",
                                                               "tls.allowed_agents",
                                                               "tls.allowed_operators",
                                                               "tls.agent_hosts.*",
                                                               "limits.max_capture_duration",
                                                               "limits.max_concurrent_captures",
                                                               "limits.max_captures_per_minute",
                                                               "limits.max_message_bytes",
                                                               "limits.max_concurrent_streams",
                                                               "ingest.workers",
                                                               "ingest.max_active_hosts",
                                                               "ingest.max_host_stream_bytes",
                                                               "ingest.max_stream_bytes",
                                                               "http.listen",
                                                               "http.max_request_bytes",
                                                               "http.max_requests_per_second",
                                                               "http.perfetto_ui",
                                                               "http.allowed_hosts",
                                                               "http.external_url",
                                                               "http.insecure_writes",
                                                               "fleet.clickhouse_url",
                                                               "fleet.database",
                                                               "fleet.user",
                                                               "fleet.password_file",
                                                               "fleet.pod",
                                                               "fleet.cluster",
                                                               "fleet.batch_size",
                                                               "fleet.flush_interval",
                                                               "fleet.backlog_limit",
                                                               "fleet.timeout",
                                                               "fleet.backfill",
                                                               "telemetry.store_interval",
                                                               "telemetry.retention",
                                                               "triggers.enabled",
                                                               "triggers.window",
                                                               "triggers.recent",
                                                               "triggers.baseline",
                                                               "triggers.step_regression",
                                                               "triggers.straggler",
                                                               "triggers.duty_drop",
                                                               "triggers.hang_after",
                                                               "triggers.dcn_regression",
                                                               "triggers.dcn_margin_us",
                                                               "triggers.dcn_intervals",
                                                               "triggers.cooldown",
                                                               "triggers.hourly_budget",
                                                               "triggers.min_gap",
                                                               "snapshots.without_recorder"};
  return *keys;
}

absl::Status ReadLimits(const ConfigFile& f, AggregatorConfig* c) {
  RETURN_IF_ERROR(f.GetInt("ingest.workers", &c->ingest_workers));
  RETURN_IF_ERROR(f.GetInt("ingest.max_active_hosts", &c->ingest_max_active_hosts));
  RETURN_IF_ERROR(f.GetInt("ingest.max_host_stream_bytes", &c->ingest_max_host_stream_bytes));
  RETURN_IF_ERROR(f.GetInt("ingest.max_stream_bytes", &c->ingest_max_stream_bytes));
  RETURN_IF_ERROR(f.GetDurationNs("limits.max_capture_duration", &c->max_capture_duration_ns));
  RETURN_IF_ERROR(f.GetInt("limits.max_concurrent_captures", &c->max_concurrent_captures));
  RETURN_IF_ERROR(f.GetInt("limits.max_captures_per_minute", &c->max_captures_per_minute));
  RETURN_IF_ERROR(f.GetInt("limits.max_message_bytes", &c->max_message_bytes));
  RETURN_IF_ERROR(f.GetInt("limits.max_concurrent_streams", &c->max_concurrent_streams));
  return absl::OkStatus();
}

absl::Status ReadServing(const ConfigFile& f, AggregatorConfig* c) {
  const std::string default_listen = c->listen;
  RETURN_IF_ERROR(f.GetString("listen", &c->listen));
  c->listen_set = c->listen != default_listen;
  RETURN_IF_ERROR(f.GetBool("insecure", &c->tls.insecure));
  RETURN_IF_ERROR(f.GetString("tls.cert", &c->tls.cert));
  RETURN_IF_ERROR(f.GetString("tls.key", &c->tls.key));
  RETURN_IF_ERROR(f.GetString("tls.ca", &c->tls.ca));
  RETURN_IF_ERROR(f.GetStringList("tls.allowed_agents", &c->allowed_agents));
  RETURN_IF_ERROR(f.GetStringList("tls.allowed_operators", &c->allowed_operators));
  std::map<std::string, std::string> agent_hosts;
  RETURN_IF_ERROR(f.GetStringMap("tls.agent_hosts", &agent_hosts));
  c->agent_hosts.clear();
  for (const auto& [identity, hosts] : agent_hosts) {
    std::vector<std::string>& names = c->agent_hosts[identity];
    for (absl::string_view host : absl::StrSplit(hosts, ',', absl::SkipWhitespace())) {
      names.emplace_back(absl::StripAsciiWhitespace(host));
    }
  }
  RETURN_IF_ERROR(f.GetString("db", &c->db));
  RETURN_IF_ERROR(f.GetString("import.spool_dir", &c->spool_dir));
  RETURN_IF_ERROR(f.GetDurationNs("agents.heartbeat_interval", &c->heartbeat_interval_ns));
  RETURN_IF_ERROR(f.GetDurationNs("agents.probe_interval", &c->probe_interval_ns));
  return absl::OkStatus();
}

absl::Status ReadRetention(const ConfigFile& f, AggregatorConfig* c) {
  RETURN_IF_ERROR(f.GetDurationNs("retention.max_age", &c->retention_max_age_ns));
  RETURN_IF_ERROR(f.GetInt("retention.max_bytes", &c->retention_max_bytes));
  RETURN_IF_ERROR(f.GetDurationNs("retention.keep_timelines", &c->retention_keep_timelines_ns));
  RETURN_IF_ERROR(f.GetDurationNs("retention.interval", &c->retention_interval_ns));
  return absl::OkStatus();
}

absl::Status ReadHttp(const ConfigFile& f, AggregatorConfig* c) {
  RETURN_IF_ERROR(f.GetString("http.listen", &c->http.listen));
  RETURN_IF_ERROR(f.GetInt("http.max_request_bytes", &c->http.max_request_bytes));
  RETURN_IF_ERROR(f.GetInt("http.max_requests_per_second", &c->http.max_requests_per_second));
  RETURN_IF_ERROR(f.GetString("http.perfetto_ui", &c->http.perfetto_ui));
  RETURN_IF_ERROR(f.GetStringList("http.allowed_hosts", &c->http.allowed_hosts));
  RETURN_IF_ERROR(f.GetString("http.external_url", &c->http.external_url));
  RETURN_IF_ERROR(f.GetBool("http.insecure_writes", &c->http.insecure_writes));
  return absl::OkStatus();
}

absl::Status ReadFleet(const ConfigFile& f, AggregatorConfig* c) {
  AggregatorConfig::Fleet& fl = c->fleet;
  RETURN_IF_ERROR(f.GetString("fleet.clickhouse_url", &fl.clickhouse_url));
  RETURN_IF_ERROR(f.GetString("fleet.database", &fl.database));
  RETURN_IF_ERROR(f.GetString("fleet.user", &fl.user));
  RETURN_IF_ERROR(f.GetString("fleet.password_file", &fl.password_file));
  RETURN_IF_ERROR(f.GetString("fleet.pod", &fl.pod));
  RETURN_IF_ERROR(f.GetString("fleet.cluster", &fl.cluster));
  RETURN_IF_ERROR(f.GetInt("fleet.batch_size", &fl.batch_size));
  RETURN_IF_ERROR(f.GetDurationNs("fleet.flush_interval", &fl.flush_interval_ns));
  RETURN_IF_ERROR(f.GetInt("fleet.backlog_limit", &fl.backlog_limit));
  RETURN_IF_ERROR(f.GetDurationNs("fleet.timeout", &fl.timeout_ns));
  RETURN_IF_ERROR(f.GetDurationNs("fleet.backfill", &fl.backfill_ns));
  return absl::OkStatus();
}

absl::Status ReadFlightRecorder(const ConfigFile& f, AggregatorConfig* c) {
  TelemetryOptions& t = c->telemetry;
  RETURN_IF_ERROR(f.GetDurationNs("telemetry.store_interval", &t.store_interval_ns));
  RETURN_IF_ERROR(f.GetDurationNs("telemetry.retention", &t.retention_ns));
  TriggerOptions& g = c->triggers;
  int64_t recent_ns = int64_t{g.recent_s} * 1'000'000'000;
  int64_t baseline_ns = int64_t{g.baseline_s} * 1'000'000'000;
  RETURN_IF_ERROR(f.GetBool("triggers.enabled", &g.enabled));
  RETURN_IF_ERROR(f.GetDurationNs("triggers.window", &g.window_ns));
  RETURN_IF_ERROR(f.GetDurationNs("triggers.recent", &recent_ns));
  RETURN_IF_ERROR(f.GetDurationNs("triggers.baseline", &baseline_ns));
  RETURN_IF_ERROR(f.GetDouble("triggers.step_regression", &g.step_regression));
  RETURN_IF_ERROR(f.GetDouble("triggers.straggler", &g.straggler));
  RETURN_IF_ERROR(f.GetDouble("triggers.duty_drop", &g.duty_drop));
  RETURN_IF_ERROR(f.GetDurationNs("triggers.hang_after", &g.hang_ns));
  RETURN_IF_ERROR(f.GetDouble("triggers.dcn_regression", &g.dcn_regression));
  RETURN_IF_ERROR(f.GetDouble("triggers.dcn_margin_us", &g.dcn_margin_us));
  int64_t dcn_intervals = g.dcn_intervals;
  RETURN_IF_ERROR(f.GetInt("triggers.dcn_intervals", &dcn_intervals));
  g.dcn_intervals = static_cast<int>(std::clamp<int64_t>(dcn_intervals, -1, 3600));
  RETURN_IF_ERROR(f.GetDurationNs("triggers.cooldown", &g.cooldown_ns));
  int64_t budget = g.hourly_budget;
  RETURN_IF_ERROR(f.GetInt("triggers.hourly_budget", &budget));
  RETURN_IF_ERROR(f.GetDurationNs("triggers.min_gap", &g.min_gap_ns));
  g.recent_s = static_cast<int>(std::clamp<int64_t>(recent_ns / 1'000'000'000, 0, 3600));
  g.baseline_s = static_cast<int>(std::clamp<int64_t>(baseline_ns / 1'000'000'000, 0, 86400));
  g.hourly_budget = static_cast<int>(std::clamp<int64_t>(budget, -1, 1'000'000));
  RETURN_IF_ERROR(f.GetString("snapshots.without_recorder", &c->snapshots_without_recorder));
  return absl::OkStatus();
}

absl::Status ValidateFlightRecorder(const AggregatorConfig& c) {
  const TelemetryOptions& t = c.telemetry;
  const TriggerOptions& g = c.triggers;
  if (t.store_interval_ns < 1'000'000'000 || t.store_interval_ns % 1'000'000'000 != 0 ||
      t.retention_ns < t.store_interval_ns) {
    return absl::InvalidArgumentError(
        "telemetry.store_interval must be whole seconds, at least 1s, and telemetry.retention at "
        "least one store_interval");
  }
  if (g.recent_s < 2 || g.baseline_s < 2 || g.window_ns < 100'000'000 ||
      g.hang_ns < 2'000'000'000 || g.hourly_budget < 0 || g.cooldown_ns < 0 || g.min_gap_ns < 0) {
    return absl::InvalidArgumentError(
        "triggers: recent and baseline must be at least 2s, window at least 100ms, hang_after "
        "at least 2s, and hourly_budget, cooldown and min_gap not negative");
  }
  if (!(g.step_regression > 0) || !(g.straggler > 0) || !(g.duty_drop > 0 && g.duty_drop < 1)) {
    return absl::InvalidArgumentError(
        "triggers: step_regression and straggler must be above 0 and duty_drop in (0, 1)");
  }
  if (!(g.dcn_regression > 0) || !(g.dcn_margin_us >= 0 && g.dcn_margin_us < 1e9) ||
      g.dcn_intervals < 1) {
    return absl::InvalidArgumentError(
        "triggers: dcn_regression must be above 0, dcn_margin_us 0 or more and dcn_intervals at "
        "least 1");
  }
  if (c.snapshots_without_recorder != "capture-after" && c.snapshots_without_recorder != "refuse") {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshots.without_recorder must be \"capture-after\" or \"refuse\", not \"",
                     c.snapshots_without_recorder, "\""));
  }
  return absl::OkStatus();
}

// Names ClickHouse takes unquoted: letters, digits and underscores, not starting with a digit.
bool PlainIdentifier(const std::string& s) {
  if (s.empty() || absl::ascii_isdigit(s[0])) return false;
  for (char ch : s) {
    if (!absl::ascii_isalnum(ch) && ch != '_') return false;
  }
  return true;
}

absl::Status ValidateFleet(const AggregatorConfig::Fleet& f) {
  if (!PlainIdentifier(f.database)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet.database '", f.database, "' must be letters, digits and underscores"));
  }
  if (!f.cluster.empty() && !PlainIdentifier(f.cluster)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fleet.cluster '", f.cluster, "' must be letters, digits and underscores"));
  }
  if (!f.clickhouse_url.empty()) {
    fleet::ClickHouseOptions o;
    o.url = f.clickhouse_url;
    if (absl::Status s = fleet::ClickHouse::Create(o).status(); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("fleet.clickhouse_url: ", s.message()));
    }
  }
  if (f.batch_size < 1 || f.batch_size > 10'000 || f.backlog_limit < 1 ||
      f.flush_interval_ns < 10'000'000 || f.timeout_ns < 100'000'000 || f.backfill_ns < 0) {
    return absl::InvalidArgumentError(
        "fleet: batch_size must be 1..10000, backlog_limit at least 1, flush_interval at "
        "least 10ms and timeout at least 100ms");
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& AggregatorConfigKeys() { return KnownKeys(); }

absl::StatusOr<AggregatorConfig> LoadAggregatorConfig(const std::string& path) {
  AggregatorConfig c;
  ASSIGN_OR_RETURN(ConfigFile f, ConfigFile::Load(path));
  RETURN_IF_ERROR(f.CheckKnownKeys(KnownKeys()));
  RETURN_IF_ERROR(ReadLimits(f, &c));
  RETURN_IF_ERROR(ReadServing(f, &c));
  RETURN_IF_ERROR(ReadRetention(f, &c));
  RETURN_IF_ERROR(ReadFleet(f, &c));
  RETURN_IF_ERROR(ReadHttp(f, &c));
  RETURN_IF_ERROR(ReadFlightRecorder(f, &c));
  absl::Status s = ValidateAggregatorConfig(c);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  return c;
}

absl::Status ValidateAggregatorConfig(const AggregatorConfig& c) {
  if (c.ingest_workers < 0 || c.ingest_workers > 1024 || c.ingest_max_active_hosts < 1 ||
      c.ingest_max_active_hosts > 100'000) {
    return absl::InvalidArgumentError(
        "ingest: workers must be 0 (one per core) to 1024, max_active_hosts 1..100000");
  }
  if (c.ingest_max_host_stream_bytes < (1 << 20) || c.ingest_max_stream_bytes < (1 << 20)) {
    return absl::InvalidArgumentError(
        "ingest: max_host_stream_bytes and max_stream_bytes must be at least 1 MiB");
  }
  if (c.max_capture_duration_ns < 1'000'000 || c.max_concurrent_captures < 1 ||
      c.max_captures_per_minute < 1 || c.max_message_bytes < (64 << 10) ||
      c.max_message_bytes > (1 << 30) || c.max_concurrent_streams < 4) {
    return absl::InvalidArgumentError(
        "limits: max_capture_duration must be at least 1ms, max_concurrent_captures and "
        "max_captures_per_minute at least 1, max_message_bytes 64 KiB..1 GiB, "
        "max_concurrent_streams at least 4");
  }
  if (c.heartbeat_interval_ns < 100'000'000 || c.probe_interval_ns < 100'000'000) {
    return absl::InvalidArgumentError(
        "agents.heartbeat_interval and agents.probe_interval must be at least 100ms");
  }
  RETURN_IF_ERROR(ValidateFlightRecorder(c));
  if (c.retention_interval_ns < 1'000'000'000) {
    return absl::InvalidArgumentError("retention.interval must be at least 1s");
  }
  if (c.retention_max_bytes < 0 || c.retention_max_age_ns < 0 ||
      c.retention_keep_timelines_ns < 0) {
    return absl::InvalidArgumentError("retention values cannot be negative");
  }
  if (c.http.max_request_bytes < 1024 || c.http.max_request_bytes > (64 << 20) ||
      c.http.max_requests_per_second < 1) {
    return absl::InvalidArgumentError(
        "http: max_request_bytes must be 1 KiB..64 MiB and max_requests_per_second at least 1");
  }
  if (!absl::StartsWith(c.http.perfetto_ui, "http://") &&
      !absl::StartsWith(c.http.perfetto_ui, "https://")) {
    return absl::InvalidArgumentError(absl::StrCat("http.perfetto_ui \"", c.http.perfetto_ui,
                                                   "\" is not an http:// or https:// address"));
  }
  for (const std::string& h : c.http.allowed_hosts) {
    if (http::HostName(h) != h) {
      return absl::InvalidArgumentError(absl::StrCat(
          "http.allowed_hosts: \"", h, "\" is not a lower-case host name without a port"));
    }
  }
  if (!c.http.external_url.empty() && http::OriginOf(c.http.external_url).empty()) {
    return absl::InvalidArgumentError(absl::StrCat("http.external_url \"", c.http.external_url,
                                                   "\" is not an http:// or https:// address"));
  }
  return ValidateFleet(c.fleet);
}

absl::StatusOr<AggregatorConfig> BuildAggregatorConfig(const AggregatorFlags& flags) {
  AggregatorConfig config;
  if (flags.config_given || std::filesystem::exists(flags.config)) {
    ASSIGN_OR_RETURN(config, LoadAggregatorConfig(flags.config));
  }
  if (!flags.listen.empty()) {
    config.listen = flags.listen;
    config.listen_set = true;
  }
  if (!flags.db.empty()) config.db = flags.db;
  if (flags.insecure) config.tls.insecure = true;
  if (!flags.http_listen.empty())
    config.http.listen = flags.http_listen == "off" ? "" : flags.http_listen;
  if (!flags.clickhouse_url.empty()) {
    config.fleet.clickhouse_url = flags.clickhouse_url;
    if (absl::Status s = ValidateAggregatorConfig(config); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--clickhouse-url: ", s.message()));
    }
  }
  // Plaintext is for trusted networks and tests: unless told where, it stays on this host.
  if (config.tls.insecure && !config.listen_set) config.listen = "127.0.0.1:7100";
  return config;
}

std::vector<std::string> ApplyReloadable(const AggregatorConfig& from, AggregatorConfig* to) {
  std::vector<std::string> changed;
  auto apply = [&](const char* key, auto& dst, const auto& src) {
    if (dst != src) {
      dst = src;
      changed.push_back(key);
    }
  };
  apply("retention.max_age", to->retention_max_age_ns, from.retention_max_age_ns);
  apply("retention.max_bytes", to->retention_max_bytes, from.retention_max_bytes);
  apply("retention.keep_timelines", to->retention_keep_timelines_ns,
        from.retention_keep_timelines_ns);
  apply("retention.interval", to->retention_interval_ns, from.retention_interval_ns);
  apply("tls.agent_hosts", to->agent_hosts, from.agent_hosts);
  apply("tls.allowed_agents", to->allowed_agents, from.allowed_agents);
  apply("tls.allowed_operators", to->allowed_operators, from.allowed_operators);
  return changed;
}

std::string HttpWritesRefused(const AggregatorConfig& config) {
  if (!config.tls.insecure || config.http.insecure_writes) return "";
  absl::StatusOr<std::pair<std::string, int>> hp =
      http::SplitHostPort(config.http.listen, "http.listen");
  if (hp.ok()) {
    const std::string& host = hp->first;
    if (host == "localhost" || host == "::1" || absl::StartsWith(host, "127.")) return "";
  }
  return absl::StrCat("starting and cancelling captures over plaintext HTTP on ",
                      config.http.listen,
                      " is off: anyone who reaches the port would be an operator (use TLS, "
                      "listen on loopback, or set [http] insecure_writes = true)");
}

}  // namespace podprof::aggregator
