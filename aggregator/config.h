// The aggregator's configuration: one plain struct with documented defaults, loaded from TOML
// (deploy/aggregator.toml is the annotated example), overridden by flags, validated once.
#ifndef PODPROF_AGGREGATOR_CONFIG_H_
#define PODPROF_AGGREGATOR_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "aggregator/recorder/telemetry.h"
#include "aggregator/recorder/triggers.h"
#include "security/tls.h"

namespace podprof::aggregator {

// Where the aggregator looks for its file when --config is not given.
inline constexpr char kDefaultConfigPath[] = "/etc/podprof/aggregator.toml";

struct AggregatorConfig {
  // podprof.v1.Aggregator listens here.
  std::string listen = "0.0.0.0:7100";
  // The SQLite database file.
  std::string db = "/var/lib/podprof/podprof.db";
  // Retention: captures older than this go (0 = never); the database is kept under
  // max_bytes (0 = no cap); timelines go after keep_timelines (0 = with their capture).
  int64_t retention_max_age_ns = 0;
  int64_t retention_max_bytes = 0;
  int64_t retention_keep_timelines_ns = 0;
  // How often retention runs.
  int64_t retention_interval_ns = 3'600'000'000'000;
  // Where uploads are spooled during an import; empty = $TMPDIR or /tmp.
  std::string spool_dir;
  // Heartbeat period asked of agents, and how often each agent's clock is probed.
  int64_t heartbeat_interval_ns = 10'000'000'000;
  int64_t probe_interval_ns = 10'000'000'000;
  // Mutual TLS for the server and for the connections to agents (security/tls.h); plaintext
  // only with insecure = true, and then the default listen address is loopback.
  security::TlsConfig tls;
  // Identities (certificate CN or SAN) allowed to register as agents, and to start or cancel
  // captures and import data; empty allows only certificates carrying the role's URI SAN,
  // urn:podprof:role:agent or urn:podprof:role:operator (security/tls.h).
  std::vector<std::string> allowed_agents, allowed_operators;
  // Host names an agent identity may register besides the names in its certificate (an agent
  // registers only hosts its certificate names: CN or SAN). `[tls.agent_hosts]`, identity =
  // "host-1,host-2".
  std::map<std::string, std::vector<std::string>> agent_hosts;
  // Limits against abuse: the longest capture, captures at once, StartCapture calls per
  // minute, the largest message received, and concurrent streams per connection.
  int64_t max_capture_duration_ns = 300'000'000'000;
  int64_t max_concurrent_captures = 4;
  int64_t max_captures_per_minute = 30;
  int64_t max_message_bytes = 16 << 20;
  int64_t max_concurrent_streams = 100;
  // The ingest pipeline: threads that read agents' streams and analyse each host as it ends
  // (0 = one per core); hosts streaming at once (the rest wait in their agents, held by gRPC
  // flow control).
  int64_t ingest_workers = 0;
  int64_t ingest_max_active_hosts = 16;
  // The most one host's capture stream may bring (OrchestratorLimits::max_host_stream_bytes).
  int64_t ingest_max_host_stream_bytes = int64_t{1} << 30;
  // The most all hosts' capture streams may hold at once (OrchestratorLimits::max_stream_bytes).
  int64_t ingest_max_stream_bytes = int64_t{2} << 30;
  // [http]: the web pages, the JSON/CSV API and /metrics (docs/HTTP.md). HTTPS with the
  // daemon's certificates and client certificates of its CA, unless `insecure`; an empty
  // listen turns it off.
  struct Http {
    std::string listen = "127.0.0.1:7180";
    int64_t max_request_bytes = 1 << 20;
    int64_t max_requests_per_second = 50;
    // The Perfetto UI the capture page's "Open in Perfetto" posts traces to: a self-hosted
    // one on an air-gapped cluster.
    std::string perfetto_ui = "https://ui.perfetto.dev";
    // Names the server answers to beyond localhost, IP addresses and this machine's name (a
    // Host header naming anything else gets 421: DNS rebinding), lower case, no port.
    std::vector<std::string> allowed_hosts;
    // The address users reach the pages at through a proxy ("https://podprof.example.com"):
    // its name is answered and its pages may start and cancel captures.
    std::string external_url;
    // Plaintext (`insecure`) beyond loopback: allow starting and cancelling captures over
    // HTTP, which then anyone who can reach the port may do. Off, the pages are read-only.
    bool insecure_writes = false;
  } http;
  // [fleet]: replication to a ClickHouse fleet store (docs/FLEET.md); off while
  // clickhouse_url is empty. The password comes from password_file, else from the systemd
  // credential `clickhouse-password` ($CREDENTIALS_DIRECTORY), never from the command line.
  struct Fleet {
    std::string clickhouse_url;
    std::string database = "podprof";
    std::string user = "default";
    std::string password_file;
    std::string pod;          // a name for this aggregator's pod, on every row; default: host name
    std::string cluster;      // read through Distributed tables over this cluster's shards
    int64_t batch_size = 20;  // captures per INSERT
    int64_t flush_interval_ns = 2'000'000'000;
    int64_t backlog_limit = 10'000;  // captures waiting, at most
    int64_t timeout_ns = 30'000'000'000;
    // At start, queue the captures stored here that started this recently (0 = none): for a
    // pod with history when the fleet store is turned on. Those ClickHouse holds are skipped.
    int64_t backfill_ns = 0;
  } fleet;
  // [telemetry]: the agents' always-on samples, rolled up per chip over store_interval and kept
  // for retention (telemetry.h).
  TelemetryOptions telemetry;
  // [triggers]: automatic snapshots from the telemetry, their thresholds, cooldown and budget
  // (triggers.h, docs/RECORDER.md).
  TriggerOptions triggers;
  // [snapshots] without_recorder: what a snapshot does when a host has no armed flight recorder
  // to cut the window before the request from: "capture-after" captures the pod from the
  // request on and stores it as that window (labelled window = after-request), "refuse" fails
  // it with FAILED_PRECONDITION naming the hosts (docs/RECORDER.md).
  std::string snapshots_without_recorder = "capture-after";
  // Whether `listen` was set (by the file or a flag), so plaintext can default to loopback.
  bool listen_set = false;
};

// The command-line flags that override configuration keys; empty (false) leaves the key alone.
struct AggregatorFlags {
  // The file, and whether --config named it: a named file must exist, the default may not.
  std::string config = kDefaultConfigPath;
  bool config_given = false;
  std::string listen;
  std::string db;
  bool insecure = false;
  std::string clickhouse_url;
  std::string http_listen;
};

// Every key the file may hold, dotted ("triggers.recent"); an entry ending in ".*" takes a
// table of any keys ("tls.agent_hosts.*"). deploy/aggregator.toml sets each of them.
const std::vector<std::string>& AggregatorConfigKeys();

// Loads `path` over the defaults. Unknown keys, wrong types and bad values fail with
// InvalidArgument naming the file and the key; an unreadable file with ErrnoToStatus's code.
absl::StatusOr<AggregatorConfig> LoadAggregatorConfig(const std::string& path);

// Checks the ranges of the values; the message names the keys (not the file).
absl::Status ValidateAggregatorConfig(const AggregatorConfig& config);

// The running configuration: the file (when given, or present at the default path) over the
// defaults, then the flags; plaintext without a listen key listens on loopback. Errors as
// LoadAggregatorConfig's. Called at start and again on SIGHUP.
absl::StatusOr<AggregatorConfig> BuildAggregatorConfig(const AggregatorFlags& flags);

// Applies the keys that may change while running (SIGHUP): the [retention] keys, the allow
// lists and tls.agent_hosts. The listen
// address, database and the rest need a restart. Returns the names of the keys that changed.
std::vector<std::string> ApplyReloadable(const AggregatorConfig& from, AggregatorConfig* to);

// Why the HTTP API may not start or cancel captures, or "" when the operator role decides:
// plaintext (`insecure`) on an address beyond loopback, where every caller would be an
// operator, without [http] insecure_writes.
std::string HttpWritesRefused(const AggregatorConfig& config);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CONFIG_H_
