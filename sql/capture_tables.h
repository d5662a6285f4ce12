// The tables SQL sees of one stored capture, read from the store as the statement asks for them
// (nothing is copied into SQLite). Every time is on the pod's clock (the aggregator's), in ns
// since the Unix epoch, with the host's clock uncertainty beside it. Column names follow XProf's
// Events DB where the meaning is the same (`category`, `hlo_op`, `hlo_module`,
// `hlo_fingerprint`, `start_ns`, `end_ns`, `self_time_ns`, `flops`, `memory_accessed`,
// `source_line`, `tf_op_name`); docs/SQL.md lists every column.
//
//   events       every event of every timeline (kernels, modules, steps, scopes), a row each
//   kernels      each kernel's statistics per chip, as stored
//   collectives  each chip's arrival at each collective instance, its wait for the last one
//   counters     every counter sample
//   telemetry    the hosts' telemetry over the capture's window
//
// `events` and `counters` read one host at a time (the host, chip, line or counter, kernel and
// time constraints of the query narrow what is read); `collectives` reads the kernel lines of
// every host once per statement and keeps the arrivals, within the memory budget.
#ifndef PODPROF_SQL_CAPTURE_TABLES_H_
#define PODPROF_SQL_CAPTURE_TABLES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sql/engine.h"
#include "storage/capture_queries.h"
#include "storage/kernel_queries.h"
#include "storage/rows.h"
#include "storage/telemetry_table.h"

namespace podprof::sql {

// The store's read roles the tables read through; they must outlive the tables.
struct StoreSources {
  storage::CaptureQueries* captures = nullptr;
  storage::KernelQueries* kernels = nullptr;
  storage::TelemetryTable* telemetry = nullptr;
};

class CaptureTables {
 public:
  // The tables of `capture_id`; NotFound naming it when no such capture is stored.
  static absl::StatusOr<std::unique_ptr<CaptureTables>> Open(const StoreSources& store,
                                                             const std::string& capture_id);
  ~CaptureTables();
  CaptureTables(const CaptureTables&) = delete;
  CaptureTables& operator=(const CaptureTables&) = delete;

  // Each table by its name, for RunStatement.
  std::vector<NamedTable> tables() const;
  // The capture's stored row: its hosts and their clock uncertainty, its window.
  const storage::CaptureRow& capture() const { return capture_; }

 private:
  CaptureTables(storage::CaptureRow capture) : capture_(std::move(capture)) {}

  storage::CaptureRow capture_;
  std::vector<std::pair<std::string, std::unique_ptr<Table>>> tables_;
};

// Runs `statement` over the tables of `capture_id`.
absl::StatusOr<Result> RunOnCapture(const StoreSources& store, const std::string& capture_id,
                                    const std::string& statement, const Limits& limits,
                                    Clock& clock);

}  // namespace podprof::sql

#endif  // PODPROF_SQL_CAPTURE_TABLES_H_
