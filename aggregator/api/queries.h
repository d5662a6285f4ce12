// The aggregator's one query layer: every read its APIs answer (gRPC's query RPCs, the HTTP
// API, the pages' routes), as the API's typed messages, judged by insight's rules. A request's
// defaults and limits are applied here, once, so that the CLI and a browser asking the same
// question get the same answer; the gRPC and HTTP handlers only check the caller, convert the
// request and render the answer (report/).
//
// Errors: InvalidArgument naming the field for a bad request (an empty id, a pattern that is
// not a safe regex, an unknown ordering), NotFound naming the capture or kernel, the store's
// own otherwise. Thread-safe (the store and registry are); `store` and `registry` must outlive
// the layer.
#ifndef PODPROF_AGGREGATOR_API_QUERIES_H_
#define PODPROF_AGGREGATOR_API_QUERIES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/api/store_reads.h"
#include "aggregator/capture/registry.h"
#include "fleet/replicator.h"
#include "proto/podprof_aggregator.pb.h"
#include "storage/store.h"

namespace podprof::aggregator {

// Captures in one answer of ListCaptures when the request names no limit, and at most.
inline constexpr int kDefaultCaptureLimit = 100;
inline constexpr int kMaxCaptureLimit = 1000;
// Telemetry rows in one answer of Telemetry when the request names no limit, and at most: the
// newest, so a day of a 64-chip pod at 10 s intervals (553k rows) is asked for in pieces.
inline constexpr int kDefaultTelemetryLimit = 10'000;
inline constexpr int kMaxTelemetryLimit = 100'000;
// Transfers in GetDcnResponse.worst when the request names no top, and at most.
inline constexpr int kDefaultDcnTop = 20;
inline constexpr int kMaxDcnTop = 1000;

// SQL statements at once, and each one's limits (docs/SQL.md).
inline constexpr int kMaxSqlStatements = 2;
inline constexpr int64_t kSqlTimeLimitNs = 10'000'000'000;
inline constexpr int64_t kSqlMemoryBytes = 256 << 20;
inline constexpr uint32_t kDefaultSqlRows = 1'000;
inline constexpr uint32_t kMaxSqlRows = 10'000;

// Where an answer about `capture` comes from: its id, hosts and window on the pod's clock, the
// largest clock uncertainty among its hosts, and this podprof's version (SQL's answers, MCP's).
v1::Provenance ProvenanceOf(const storage::CaptureRow& capture);

class Queries {
 public:
  // Reads through the store's read roles only (store_reads.h).
  Queries(StoreReads reads, Registry& registry) : reads_(reads), registry_(registry) {}
  Queries(storage::Store& store, Registry& registry) : Queries(StoreReads(store), registry) {}
  Queries(const Queries&) = delete;
  Queries& operator=(const Queries&) = delete;

  // Where Agents reports replication to the fleet store; none when never set. Set before
  // serving; `replicator` must outlive the layer.
  void SetFleet(fleet::Replicator* replicator) { fleet_ = replicator; }

  // Newest first, up to the request's limit (kDefaultCaptureLimit when 0, at most
  // kMaxCaptureLimit), with the token of the next page when more match.
  absl::StatusOr<v1::ListCapturesResponse> ListCaptures(const v1::ListCapturesRequest& request);
  // One capture with its hosts and their clock corrections.
  absl::StatusOr<v1::CaptureSummary> Capture(const std::string& capture_id);
  // The stored row itself, for what reads the capture's timelines (views, exports).
  absl::StatusOr<storage::CaptureRow> StoredCapture(const std::string& capture_id);
  // Kernel statistics grouped as asked; per kernel and per chip with their verdicts.
  absl::StatusOr<v1::GetKernelStatsResponse> KernelStats(const v1::GetKernelStatsRequest& request);
  // One kernel pod-wide and per chip, with its scopes and history.
  absl::StatusOr<v1::DescribeKernelResponse> DescribeKernel(
      const v1::DescribeKernelRequest& request);
  // Who made the others wait at the capture's collectives, and whether that is significant.
  absl::StatusOr<v1::GetStragglersResponse> Stragglers(const v1::GetStragglersRequest& request);
  // The capture's cross-slice (DCN) transfers (insight/dcn.h): XProf's per-host figures, each
  // receive paired with its send, the producing slices and links judged, the request's `top`
  // longest waits (kDefaultDcnTop when 0, at most kMaxDcnTop). Reads the `XLA Ops` lines one
  // host at a time and keeps only each host's DCN ops. A capture without any answers an empty
  // report whose verdict says so (dcn_query.cc). With `cells`, also the slices x instances
  // matrix (insight/dcn_cells.h; empty without DCN ops).
  absl::StatusOr<v1::GetDcnResponse> Dcn(const v1::GetDcnRequest& request);
  // Kernels' statistics over captures, each point flagged against the one before it.
  absl::StatusOr<v1::KernelHistoryResponse> KernelHistory(const v1::KernelHistoryRequest& request);
  // Two captures' kernels paired and judged (insight/change.h), regressions first.
  absl::StatusOr<v1::CompareCapturesResponse> Compare(const v1::CompareCapturesRequest& request);
  // The registered agents matching the selector, and the fleet replication's state.
  v1::ListAgentsResponse Agents(const v1::ListAgentsRequest& request);
  // The stored telemetry of the request's hosts (all when none) whose intervals ended in
  // [since_ns, until_ns) (until_ns 0: no end), oldest first: the newest rows up to the
  // request's limit (kDefaultTelemetryLimit when 0 or less, at most kMaxTelemetryLimit),
  // `truncated` when that left older ones out.
  absl::StatusOr<v1::GetTelemetryResponse> Telemetry(const v1::GetTelemetryRequest& request);
  // One read-only SQL statement over a capture's tables (sql/capture_tables.h; sql_query.cc),
  // at most kMaxSqlStatements at once (ResourceExhausted past them, so that a heavy statement
  // leaves the other readers and the writer their cores), each within kSqlTimeLimitNs,
  // kSqlMemoryBytes and its request's row cap (kDefaultSqlRows when 0, at most kMaxSqlRows).
  absl::StatusOr<v1::SqlResponse> Sql(const v1::SqlRequest& request);
  // Statements running now.
  int sql_running() const {
    absl::MutexLock lock(&sql_mu_);
    return sql_running_;
  }

 private:
  const StoreReads reads_;
  Registry& registry_;
  mutable absl::Mutex sql_mu_;
  int sql_running_ ABSL_GUARDED_BY(sql_mu_) = 0;
  fleet::Replicator* fleet_ = nullptr;
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_QUERIES_H_
