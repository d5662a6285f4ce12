// The store's read roles (storage/store.h) as the API holds them: the query layer (queries.h),
// the views (timelines, heatmaps, overviews) and the exports read through this, and none of them
// gets the writer, so what is handed a StoreReads can only read. The import, which writes, is
// handed the writer role itself (importer.h).
#ifndef PODPROF_AGGREGATOR_API_STORE_READS_H_
#define PODPROF_AGGREGATOR_API_STORE_READS_H_

#include <cstdint>

#include "storage/store.h"

namespace podprof::aggregator {

// Thread-safe (the roles are); copyable. The store must outlive every copy.
class StoreReads {
 public:
  explicit StoreReads(storage::Store& store)
      : captures_(store.captures()),
        kernels_(store.kernels()),
        insights_(store.insights()),
        telemetry_(store.telemetry()),
        writer_(store.writer()) {}

  // Captures, their hosts, chips and timelines.
  storage::CaptureQueries& captures() const { return captures_; }
  // Kernel statistics, history, pairs of captures.
  storage::KernelQueries& kernels() const { return kernels_; }
  // Counter attributions, scopes, stragglers.
  storage::InsightQueries& insights() const { return insights_; }
  // Stored telemetry; only its Read is the API's.
  storage::TelemetryTable& telemetry() const { return telemetry_; }
  // Captures committed since the store opened: what the overview warmer watches to see a new
  // one without a query.
  int64_t captures_written() const { return writer_.written().captures; }

 private:
  storage::CaptureQueries& captures_;
  storage::KernelQueries& kernels_;
  storage::InsightQueries& insights_;
  storage::TelemetryTable& telemetry_;
  const storage::CaptureWriter& writer_;  // its counters only
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_API_STORE_READS_H_
