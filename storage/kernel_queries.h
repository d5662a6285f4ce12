// The store's reads of kernels: a capture's statistics grouped and ordered, one kernel's
// history across captures, two captures' kernels paired, and kernel identities looked up.
// Each read borrows a reader connection for its length. Thread-safe.
#ifndef PODPROF_STORAGE_KERNEL_QUERIES_H_
#define PODPROF_STORAGE_KERNEL_QUERIES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/database.h"
#include "storage/rows.h"

namespace podprof::storage {

class KernelQueries {
 public:
  explicit KernelQueries(Database& db) : db_(db) {}
  KernelQueries(const KernelQueries&) = delete;
  KernelQueries& operator=(const KernelQueries&) = delete;

  // NotFound for an unknown capture; InvalidArgument for a bad regex.
  absl::StatusOr<std::vector<StatRow>> Stats(const StatsQuery& query);
  absl::StatusOr<std::vector<HistorySeries>> History(const HistoryQuery& query);
  // Per kernel (module, op) in either capture, its statistics on each side (two kernel rows of
  // one (module, op) merged), in (module, op) order. What the pairs mean is insight's
  // (insight/change.h); NotFound naming the id for an unknown capture.
  absl::StatusOr<std::vector<KernelPair>> Pair(const std::string& baseline,
                                               const std::string& candidate,
                                               const std::string& op_regex);
  // Kernels whose op name is `op_name` (exactly), most recently stored first; with `module`
  // non-empty, only that module's.
  absl::StatusOr<std::vector<KernelIdentity>> Find(const std::string& op_name,
                                                   const std::string& module);
  // The newest capture holding kernel `kernel_id`; NotFound when none does.
  absl::StatusOr<std::string> LatestCaptureWith(int64_t kernel_id);
  // Whether capture `capture_id` ran any kernel whose category starts with `prefix` (from its
  // kernel roll-ups, without reading a timeline); false for an unknown capture.
  absl::StatusOr<bool> RanCategory(const std::string& capture_id, const std::string& prefix);

 private:
  Database& db_;
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_KERNEL_QUERIES_H_
