// The database's health, for a service's watchdog and metrics: the space its pages use, its
// integrity, and whether its writer answers.
#ifndef PODPROF_STORAGE_HEALTH_H_
#define PODPROF_STORAGE_HEALTH_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/database.h"

namespace podprof::storage {

// Bytes the store takes: the database's pages in use (not on the free list) and its segment
// files.
absl::StatusOr<int64_t> UsedBytes(Database& db);
// PRAGMA integrity_check == "ok" and every timeline and counter row's record whole with its
// checksum (storage/segments.h); DataLoss with SQLite's answer or the first bad record,
// naming its capture, otherwise. Reads every stored byte: for tests and checks, not serving.
absl::Status CheckIntegrity(Database& db);
// The writer thread takes the database's write lock and lets it go within `timeout_ns`.
// DeadlineExceeded when the writer does not answer in time (a long write, a wedged disk);
// Unavailable when another process holds the lock. A database open for queries only is
// healthy while it answers a query.
absl::Status CheckWriter(Database& db, int64_t timeout_ns);

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_HEALTH_H_
