// `podprof inspect`: kernel statistics of one capture file, as a table, CSV or JSON.
#ifndef PODPROF_CLI_INSPECT_H_
#define PODPROF_CLI_INSPECT_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/format.h"
#include "trace/kernel_stats.h"
#include "trace/model.h"

namespace podprof::cli {

enum class GroupBy { kChip, kKernel };

struct InspectOptions {
  std::string path;
  OutputFormat format = OutputFormat::kTable;
  // Rows per chip and kernel, or per kernel across chips. Unset: kChip for csv and json
  // (scripts want the detail), kKernel for the table (people want the summary).
  bool by_set = false;
  GroupBy by = GroupBy::kKernel;
  // Keep only the N rows with the largest total time; 0 = all (the table defaults to 25).
  int top = -1;
};

// Reads `options.path` and writes its kernel statistics to `out`. Errors (unreadable or
// damaged file) name the file and, for damage, the byte offset.
absl::Status RunInspect(const InspectOptions& options, std::ostream& out);

// The CSV header `inspect --format csv` writes, in order.
extern const char* const kInspectCsvHeader;

// Writers, exposed for tests and for other commands that print the same statistics.
void WriteStatsCsv(const trace::HostCapture& capture, const std::vector<trace::KernelStats>& stats,
                   std::ostream& out);
void WriteStatsJson(const trace::HostCapture& capture, const std::vector<trace::KernelStats>& stats,
                    std::ostream& out);
void WriteStatsTable(const trace::HostCapture& capture,
                     const std::vector<trace::KernelStats>& stats, size_t total_rows,
                     std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_INSPECT_H_
