// `podprof captures`, `stats`, `history`, `diff` and `import`: subcommands that query a
// podprof-aggregator over gRPC (podprof.v1.Aggregator, proto/podprof_aggregator.proto).
//
// Each Run* function builds one request from its options, makes the call through an
// AggregatorClient (which puts a deadline on it and turns a failure into a one-line Status)
// and hands the answer to a writer. The writers and the parsing of flag values are pure and
// exposed for tests. Everything here runs on the calling thread.
#ifndef PODPROF_CLI_AGGREGATOR_COMMANDS_H_
#define PODPROF_CLI_AGGREGATOR_COMMANDS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/format.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/podprof_aggregator.grpc.pb.h"

namespace podprof::cli {

// Marks a Status from AggregatorClient::Check that means the aggregator could not be reached
// or did not answer in time (as opposed to an error it answered with).
inline constexpr char kUnreachablePayload[] = "podprof/unreachable";

// Where the aggregator listens and how long each call may take.
struct AggregatorTarget {
  // `host:port` of the aggregator's gRPC service.
  std::string address = "localhost:7100";
  // Deadline of each call, ns from its start; for `import` it covers the whole upload.
  int64_t timeout_ns = int64_t{30} * 1'000'000'000;
  // Mutual TLS towards the aggregator (security::ChannelCredentials); null = plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
};

// A client of podprof.v1.Aggregator with the CLI's conventions: the target's credentials, a
// deadline on every call, and failures reported as one-line Statuses that say whether the
// aggregator could not be reached or answered with an error. Used from one thread.
class AggregatorClient {
 public:
  // Creates a channel to `target.address`; it connects on the first call, so construction
  // cannot fail. `clock` supplies the deadlines and "now" for relative times; it must
  // outlive the client.
  AggregatorClient(const AggregatorTarget& target, Clock& clock);

  AggregatorClient(const AggregatorClient&) = delete;
  AggregatorClient& operator=(const AggregatorClient&) = delete;

  v1::Aggregator::StubInterface& stub() { return *stub_; }
  Clock& clock() { return clock_; }

  // Sets the deadline of a call that starts now.
  void SetDeadline(grpc::ClientContext& context);

  // Returns OK for OK. Otherwise a Status with the same code and a one-line message: for a
  // connection that failed (UNAVAILABLE, or DEADLINE_EXCEEDED before any connection)
  // "aggregator at ADDR unreachable: <detail>"; for a call that outlived its deadline
  // "aggregator at ADDR did not answer within <timeout>"; else the aggregator's own message.
  absl::Status Check(const grpc::Status& status);

  // Makes the unary call `method` with the deadline and returns Check of its outcome.
  template <typename Request, typename Response>
  absl::Status Call(grpc::Status (v1::Aggregator::StubInterface::*method)(grpc::ClientContext*,
                                                                          const Request&,
                                                                          Response*),
                    const Request& request, Response* response) {
    grpc::ClientContext context;
    SetDeadline(context);
    return Check((stub_.get()->*method)(&context, request, response));
  }

 private:
  const std::string address_;
  const int64_t timeout_ns_;
  Clock& clock_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Aggregator::StubInterface> stub_;
};

// Parses `key=value` pairs (repeated `--label` flags) into a map. Errors (InvalidArgument,
// naming the pair): no '=', an empty key, a key given twice.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(
    const std::vector<std::string>& pairs);

// The lower-case name of a capture status without its prefix ("complete",
// "cancelled"); "unspecified" for CAPTURE_STATUS_UNSPECIFIED and unknown values.
std::string CaptureStatusName(v1::CaptureStatus status);

// The capture status a name from CaptureStatusName stands for (case-insensitive). Errors
// (InvalidArgument) list the accepted names.
absl::StatusOr<v1::CaptureStatus> ParseCaptureStatus(absl::string_view name);

// ---- podprof captures ---------------------------------------------------------------------

