// Stored rows as the API's messages and the API's enums as the store's, one conversion of each:
// the query layer (queries.h) answers with them, exports and the HTTP routes read them.
#ifndef PODPROF_AGGREGATOR_API_API_ROWS_H_
#define PODPROF_AGGREGATOR_API_API_ROWS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/replicator.h"
#include "proto/podprof_aggregator.pb.h"
#include "storage/store.h"

namespace podprof::aggregator {

// A stored state as the API's, and back (none for CAPTURE_STATUS_UNSPECIFIED); the names are
// storage's (storage/rows.h), the one table of them.
podprof::v1::CaptureStatus StatusEnum(storage::CaptureState s);
podprof::v1::CaptureStatus StatusEnum(storage::HostOutcome o);
std::optional<storage::CaptureState> StateOf(podprof::v1::CaptureStatus s);
// `text` with the regex metacharacters escaped (an exact-name match as a regex).
std::string RegexEscape(const std::string& text);
// The points of `points` from `first` on, each with its regression flag judged against the
// point before it (the one before `first` included).
void FillHistoryPoints(const std::vector<storage::HistoryPoint>& points, size_t first,
                       google::protobuf::RepeatedPtrField<podprof::v1::KernelHistoryPoint>* out);
// A stored row as the API's KernelStats (rates against the row's mean chip peaks).
podprof::v1::KernelStats ToProto(const storage::StatRow& row);
void FillKernelDef(const storage::KernelKey& k, podprof::v1::KernelDef* d);
void FillSummary(const storage::CaptureRow& r, podprof::v1::CaptureSummary* s);
absl::StatusOr<storage::Order> OrderOf(podprof::v1::KernelOrder o);
// The verdict and facts of a stored row, with its capture's counters and waits (`in`, or none).
podprof::v1::KernelInsight InsightOf(const storage::StatRow& r,
                                     const storage::KernelInsightRow* in);
// Insights of the first `n` of `rows` (their capture's, per chip or pod-wide as they are).
absl::StatusOr<std::vector<podprof::v1::KernelInsight>> Judge(
    storage::InsightQueries& insights, const std::string& capture_id, bool per_chip,
    const std::vector<storage::StatRow>& rows, size_t n);
// The fleet replication's state, as ListAgents reports it.
void FillFleetStatus(fleet::Replicator& replicator, podprof::v1::FleetStatus* out);
// A stored telemetry row (a chip over one stored interval) as the API's.
podprof::v1::TelemetryRow ToProto(const storage::TelemetryRecord& r);
// The first `n` of `rows` as the API's KernelStats, each with its insight.
absl::StatusOr<std::vector<podprof::v1::KernelStats>> JudgedStats(
    storage::InsightQueries& insights, const std::string& capture_id, bool per_chip,
    const std::vector<storage::StatRow>& rows, size_t n);

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_API_ROWS_H_
