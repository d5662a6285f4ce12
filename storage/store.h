// The kernel-statistics store: one SQLite file (WAL) holding every capture's hosts, chips,
// kernel statistics with their sketches, roll-ups, counters and compressed timelines.
//
// Writes go through one writer thread, one transaction per capture, so a capture becomes
// visible atomically; reads use their own connections and never block the writer. Thread-safe.
//
// The store is its roles put together over one Database (database.h: the file, the writer
// thread, the reader pool): the capture writer (capture_writer.h), the capture, kernel and
// insight queries (capture_queries.h, kernel_queries.h, insight_queries.h), the fleet outbox
// (fleet_outbox.h), retention (retention.h) and health (health.h). Its methods are theirs.
#ifndef PODPROF_STORAGE_STORE_H_
#define PODPROF_STORAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/capture_queries.h"
#include "storage/capture_writer.h"
#include "storage/database.h"
#include "storage/fleet_outbox.h"
#include "storage/insight_queries.h"
#include "storage/kernel_queries.h"
#include "storage/rows.h"
#include "trace/model.h"

namespace podprof::storage {

class Store {
 public:
  // Opens or creates the database, migrating it to this build's schema.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     const StoreOptions& options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // The stored ids of kernel definitions (kernels.id), one list per host: inserted where new
  // (with their texts, filled in where an earlier capture left them empty), in one short
  // transaction on the writer thread. Kernel rows are identities shared by captures, so
  // resolving them before the capture itself is stored leaves nothing wrong behind.
  absl::StatusOr<std::vector<std::vector<int64_t>>> ResolveKernels(
      const std::vector<const std::vector<trace::KernelDef>*>& hosts);
  // Inserts a whole capture, analysed and encoded beforehand, in one transaction on the writer
  // thread; blocks until committed. AlreadyExists for a duplicate id; ResourceExhausted when
  // the disk is full (nothing of the capture is stored, reads go on).
  absl::Status WriteCapture(const CaptureWrite& capture);
  // Inserts a host's chips, timelines, counters and attributions under a capture still `running`
  // (see BeginCapture), ahead of the capture's own write, so that a pod's hosts need not wait in
  // memory for its slowest one; moves them out of `host` and records the chips' rows in it for
  // WriteCapture. Queries see none of it until WriteCapture commits the host's outcome (reads
  // of a capture's hosts go through capture_hosts). FailedPrecondition when no such capture
  // is running.
  absl::Status WriteHostData(const std::string& capture_id, HostWrite* host);
  // Records a capture as `running` before its window (its id, times, labels and options),
  // so that a crash of the aggregator leaves a trace of it; WriteCapture replaces the record.
  absl::Status BeginCapture(const CaptureWrite& header);
  // Marks every capture still `running` as `interrupted`: called once at start-up, when no
  // capture of this process can be running yet. Returns how many were marked.
  absl::StatusOr<int> MarkInterrupted();
  // Deletes by age and size (oldest first, in bounded batches), timelines earlier.
  absl::StatusOr<RetentionResult> ApplyRetention(const RetentionPolicy& policy, int64_t now_ns);

  // From now on every capture WriteCapture commits is also queued, in the same transaction,
  // for replication to the fleet store, while fewer than `backlog_limit` wait; past it the
  // capture is stored but not queued (counted in FleetBacklog::not_queued). 0 stops queueing.
  void QueueForFleet(int64_t backlog_limit) { outbox_.QueueForFleet(backlog_limit); }
  // Queues the captures already stored (complete, partial or failed ones that started at or
  // after `since_ns`), oldest first, as far as the backlog has room: a fleet store turned on
  // for a pod with history. Captures ClickHouse already holds are skipped when replicated.
  // Returns how many were queued.
  absl::StatusOr<int64_t> QueueStoredForFleet(int64_t since_ns);
  // The ids of up to `limit` pending captures of the outbox, oldest first.
  absl::StatusOr<std::vector<std::string>> FleetPending(int limit);
  // The captures are in the fleet store now: their entries go.
  absl::Status FleetReplicated(const std::vector<std::string>& capture_ids);
  // A failed attempt that will be retried: counts it and keeps why.
  absl::Status FleetAttemptFailed(const std::vector<std::string>& capture_ids,
                                  const std::string& error);
  // The fleet store refused the capture's rows: it stays in the outbox, out of the queue,
  // with why, for an operator to see (podprof fleet status).
  absl::Status FleetRejected(const std::string& capture_id, const std::string& error);
  absl::StatusOr<FleetBacklog> FleetBacklogStatus();

