// What the fleet store holds of one capture, read from the aggregator's SQLite store, and its
// rows for each ClickHouse table (fleet/schema.h) in RowBinary.
#ifndef PODPROF_FLEET_CAPTURE_ROWS_H_
#define PODPROF_FLEET_CAPTURE_ROWS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fleet/schema.h"
#include "insight/evidence.h"
#include "insight/verdict.h"
#include "storage/store.h"

namespace podprof::fleet {

// One kernel of a capture over the pod, with the verdict `podprof stats` gives it.
struct FleetKernel {
  storage::StatRow stats;
  insight::Verdict verdict;
};

struct FleetCapture {
  storage::CaptureRow capture;
  std::vector<storage::StatRow> chip_stats;         // per (host, chip, kernel definition)
  std::vector<FleetKernel> kernels;                 // per kernel definition, over the pod
  std::vector<storage::KernelInsightRow> counters;  // over the pod, by kernels.id
  std::vector<trace::StragglerRow> stragglers;
  // The straggler test over `stragglers` (by index), as `podprof stragglers` judges them: the
  // fleet names no straggler on noise either.
  insight::StragglerVerdict straggler_verdict;
};

// The facts a verdict is decided from: a stats row and what the store attributed to it
// (counters and collective waits; none when `in` is null). The aggregator's API judges its
// rows with it too, so the fleet's verdicts are `podprof stats`'s.
insight::KernelFacts FactsOf(const storage::StatRow& r, const storage::KernelInsightRow* in);
// The scopes whose time is a kernel's sync wait (the TensorCore's SyncWait events on its
// sync-flag line), for Store::KernelInsights: what the live analysis counts (host_insight.cc).
storage::ScopeName SyncWaitScope();

// The capture as the fleet stores it; NotFound naming the id when it is gone (retention).
absl::StatusOr<FleetCapture> ReadFleetCapture(storage::Store& store, const std::string& id);

// The rows of `captures` for table `t`, appended to `out` in RowBinary; returns how many.
int64_t EncodeRows(Table t, const std::string& pod,
                   const std::vector<const FleetCapture*>& captures, std::string* out);

}  // namespace podprof::fleet

#endif  // PODPROF_FLEET_CAPTURE_ROWS_H_
