// Replication of an aggregator's captures to the ClickHouse fleet store (docs/FLEET.md).
//
// Asynchronous, from the durable outbox the store fills in each capture's own transaction
// (storage/fleet_outbox.cc): a capture is never delayed or failed by ClickHouse, the backlog
// survives restarts and kill -9, and drains oldest first when ClickHouse answers again.
// Nothing is doubled: each table's rows of a capture go in one INSERT, which ClickHouse writes
// as one part (all or nothing), and before inserting the replicator asks which of the batch's
// captures the table already holds (an earlier attempt whose answer was lost) and sends only
// the others. One aggregator writes each pod's rows, so that check has no race.
#ifndef PODPROF_FLEET_REPLICATOR_H_
#define PODPROF_FLEET_REPLICATOR_H_

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/periodic.h"
#include "fleet/capture_rows.h"
#include "fleet/clickhouse.h"
#include "storage/store.h"

namespace podprof::fleet {

struct ReplicatorOptions {
  // Stored on every row: which aggregator's pod the capture is of.
  std::string pod;
  std::string database = "podprof";
  // A cluster of ClickHouse's remote_servers: the `_all` tables are then Distributed over it.
  std::string cluster;
  // Captures per INSERT, and how often the backlog is looked at.
  int batch_captures = 20;
  int64_t flush_interval_ns = 2'000'000'000;
  // The outbox's bound in captures (oldest kept; a warning from 90% full).
  int64_t backlog_limit = 10000;
  // Retries after a failure wait from the flush interval up to this, doubling.
  int64_t max_backoff_ns = 60'000'000'000;
  // How the settings are named in messages ("[fleet] clickhouse_url" or a flag).
  std::string url_setting = "[fleet] clickhouse_url";
};

struct ReplicatorStatus {
  storage::FleetBacklog backlog;
  int64_t replicated = 0;       // captures, since the replicator started
  int64_t last_success_ns = 0;  // wall clock; 0 before the first
  std::string last_error;       // of the last attempt; empty after a success
};

class Replicator {
 public:
  Replicator(storage::Store& store, ClickHouse clickhouse, ReplicatorOptions options, Clock& clock);
  ~Replicator();  // Stop()

  // Checks the server, the credentials and the database, creates the tables where they are
  // missing and adds the columns missing from tables an older podprof created (PrepareTable).
  // Errors name the setting that is wrong.
  absl::Status Prepare();
  // Sends the oldest pending captures (up to batch_captures) and returns how many left the
  // backlog (replicated, rejected or deleted here meanwhile); 0 when none was pending. A
  // capture whose rows ClickHouse refuses is marked rejected, naming the table and why,
  // without holding up the others. Unavailable and the like when ClickHouse could not take
  // the batch: it stays pending.
  absl::StatusOr<int> ReplicateBatch();

  // Runs Prepare, then ReplicateBatch every flush interval (at once while more is pending),
  // on a thread of its own, backing off while ClickHouse fails.
  void Start();
  void Stop();
  ReplicatorStatus Status();
  const ClickHouse& clickhouse() const { return clickhouse_; }
  const ReplicatorOptions& options() const { return options_; }

 private:
  // Captures read from the store for one batch: those still there, those deleted meanwhile.
  struct Batch {
    std::vector<std::string> ids;
    std::vector<FleetCapture> captures;
    std::vector<std::string> gone;
    absl::Status status;
  };
  // The column names of a table and of its `_all`.
  struct Columns {
    absl::flat_hash_set<std::string> local, all;
  };
  absl::StatusOr<Columns> ColumnsOf(Table t);
  // Creates table `t` and its `_all` where they are missing, and brings tables an older
  // podprof created up to t's definition: the columns it lacks added (its rows read as their
  // fill), and the `_all` made again to show them.
  absl::Status PrepareTable(Table t);
  Batch ReadBatch(std::vector<std::string> ids);
  std::optional<int64_t> Tick();  // on thread_
  // Inserts table `t`'s rows of the captures it does not hold yet. On a refusal of the data,
  // retries capture by capture and moves those refused to *rejected (with why).
  absl::Status InsertTable(Table t, std::vector<const FleetCapture*>& captures,
                           std::vector<std::pair<std::string, std::string>>* rejected);
  // The ids among `captures` that table `t` holds rows of.
  absl::StatusOr<std::vector<std::string>> Present(
      Table t, const std::vector<const FleetCapture*>& captures);
  void NoteFailure(const absl::Status& s);
  void WarnOfBacklog();

  storage::Store& store_;
  const ClickHouse clickhouse_;
  const ReplicatorOptions options_;
  Clock& clock_;
  std::unique_ptr<PeriodicThread> thread_;
  // Tick's own, on thread_ only.
  bool prepared_ = false;
  int64_t wait_ns_ = 0;
  // The next batch, read while ClickHouse takes the current one (reading the store and
  // inserting are the two halves of the work, on different processes' cores).
  std::future<Batch> next_;

  absl::Mutex mu_;
  int64_t replicated_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_success_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
  bool warned_full_ = false;  // only on the replicator's thread
  int64_t warned_not_queued_ = 0;
};

}  // namespace podprof::fleet

#endif  // PODPROF_FLEET_REPLICATOR_H_