  // Newest first; sets *next_page_token when more match.
  absl::StatusOr<std::vector<CaptureRow>> ListCaptures(const CaptureQuery& query,
                                                       std::string* next_page_token);
  // NotFound for an unknown capture; InvalidArgument for a bad regex.
  absl::StatusOr<std::vector<StatRow>> KernelStats(const StatsQuery& query);
  absl::StatusOr<std::vector<HistorySeries>> KernelHistory(const HistoryQuery& query);
  // Counter attributions and collective waits of a capture's kernels, per chip (`per_chip`)
  // or merged over the pod, keyed by (host, chip, kernel id) as in StatRow, with the time in
  // the scopes `sync_scope` names as sync_wait_ps (which scopes those are is the caller's to
  // say). NotFound naming the id for an unknown capture.
  absl::StatusOr<std::vector<KernelInsightRow>> KernelInsights(const std::string& capture_id,
                                                               bool per_chip,
                                                               const ScopeName& sync_scope);
  // The time kernel `kernel_id` spent in each named scope inside it (Pallas primitives, source
  // lines, ...), summed over the pod, longest first.
  absl::StatusOr<std::vector<KernelScopeRow>> KernelScopes(const std::string& capture_id,
                                                           int64_t kernel_id);
  // Who made the others wait at the capture's collectives. NotFound for an unknown capture.
  absl::StatusOr<StragglerReport> Stragglers(const std::string& capture_id);
  // Kernels whose op name is `op_name` (exactly), most recently stored first; with `module`
  // non-empty, only that module's.
  absl::StatusOr<std::vector<KernelIdentity>> FindKernels(const std::string& op_name,
                                                          const std::string& module);
  // The newest capture holding kernel `kernel_id`; NotFound when none does.
  absl::StatusOr<std::string> LatestCaptureWith(int64_t kernel_id);
  // Per kernel (module, op) in either capture, its statistics on each side (two kernel rows of
  // one (module, op) merged), in (module, op) order. What the pairs mean is insight's
  // (insight/change.h); NotFound naming the id for an unknown capture.
  absl::StatusOr<std::vector<KernelPair>> PairKernels(const std::string& baseline,
                                                      const std::string& candidate,
                                                      const std::string& op_regex);
  // Calls `fn` for every host of the capture in name order, one host in memory at a time;
  // stops at the first error `fn` returns. NotFound naming the id for an unknown capture.
  absl::Status ForEachHost(const std::string& capture_id,
                           const std::function<absl::Status(StoredHost&)>& fn);
  // The same for the hosts and chips `only` selects: hosts left out are not read at all; chips
  // left out stay in their host's chips (indices and ordinals as stored) but none of their
  // timelines or counters is read.
  absl::Status ForEachHost(const std::string& capture_id, const HostSelection& only,
                           const std::function<absl::Status(StoredHost&)>& fn);
  // Every chip of the capture, by host name then ordinal, with how many timeline events and
  // counter samples it holds, counted from the front of each stored blob (nothing else is
  // decompressed). NotFound naming the id for an unknown capture.
  absl::StatusOr<std::vector<ChipVolume>> ChipVolumes(const std::string& capture_id);
  // The capture's row (hosts included); NotFound naming the id.
  absl::StatusOr<CaptureRow> GetCapture(const std::string& capture_id);
  // The stored timeline blocks of a capture, decompressed (for exports and tests).
  absl::StatusOr<std::vector<trace::EventBlock>> Timelines(const std::string& capture_id);

  // Stored captures by state (captures.status), for the daemon's metrics.
  absl::StatusOr<std::map<std::string, int64_t>> CaptureCounts();
  // What WriteCapture has committed since the store was opened: captures, and the events and
  // bytes their hosts sent (counters for /metrics).
  using Written = CaptureWriter::Written;
  Written written() const { return writer_.written(); }

  // Bytes of the database in use (pages not on the free list).
  absl::StatusOr<int64_t> UsedBytes();
  // PRAGMA integrity_check == "ok".
  absl::Status CheckIntegrity();
  // For a service watchdog: the writer thread takes the database's write lock and lets it go
  // within `timeout_ns`. Fails when the writer is stuck (a long write, a wedged disk) or
  // another process holds the lock, naming which.
  absl::Status HealthCheck(int64_t timeout_ns);
  const std::string& path() const { return db_->path(); }
  // Why the database is open for queries only; empty when it is writable.
  const std::string& read_only_reason() const { return db_->read_only_reason(); }
  bool read_only() const { return db_->read_only(); }

 private:
  explicit Store(std::unique_ptr<Database> db);

  // Declared first, so destroyed last: the roles below hold references to it.
  const std::unique_ptr<Database> db_;
  FleetOutbox outbox_;
  CaptureWriter writer_;
  CaptureQueries captures_;
  KernelQueries kernels_;
  InsightQueries insights_;
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_STORE_H_
