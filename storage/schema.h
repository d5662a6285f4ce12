// The store's schema and its forward migrations (see storage/SCHEMA.md for the prose).
#ifndef PODPROF_STORAGE_SCHEMA_H_
#define PODPROF_STORAGE_SCHEMA_H_

#include "absl/status/status.h"
#include "storage/sqlite.h"

namespace podprof::storage {

// The schema version this build writes.
int LatestSchemaVersion();

// Brings the database to `target` (default: the latest) one migration at a time, each in its own
// transaction. A database newer than this build is refused with FailedPrecondition.
absl::Status Migrate(Connection& db, int target = -1);

// PRAGMA user_version.
absl::StatusOr<int> SchemaVersion(Connection& db);

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_SCHEMA_H_
