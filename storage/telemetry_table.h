// Stored telemetry (schema version 9, DCN columns 11): per chip and stored interval, the steps
// that ended with their mean and largest time, duty cycle, HBM in use, queued programs, the
// host's collectives with their mean time and its DCN transfer latencies, as the aggregator's
// telemetry hub (aggregator/recorder/telemetry.h) rolls up the agents' samples. It has its own
// retention, by age, apart from the captures'. Thread-safe.
#ifndef PODPROF_STORAGE_TELEMETRY_TABLE_H_
#define PODPROF_STORAGE_TELEMETRY_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/database.h"

namespace podprof::storage {

// One chip of one host over one stored interval (podprof.v1.TelemetryRow on the wire). -1 in a
// field the runtime did not report.
struct TelemetryRecord {
  std::string host;
  int64_t time_ns = 0;  // end of the interval, aggregator clock
  int64_t interval_ns = 0;
  int chip = 0;
  int64_t steps = 0;
  double step_mean_us = 0, step_max_us = 0;
  double duty_cycle_percent = -1;
  int64_t hbm_used_bytes = -1, queued = -1;
  // The host's collectives in the interval and their mean time, us (-1: not reported).
  int64_t collectives = 0;
  double collective_mean_us = -1;
  // The host's DCN transfers in the interval (multi-slice jobs), the transfer-weighted mean of
  // its samples' p50 latencies and the largest of their p99s, us (-1: none).
  int64_t dcn_transfers = 0;
  double dcn_latency_p50_us = -1, dcn_latency_p99_us = -1;
};

struct TelemetryFilter {
  int64_t since_ns = 0;            // intervals that ended at or after
  int64_t until_ns = INT64_MAX;    // and before
  std::vector<std::string> hosts;  // empty: every host
  int64_t limit = 100'000;         // the newest rows when more match
};

class TelemetryTable {
 public:
  explicit TelemetryTable(Database& db) : db_(db) {}
  TelemetryTable(const TelemetryTable&) = delete;
  TelemetryTable& operator=(const TelemetryTable&) = delete;

  // Stores `rows` in one transaction on the writer, and waits for it. A row whose (time, host,
  // chip) is stored already replaces it.
  absl::Status Append(const std::vector<TelemetryRecord>& rows);
  // Matching rows, oldest first; *truncated says whether `limit` left older ones out.
  absl::StatusOr<std::vector<TelemetryRecord>> Read(const TelemetryFilter& filter,
                                                    bool* truncated = nullptr);
  // Deletes rows whose interval ended before `before_ns`; returns how many went.
  absl::StatusOr<int64_t> DeleteBefore(int64_t before_ns);
  // Rows stored.
  absl::StatusOr<int64_t> Count();

 private:
  Database& db_;
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_TELEMETRY_TABLE_H_
