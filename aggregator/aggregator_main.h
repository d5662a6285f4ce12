// Entry point of podprof-aggregator: the pod-wide capture and statistics daemon.
#ifndef PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_
#define PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

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
};

// Loads `path` over the defaults; errors name the file and key.
absl::StatusOr<AggregatorConfig> LoadAggregatorConfig(const std::string& path);

// Parses flags and config, serves until SIGTERM/SIGINT, returns the exit code (2 for bad
// configuration, 1 when the database cannot be opened or the address bound).
int AggregatorMain(int argc, char** argv);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_AGGREGATOR_MAIN_H_
