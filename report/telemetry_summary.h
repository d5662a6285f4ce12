// The stored telemetry of each chip over a window, summed up: what `podprof telemetry` prints
// by default (its raw rows are behind --rows). Step times are the device's program run time
// (libtpu's `hlo.execution.timing`), not the wall-clock step: the host's input and the gaps
// between steps are not in them.
#ifndef PODPROF_REPORT_TELEMETRY_SUMMARY_H_
#define PODPROF_REPORT_TELEMETRY_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "proto/podprof_aggregator.pb.h"

namespace podprof::report {

// One chip over the rows read. Figures the runtime did not report in any row are -1.
struct ChipTelemetrySummary {
  std::string host;
  int32_t chip = 0;
  int64_t rows = 0;
  int64_t first_ns = 0, last_ns = 0;  // the oldest and the newest row's time
  int64_t steps = 0;                  // program runs that ended in the rows, summed
  // Step (program run) time, us: the newest row's mean, the median of the rows' means and the
  // longest single run; over the rows with steps.
  double latest_step_us = -1, median_step_us = -1, worst_step_us = -1;
  // Duty cycle, percent: the median of the rows that report it.
  double duty_cycle_percent = -1;
  // The newest reported HBM in use (bytes) and programs queued.
  int64_t hbm_used_bytes = -1, queued = -1;
  // Collectives that ended in the rows, and their mean time weighted by count, us.
  int64_t collectives = 0;
  double collective_mean_us = -1;
  // The host's DCN transfers (multi-slice jobs) in the rows, the newest row's p50 latency and
  // the largest row's p99, us.
  int64_t dcn_transfers = 0;
  double dcn_latest_p50_us = -1, dcn_worst_p99_us = -1;
};

// A summary per (host, chip), ordered by host and chip.
std::vector<ChipTelemetrySummary> SummarizeTelemetry(const v1::GetTelemetryResponse& response);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_TELEMETRY_SUMMARY_H_
