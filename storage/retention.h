// Retention: captures deleted by age and by size (oldest first), timelines dropped earlier
// than the rest, in bounded batches each its own transaction on the writer, so that a long
// pass never holds the writer for long; freed pages are given back (incremental vacuum).
#ifndef PODPROF_STORAGE_RETENTION_H_
#define PODPROF_STORAGE_RETENTION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "storage/database.h"
#include "storage/rows.h"

namespace podprof::storage {

// Applies `policy` as of `now_ns`; returns what went.
absl::StatusOr<RetentionResult> ApplyRetention(Database& db, const RetentionPolicy& policy,
                                               int64_t now_ns);

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_RETENTION_H_
