// `podprof captures`: the captures the aggregator stored, newest first.
#ifndef PODPROF_CLI_CAPTURES_COMMAND_H_
#define PODPROF_CLI_CAPTURES_COMMAND_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>

#include "absl/status/status.h"
#include "cli/capture_rows.h"
#include "cli/command.h"

namespace podprof::cli {

struct CapturesOptions {
  // Which captures, by when their window started.
  StartRange range;
  // Captures per call (the page size); 0 uses the aggregator's default (100).
  uint32_t limit = 0;
  // Only captures in this state; UNSPECIFIED for any.
  v1::CaptureStatus status = v1::CAPTURE_STATUS_UNSPECIFIED;
  // Only captures whose labels include all these pairs.
  LabelMap labels;
  // Follow next_page_token until every matching capture has been listed.
  bool all = false;
  OutputFormat format = OutputFormat::kTable;
};

std::unique_ptr<Command> AddCapturesCommand(CLI::App& app, CliContext& context);

// Lists stored captures, newest first, to `out`. Errors: those of AggregatorClient::Check,
// Internal when the aggregator repeats a page token, Unavailable when `out` fails.
absl::Status RunCaptures(AggregatorClient& client, const CapturesOptions& options,
                         std::ostream& out);

// The CSV header `captures --format csv` writes.
extern const char* const kCapturesCsvHeader;

// Writes `response.captures` in `format`. Labels are sorted by key and written `k=v;k=v`.
// The table ends with a hint when `response.next_page_token` says more captures match.
void WriteCaptures(const v1::ListCapturesResponse& response, OutputFormat format,
                   std::ostream& out);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_CAPTURES_COMMAND_H_
