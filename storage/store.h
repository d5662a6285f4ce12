// The kernel-statistics store: one SQLite file (WAL) holding every capture's hosts, chips,
// kernel statistics with their sketches, roll-ups, counters and compressed timelines.
//
// Writes go through one writer thread, one transaction per capture, so a capture becomes
// visible atomically; reads use their own connections and never block the writer. Thread-safe.
//
// The store only opens the database and puts its roles together over it; callers hold the role
// they use, as LevelDB's callers hold a DB and not its Env:
//   writer()    capture_writer.h   captures and their hosts going in
//   captures()  capture_queries.h  captures, their hosts, chips and timelines coming out
//   kernels()   kernel_queries.h   kernel statistics, history, pairs of captures
//   insights()  insight_queries.h  counter attributions, scopes, stragglers
//   outbox()    fleet_outbox.h     what waits for the fleet store
//   telemetry() telemetry_table.h  always-on telemetry, per chip and interval
//   database()  database.h         the file itself: retention (retention.h), health (health.h)
#ifndef PODPROF_STORAGE_STORE_H_
#define PODPROF_STORAGE_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/capture_queries.h"
#include "storage/capture_writer.h"
#include "storage/database.h"
#include "storage/fleet_outbox.h"
#include "storage/insight_queries.h"
#include "storage/kernel_queries.h"
#include "storage/rows.h"
#include "storage/telemetry_table.h"

namespace podprof::storage {

class Store {
 public:
  // Opens or creates the database, migrating it to this build's schema.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     const StoreOptions& options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  CaptureWriter& writer() { return writer_; }
  CaptureQueries& captures() { return captures_; }
  KernelQueries& kernels() { return kernels_; }
  InsightQueries& insights() { return insights_; }
  FleetOutbox& outbox() { return outbox_; }
  TelemetryTable& telemetry() { return telemetry_; }
  Database& database() { return *db_; }

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
  TelemetryTable telemetry_;
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_STORE_H_
