// The store's methods, each its role's.
#include "storage/store.h"

#include <utility>

#include "common/status_macros.h"
#include "storage/health.h"
#include "storage/retention.h"

namespace podprof::storage {

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const StoreOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path, options));
  return std::unique_ptr<Store>(new Store(std::move(db)));
}

Store::Store(std::unique_ptr<Database> db)
    : db_(std::move(db)),
      outbox_(*db_),
      writer_(*db_, outbox_),
      captures_(*db_),
      kernels_(*db_),
      insights_(*db_) {}

Store::~Store() = default;

absl::StatusOr<std::vector<std::vector<int64_t>>> Store::ResolveKernels(
    const std::vector<const std::vector<trace::KernelDef>*>& hosts) {
  return writer_.ResolveKernels(hosts);
}
absl::Status Store::WriteCapture(const CaptureWrite& capture) {
  return writer_.WriteCapture(capture);
}
absl::Status Store::WriteHostData(const std::string& capture_id, HostWrite* host) {
  return writer_.WriteHostData(capture_id, host);
}
absl::Status Store::BeginCapture(const CaptureWrite& header) {
  return writer_.BeginCapture(header);
}
absl::StatusOr<int> Store::MarkInterrupted() { return writer_.MarkInterrupted(); }
absl::StatusOr<RetentionResult> Store::ApplyRetention(const RetentionPolicy& policy,
                                                      int64_t now_ns) {
  return storage::ApplyRetention(*db_, policy, now_ns);
}

absl::StatusOr<int64_t> Store::QueueStoredForFleet(int64_t since_ns) {
  return outbox_.QueueStored(since_ns);
}
absl::StatusOr<std::vector<std::string>> Store::FleetPending(int limit) {
  return outbox_.Pending(limit);
}
absl::Status Store::FleetReplicated(const std::vector<std::string>& capture_ids) {
  return outbox_.Replicated(capture_ids);
}
absl::Status Store::FleetAttemptFailed(const std::vector<std::string>& capture_ids,
                                       const std::string& error) {
  return outbox_.AttemptFailed(capture_ids, error);
}
absl::Status Store::FleetRejected(const std::string& capture_id, const std::string& error) {
  return outbox_.Rejected(capture_id, error);
}
absl::StatusOr<FleetBacklog> Store::FleetBacklogStatus() { return outbox_.Backlog(); }

absl::StatusOr<std::vector<CaptureRow>> Store::ListCaptures(const CaptureQuery& query,
                                                            std::string* next_page_token) {
  return captures_.List(query, next_page_token);
}
absl::StatusOr<CaptureRow> Store::GetCapture(const std::string& capture_id) {
  return captures_.Get(capture_id);
}
absl::StatusOr<std::map<std::string, int64_t>> Store::CaptureCounts() {
  return captures_.CountsByState();
}
absl::StatusOr<std::vector<trace::EventBlock>> Store::Timelines(const std::string& capture_id) {
  return captures_.Timelines(capture_id);
}
absl::Status Store::ForEachHost(const std::string& capture_id,
                                const std::function<absl::Status(StoredHost&)>& fn) {
  return captures_.ForEachHost(capture_id, HostSelection(), fn);
}
absl::Status Store::ForEachHost(const std::string& capture_id, const HostSelection& only,
                                const std::function<absl::Status(StoredHost&)>& fn) {
  return captures_.ForEachHost(capture_id, only, fn);
}
absl::StatusOr<std::vector<ChipVolume>> Store::ChipVolumes(const std::string& capture_id) {
  return captures_.ChipVolumes(capture_id);
}

absl::StatusOr<std::vector<StatRow>> Store::KernelStats(const StatsQuery& query) {
  return kernels_.Stats(query);
}
absl::StatusOr<std::vector<HistorySeries>> Store::KernelHistory(const HistoryQuery& query) {
  return kernels_.History(query);
}
absl::StatusOr<std::vector<KernelPair>> Store::PairKernels(const std::string& baseline,
                                                           const std::string& candidate,
                                                           const std::string& op_regex) {
  return kernels_.Pair(baseline, candidate, op_regex);
}
absl::StatusOr<std::vector<KernelIdentity>> Store::FindKernels(const std::string& op_name,
                                                               const std::string& module) {
  return kernels_.Find(op_name, module);
}
absl::StatusOr<std::string> Store::LatestCaptureWith(int64_t kernel_id) {
  return kernels_.LatestCaptureWith(kernel_id);
}

absl::StatusOr<std::vector<KernelInsightRow>> Store::KernelInsights(const std::string& capture_id,
                                                                    bool per_chip,
                                                                    const ScopeName& sync_scope) {
  return insights_.KernelInsights(capture_id, per_chip, sync_scope);
}
absl::StatusOr<std::vector<KernelScopeRow>> Store::KernelScopes(const std::string& capture_id,
                                                                int64_t kernel_id) {
  return insights_.KernelScopes(capture_id, kernel_id);
}
absl::StatusOr<StragglerReport> Store::Stragglers(const std::string& capture_id) {
  return insights_.Stragglers(capture_id);
}

absl::StatusOr<int64_t> Store::UsedBytes() { return storage::UsedBytes(*db_); }
absl::Status Store::CheckIntegrity() { return storage::CheckIntegrity(*db_); }
absl::Status Store::HealthCheck(int64_t timeout_ns) { return CheckWriter(*db_, timeout_ns); }

}  // namespace podprof::storage
