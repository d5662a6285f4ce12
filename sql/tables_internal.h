// What the capture tables share (capture_tables.h): the walk over a capture's hosts one at a
// time, and each table's maker.
#ifndef PODPROF_SQL_TABLES_INTERNAL_H_
#define PODPROF_SQL_TABLES_INTERNAL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sql/budget.h"
#include "sql/capture_tables.h"
#include "sql/table.h"
#include "storage/rows.h"

namespace podprof::sql::internal {

// Reads the hosts of a capture one after another, each as `selection` says (its `hosts` is set
// per host), charging each host's decoded size to the budget while it is held.
class HostWalk {
 public:
  HostWalk(const StoreSources& store, const storage::CaptureRow& capture,
           std::vector<std::string> hosts, storage::HostSelection selection, Budget& budget)
      : store_(store),
        capture_(capture),
        hosts_(std::move(hosts)),
        selection_(std::move(selection)),
        budget_(budget) {}
  ~HostWalk() { Release(); }
  HostWalk(const HostWalk&) = delete;
  HostWalk& operator=(const HostWalk&) = delete;

  // Loads the next host: false when none is left.
  absl::StatusOr<bool> Next();
  // The host as stored: its capture, and its row (outcome, clock uncertainty).
  const storage::StoredHost& host() const { return host_; }

 private:
  void Release();

  const StoreSources& store_;
  const storage::CaptureRow& capture_;
  const std::vector<std::string> hosts_;
  storage::HostSelection selection_;
  Budget& budget_;
  size_t next_ = 0;
  storage::StoredHost host_;
  int64_t charged_ = 0;
};

// The hosts of `capture` a query asks for: the one it names (when the capture has it), else all.
std::vector<std::string> HostsOf(const storage::CaptureRow& capture,
                                 const std::optional<std::string>& only);
// "TPU:0", "GPU:3", "CPU:0": a chip as XProf's Events DB names its device.
std::string DeviceName(const trace::Chip& chip);

std::unique_ptr<Table> MakeEventsTable(const StoreSources& store,
                                       const storage::CaptureRow& capture);
std::unique_ptr<Table> MakeCountersTable(const StoreSources& store,
                                         const storage::CaptureRow& capture);
std::unique_ptr<Table> MakeCollectivesTable(const StoreSources& store,
                                            const storage::CaptureRow& capture);
std::unique_ptr<Table> MakeKernelsTable(const StoreSources& store,
                                        const storage::CaptureRow& capture);
std::unique_ptr<Table> MakeTelemetryTable(const StoreSources& store,
                                          const storage::CaptureRow& capture);

}  // namespace podprof::sql::internal

#endif  // PODPROF_SQL_TABLES_INTERNAL_H_
