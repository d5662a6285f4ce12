// Kernel statistics rows, written one way by every command that prints them (`inspect`,
// `stats`, `import`, `capture`, `demo`, `kernel`): the same fields, names and units in the
// table, csv and json. A row is a v1::KernelStats: per (host, chip, kernel), or a roll-up where
// the host is empty and the chip -1 (printed `*`), or an HLO category where the op name is empty.
#ifndef PODPROF_REPORT_KERNEL_ROWS_H_
#define PODPROF_REPORT_KERNEL_ROWS_H_

#include <ostream>
#include <string>

#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::report {

using KernelRows = google::protobuf::RepeatedPtrField<v1::KernelStats>;

// What a row stands for: a kernel over all chips, a (host, chip, kernel), a (host, kernel),
// or an HLO category. Picks the table's leading columns; csv and json always have them all.
enum class StatsGrouping { kKernel, kChip, kHost, kCategory };

// "kernel", "chip", "host", "category".
const char* GroupingName(StatsGrouping by);

// The CSV header of kernel rows, in order: where the rows came from (a capture id, or the file
// `inspect` read), then every field the table shows, costs per execution.
extern const char* const kKernelCsvHeader;

// Writes kKernelCsvHeader and one line per row. Fields a row does not have (counters where no
// counter covered it) are empty, not 0.
void WriteKernelRowsCsv(absl::string_view source, const KernelRows& rows, std::ostream& out);

// What a table's VERDICT column shows: the cause the performance counters name ("MXU bound",
// "throttled", ...) where they name one, else the verdict.
std::string VerdictCell(const v1::KernelInsight& in);

// One row as JSON: identity, counts and durations (ps), costs and rates, and `insight` (the
// verdict, and counter figures where counters covered the row). Numbers are JSON numbers.

nlohmann::json KernelRowJson(const v1::KernelStats& row);
nlohmann::json KernelRowsJson(const KernelRows& rows);

// `podprof kernel --format json` and /api/v1/kernels/{name}: the kernel's identity and texts,
// its roll-up and per-chip rows in the capture, its history, same-named kernels of other
// modules, and its scopes.
nlohmann::json KernelJson(const v1::DescribeKernelResponse& response);

// Writes the rows as an aligned table with the columns `by` has (HOST, CHIP, KERNEL and MODULE
// where they mean something), then the statistics, rates, counters and the verdict.
void WriteKernelRowsTable(const KernelRows& rows, StatsGrouping by, std::ostream& out);

}  // namespace podprof::report

#endif  // PODPROF_REPORT_KERNEL_ROWS_H_