struct CapturesOptions {
  // Only captures whose window starts at or after now minus this; unset: no such bound.
  std::optional<int64_t> since_ago_ns;
  // Only captures whose window starts at or after this instant (ns since the Unix epoch);
  // 0: no bound. Ignored when since_ago_ns is set.
  int64_t since_ns = 0;
  // Only captures whose window starts before this instant; 0: no bound.
  int64_t until_ns = 0;
  // Captures per call (the page size); 0 uses the aggregator's default (100).
  uint32_t limit = 0;
  // Only captures in this state; UNSPECIFIED for any.
  v1::CaptureStatus status = v1::CAPTURE_STATUS_UNSPECIFIED;
  // Only captures whose labels include all these pairs.
  std::map<std::string, std::string> labels;
  // Follow next_page_token until every matching capture has been listed.
  bool all = false;
  OutputFormat format = OutputFormat::kTable;
};

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

// ---- podprof stats ------------------------------------------------------------------------

// How `stats` groups rows: per kernel over all chips, per (host, chip, kernel), per (host,
// kernel), or per HLO category.
enum class StatsGrouping { kKernel, kChip, kHost, kCategory };

struct StatsOptions {
  std::string capture_id;
  // Unset: kKernel for the table (people want the summary), kChip for csv and json (scripts
  // want the detail), as in `podprof inspect`.
  std::optional<StatsGrouping> by;
  // Regular expression (ECMAScript, partial match) on the op name; empty matches all.
  std::string kernel_regex;
  // Exact HLO category; empty matches all.
  std::string category;
  // Only chips of this host; empty for all hosts.
  std::string host;
  // Only this chip ordinal.
  std::optional<int32_t> chip;
  v1::KernelOrder order = v1::KERNEL_ORDER_TOTAL_TIME;
  // Keep the first N rows; 0 = all; negative: 25 for the table, all for csv and json.
  int top = -1;
  OutputFormat format = OutputFormat::kTable;
};

// Writes the kernel statistics of one capture to `out`. Errors: those of
// AggregatorClient::Check (NOT_FOUND for an unknown capture, INVALID_ARGUMENT for a bad
// regular expression), Unavailable when `out` fails.
absl::Status RunStats(AggregatorClient& client, const StatsOptions& options, std::ostream& out);

// The CSV header `stats --format csv` writes: kInspectCsvHeader with `capture` first.
extern const char* const kStatsCsvHeader;

// Writes the rows of `response` in `format`. Roll-ups print host and chip as `*`; flops and
// bytes_accessed are per execution (as in `inspect`), mean_ps is rounded. `by` picks the
// table's columns. The table ends with a hint when matched_count exceeds the rows shown.
void WriteKernelStats(const v1::GetKernelStatsResponse& response, StatsGrouping by,
                      OutputFormat format, std::ostream& out);

// ---- podprof history ----------------------------------------------------------------------

struct HistoryOptions {
  // Regular expression (ECMAScript, partial match) on the op name.
  std::string kernel_regex;
  // Substring of the module name; empty matches all.
  std::string module;
  // Only captures whose window starts at or after now minus this; unset: no such bound.
  std::optional<int64_t> since_ago_ns;
  // Only captures whose window starts at or after this instant; 0: no bound. Ignored when
  // since_ago_ns is set.
  int64_t since_ns = 0;
  // Only captures whose window starts before this instant; 0: no bound.
  int64_t until_ns = 0;
  // Most kernels (those with the largest total time); 0 uses the aggregator's default (20).
  uint32_t max_kernels = 0;
  OutputFormat format = OutputFormat::kTable;
};

// Writes how matching kernels behaved over many captures to `out`. Errors: those of
// AggregatorClient::Check, Unavailable when `out` fails.
absl::Status RunHistory(AggregatorClient& client, const HistoryOptions& options, std::ostream& out);

// The CSV header `history --format csv` writes.
extern const char* const kHistoryCsvHeader;

// Writes `response` in `format`: the table has one block per kernel, csv one row per point.
void WriteKernelHistory(const v1::KernelHistoryResponse& response, OutputFormat format,
                        std::ostream& out);

// ---- podprof diff -------------------------------------------------------------------------

