// A stored capture exported (Perfetto, Chrome JSON, XProf sessions or a CSV of its events) as a
// stream of chunks, for the ExportCapture RPC and the HTTP API's downloads: planned first (the
// capture, its narrowing and the Chrome JSON size check, so that every refusal comes before a
// byte is sent), then written host by host with bounded memory.
#ifndef PODPROF_AGGREGATOR_API_EXPORT_STREAM_H_
#define PODPROF_AGGREGATOR_API_EXPORT_STREAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregator/api/store_reads.h"
#include "export/narrow.h"
#include "proto/podprof_aggregator.pb.h"

namespace podprof::aggregator {

// Where the chunks go: `send` false when the reader has gone; `cancelled` is asked between
// hosts.
struct ExportSink {
  std::function<bool(const podprof::v1::ExportChunk&)> send;
  std::function<bool()> cancelled = [] { return false; };
  // Told each file's whole size before its first chunk, where the writer knows it (each host's
  // .xplane.pb of an XProf session), so a reader that needs sizes up front (a tar) can stream
  // the file instead of holding it; false stops the export.
  std::function<bool(const std::string& path, uint64_t bytes)> file_size;
};

struct ExportPlan {
  podprof::v1::ExportCaptureRequest request;
  storage::CaptureRow row;
  std::unique_ptr<exporter::Narrower> narrower;
  std::vector<storage::StatRow> stats;  // per chip, for the slices' verdicts
  uint64_t estimate = 0;                // the Chrome JSON's size, bytes
  uint64_t json_limit = 0;
};

// InvalidArgument for a format or narrowing that selects nothing (naming the flag), NotFound
// for an unknown capture, FailedPrecondition for a Chrome JSON over its size limit.
absl::StatusOr<ExportPlan> PlanExport(const StoreReads& store,
                                      const podprof::v1::ExportCaptureRequest& request);
// Writes the planned export to `sink`; files of an XProf session arrive one after another
// (each chunk names its file and offset).
absl::Status WriteExport(const StoreReads& store, ExportPlan& plan, const ExportSink& sink);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_EXPORT_STREAM_H_
