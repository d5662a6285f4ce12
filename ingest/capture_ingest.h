// The analyse-and-write end of the ingest pipeline: from hosts' captures (already on the
// aggregator's clock) to one capture in the store.
//
// Each host is analysed on its own, in parallel on a worker pool and outside any transaction:
// its kernel ids resolved (the store keeps them; hosts of one pod share nearly all kernels, so
// after the first host this is a look-up in memory), kernel statistics, counter attribution,
// collective arrivals, and its timelines and counters encoded in the store's format. Then the
// pod's collectives are analysed and roll-ups merged, and the store's writer inserts the rows
// it is handed in one transaction, so readers never wait on analysis. At most one host's
// decoded capture per pool thread is in memory at a time.
#ifndef PODPROF_INGEST_CAPTURE_INGEST_H_
#define PODPROF_INGEST_CAPTURE_INGEST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/worker_pool.h"
#include "storage/store.h"
#include "trace/model.h"

namespace podprof::ingest {

// One host's part of a capture on its way to the store.
struct HostInput {
  std::string host;
  std::string status = "complete";  // complete | failed
  std::string error;
  int64_t clock_offset_ns = 0;
  int64_t clock_uncertainty_ns = 0;
  uint64_t bytes = 0;
  std::optional<trace::HostCapture> capture;  // absent when the host delivered nothing
  // Alternatively, produces the capture when its analysis starts (and not before), so a pod's
  // hosts need not all be decoded at once. Used when `capture` is empty.
  std::function<absl::StatusOr<trace::HostCapture>()> load;
};

struct CaptureInput {
  std::string id;
  int64_t start_ns = 0;  // aggregator clock
  int64_t end_ns = 0;
  std::string status = "complete";  // complete | partial | failed | cancelled
  std::map<std::string, std::string> labels;
  std::string options_json = "{}";
  std::string source = "capture";  // capture | import (hosts on their own clocks)
  int64_t created_ns = 0;
  std::vector<HostInput> hosts;
};

// Analyses, encodes and stores `input` (its hosts are consumed). Hosts are analysed on `pool`
// when given, else one after another on the calling thread, which must not be one of the
// pool's. Errors are the store's (AlreadyExists, ResourceExhausted, FailedPrecondition for a
// read-only database) or a host's load error naming the host.
absl::Status StoreCapture(storage::Store& store, CaptureInput input, WorkerPool* pool = nullptr);

}  // namespace podprof::ingest

#endif  // PODPROF_INGEST_CAPTURE_INGEST_H_