struct DiffOptions {
  std::string baseline_capture_id;
  std::string candidate_capture_id;
  // Regular expression (ECMAScript, partial match) on the op name; empty matches all.
  std::string kernel_regex;
  // Relative p50 slowdown that counts as a regression (0.05 = 5%).
  double threshold = 0.05;
  // Keep the N kernels whose total time changed most; 0 = all; negative: 25 for the table,
  // all for csv and json.
  int top = -1;
  OutputFormat format = OutputFormat::kTable;
};

// Compares two captures and writes the per-kernel changes to `out`. Returns the number of
// regressions the aggregator found (over all kernels, not only those shown). Errors: those
// of AggregatorClient::Check, Unavailable when `out` fails.
absl::StatusOr<uint32_t> RunDiff(AggregatorClient& client, const DiffOptions& options,
                                 std::ostream& out);

// The CSV header `diff --format csv` writes.
extern const char* const kDiffCsvHeader;

// Writes the comparison `response` to `request` in `format`. CSV leaves the fields of an
// absent side empty; the table marks them "-" and ends with "N regressions".
void WriteCaptureDiff(const v1::CompareCapturesRequest& request,
                      const v1::CompareCapturesResponse& response, OutputFormat format,
                      std::ostream& out);

// ---- podprof import -----------------------------------------------------------------------

// One file to upload and the host it belongs to.
struct ImportFile {
  std::string host_name;
  std::string path;
};

// Bytes of file data per ImportXSpaceChunk: well under gRPC's 4 MiB message limit.
constexpr size_t kImportChunkBytes = size_t{1} << 20;

// Expands the paths given to `import`, in order: a `.xplane.pb` file stands for itself; a
// directory (an XProf session directory) for every `*.xplane.pb` directly inside it, sorted
// by name. Hosts are named by trace::HostNameFromPath. Errors name the path: NotFound when it
// does not exist, InvalidArgument when it is neither a `.xplane.pb` file nor a directory
// holding one, the OS error when a directory cannot be listed.
absl::StatusOr<std::vector<ImportFile>> ExpandImportPaths(const std::vector<std::string>& paths);

// Fails (InvalidArgument, naming the host and both paths) when two files share a host name:
// the upload protocol starts a new file only when the host name changes.
absl::Status CheckDistinctHosts(const std::vector<ImportFile>& files);

// Reads `files` in order and passes them to `send` as chunks of at most `chunk_bytes` (> 0)
// bytes: each file's chunks carry its host name, an empty file is one chunk without data, and
// only the first chunk carries `labels`. Stops when `send` returns false (the stream broke)
// and returns Cancelled; returns the error (naming the file) when a file cannot be read.
absl::Status ForEachImportChunk(const std::vector<ImportFile>& files,
                                const std::map<std::string, std::string>& labels,
                                size_t chunk_bytes,
                                const std::function<bool(const v1::ImportXSpaceChunk&)>& send);

struct ImportOptions {
  // From ExpandImportPaths, checked by CheckDistinctHosts.
  std::vector<ImportFile> files;
  // Stored with the new capture.
  std::map<std::string, std::string> labels;
  OutputFormat format = OutputFormat::kTable;
};

// Uploads `options.files` as one new capture and writes the result to `out`, and the files
// the aggregator could not import as `warning: ...` lines to `err`. Errors: a file that cannot
// be read (the upload is cancelled), those of AggregatorClient::Check (INVALID_ARGUMENT when
// no file could be parsed), Unavailable when `out` fails.
absl::Status RunImport(AggregatorClient& client, const ImportOptions& options, std::ostream& out,
                       std::ostream& err);

// Writes the new capture of `response` in `format` (its summary and top kernels; csv writes
// the top kernels as `stats` does) and its file_errors as `warning: ...` lines to `err`.
void WriteImportResult(const v1::ImportXSpaceResponse& response, OutputFormat format,
                       std::ostream& out, std::ostream& err);

}  // namespace podprof::cli

#endif  // PODPROF_CLI_AGGREGATOR_COMMANDS_H_
