// A kernel's history (KernelHistoryResponse) as `podprof history` and the HTTP API write it:
// CSV with one row per point, the CLI's JSON (points nested in their kernel's series), and the
// same points as flat rows under the CSV's column names (the HTTP API's JSON, the kernel page's).
#ifndef PODPROF_REPORT_HISTORY_H_
#define PODPROF_REPORT_HISTORY_H_

#include <ostream>

#include "nlohmann/json.hpp"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::report {

// The CSV's header line, without its newline.
extern const char* const kHistoryCsvHeader;

void WriteHistoryCsv(const v1::KernelHistoryResponse& response, std::ostream& out);
// [{kernel, module, category, kernel_id, points: [{capture, start_ns, ...}]}]
nlohmann::json HistoryJson(const v1::KernelHistoryResponse& response);
// [{kernel, module, capture, start_ns, ...}]: the CSV's rows, typed, in the CSV's order.
nlohmann::ordered_json HistoryRowsJson(const v1::KernelHistoryResponse& response);
// The MXU's busy share in a point's capture, from its sampled performance counters; null
// without them.
const double* MxuOf(const v1::KernelHistoryPoint& point);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_HISTORY_H_
