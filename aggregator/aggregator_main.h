// Entry point of podprof-aggregator: the pod-wide capture and statistics daemon.
#ifndef PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_
#define PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "security/tls.h"

namespace podprof::aggregator {

// The aggregator's configuration (deploy/aggregator.toml documents every key).
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
  // captures and import data; empty allows every caller with a valid certificate.
  std::vector<std::string> allowed_agents, allowed_operators;
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
  // Whether `listen` was set (by the file or a flag), so plaintext can default to loopback.
  bool listen_set = false;
};

// Loads `path` over the defaults; errors name the file and key.
absl::StatusOr<AggregatorConfig> LoadAggregatorConfig(const std::string& path);

// Parses flags and config, serves until SIGTERM/SIGINT, returns the exit code (2 for bad
// configuration, 1 when the database cannot be opened or the address bound).
int AggregatorMain(int argc, char** argv);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_
