// The store's reads of what insight/ found when a capture was stored: its kernels' counter
// attributions, collective waits and in-kernel scopes, and the capture's stragglers. Each
// read borrows a reader connection for its length. Thread-safe.
#ifndef PODPROF_STORAGE_INSIGHT_QUERIES_H_
#define PODPROF_STORAGE_INSIGHT_QUERIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/database.h"
#include "storage/rows.h"

namespace podprof::storage {

class InsightQueries {
 public:
  explicit InsightQueries(Database& db) : db_(db) {}
  InsightQueries(const InsightQueries&) = delete;
  InsightQueries& operator=(const InsightQueries&) = delete;

  // Counter attributions and collective waits of a capture's kernels, per chip (`per_chip`)
  // or merged over the pod, keyed by (host, chip, kernel id) as in StatRow, with the time in
  // the scopes `sync_scope` names as sync_wait_ps (which scopes are waits is the caller's to
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

 private:
  Database& db_;
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_INSIGHT_QUERIES_H_
