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
// [{kernel, module, category, points: [{capture, start_ns, ..., mxu, mxu_source}]}]: a series
// is a (module, op name) over recompiles, so it carries no kernel_id; `mxu` is `stats`'s
// figure (report/mxu.h), absent where nothing measured it.
nlohmann::json HistoryJson(const v1::KernelHistoryResponse& response);
// [{kernel, module, capture, start_ns, ...}]: the CSV's rows, typed, in the CSV's order.
nlohmann::ordered_json HistoryRowsJson(const v1::KernelHistoryResponse& response);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_HISTORY_H_
