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
#include "report/table.h"

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

// A share (0..1) as the tables show it, to a tenth of a percent, 0 too ("0.0%"): a figure
// that was measured. Percent() writes "-" for 0, for figures where 0 means "unknown".
std::string ShareCell(double share);

// What a table's THROTTLE column shows: the share of clock cycles the power manager skipped
// ("0.0%" when it counted none), or "-" where it did not count (nothing else measures it).
std::string ThrottledCell(const v1::KernelInsight& in);

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

// `podprof kernel --format csv` and /api/v1/kernels/{name}?format=csv: the kernel's XProf
// Utilization Viewer rows (docs/INSIGHT.md, "Kernel profiling"), one line per row, for the
// roll-up (host and chip `*`) and each chip, pooled over the dies (die `*`) and per die.
// `share` is achieved / peak; a profile or die without figures is one line with its reason
// in `missing` and the row's fields empty. Only the header where nothing was profiled.
extern const char* const kKernelProfileCsvHeader;
void WriteKernelProfileCsv(const v1::DescribeKernelResponse& response, std::ostream& out);

// Writes the rows as an aligned table, fitted to `fit` (report/table.h): the columns `by` has
// (HOST, CHIP, KERNEL and its VERDICT, MODULE where they mean something), then the statistics,
// rates and counters; under it the MXU column's source (report/mxu.h) when it is shown. The
// default fit drops the columns without values and sets no width.
void WriteKernelRowsTable(const KernelRows& rows, StatsGrouping by, std::ostream& out,
                          const TableFit& fit = {});

}  // namespace podprof::report

#endif  // PODPROF_REPORT_KERNEL_ROWS_H_
