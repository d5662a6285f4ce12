// Questions asked of the whole fleet, read from ClickHouse's `_all` tables (fleet/schema.h):
// a kernel's history across pods, the top kernels, pods or hosts, and regressions between two
// periods. Percentiles come from sketches merged inside ClickHouse (sumMap of the bins) and
// are read with the same DDSketch as the SQLite store's, so they equal `podprof history`'s for
// the same captures. The rows as podprof prints them (percentiles read, report/fleet_rows.h) come
// from here too: the CLI and the aggregator's /api/v1/fleet routes answer with them.
#ifndef PODPROF_FLEET_QUERIES_H_
#define PODPROF_FLEET_QUERIES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/clickhouse.h"
#include "report/fleet_rows.h"
#include "trace/ddsketch.h"

namespace podprof::fleet {

struct FleetFilter {
  std::string database = "podprof";
  int64_t since_ns = 0;  // capture start, wall clock
  std::string pod;       // empty = every pod
  std::map<std::string, std::string> labels;
  // FleetHistory's most rows (its SQL's LIMIT, after the order); 0: every row.
  int64_t max_rows = 0;
};

// One capture's figures for one kernel (module, op name), merged over its definitions.
struct FleetPoint {
  std::string pod, module, op_name, capture_id;
  int64_t start_ns = 0;
  int64_t count = 0, total_ps = 0, chips = 0;
  trace::DDSketch sketch;
};

// Kernels whose op name matches `op_regex` (RE2, partial match), per pod and capture, oldest
// first within each (module, op name, pod). The pattern is checked here first
// (CheckUserPattern: InvalidArgument naming op_regex when it is too long or not RE2), so a bad
// one is refused without a query.
absl::StatusOr<std::vector<FleetPoint>> FleetHistory(const ClickHouse& ch,
                                                     const std::string& op_regex,
                                                     const FleetFilter& filter);

enum class TopBy { kKernel, kPod, kHost };

// "kernel", "pod", "host"; and back (InvalidArgument naming `by` for another name).
const char* TopByName(TopBy by);
absl::StatusOr<TopBy> TopByNamed(const std::string& name);

struct FleetTopRow {
  std::string pod, host, module, op_name;  // what the row is grouped by; the rest empty
  int64_t count = 0, total_ps = 0;
  int64_t captures = 0, pods = 0;
  trace::DDSketch sketch;
};

// The rows with the most kernel time since filter.since_ns, most first; at most `limit`.
absl::StatusOr<std::vector<FleetTopRow>> FleetTop(const ClickHouse& ch, TopBy by,
                                                  const FleetFilter& filter, int limit);

struct FleetRegression {
  std::string pod, module, op_name;
  trace::DDSketch baseline, candidate;
  int64_t baseline_captures = 0, candidate_captures = 0;
  double p50_change = 0, p99_change = 0;
  bool p50_regressed = false, p99_regressed = false;
};

// Per pod and kernel, the period [now - period, now) against the one before it. A median
// regressed when it rose beyond `threshold` (never less than twice the sketch's error) and
// beyond the baseline's own p90; a p99 when it rose beyond the threshold and beyond the
// baseline's p99.9. Regressions first (largest change first), then the rest.
absl::StatusOr<std::vector<FleetRegression>> FleetRegressions(const ClickHouse& ch,
                                                              const FleetFilter& filter,
                                                              int64_t now_ns, int64_t period_ns,
                                                              double threshold);

// The answers as podprof prints them: each sketch read at the printed quantiles (rounded to
// whole ps), in the same order.
std::vector<report::FleetHistoryRow> HistoryRows(const std::vector<FleetPoint>& points);
std::vector<report::FleetTopRow> TopRows(const std::vector<FleetTopRow>& rows);
std::vector<report::FleetRegressionRow> RegressionRows(const std::vector<FleetRegression>& rows);

}  // namespace podprof::fleet

#endif  // PODPROF_FLEET_QUERIES_H_
