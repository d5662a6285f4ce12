// The bytes all hosts' capture streams may hold at once (ingest.max_stream_bytes), shared by
// every capture's host streams.
//
// A host's stream is held as it arrives until the stream ends (aggregator/capture/host_stream.h),
// and ingest.max_host_stream_bytes bounds each alone; with max_active_hosts of them streaming at
// once that is still more than the daemon's memory (16 x 1 GiB by default against the unit's
// MemoryMax=4G). The budget holds their sum: when a chunk takes it past its limit, the stream
// holding the most is let go (it fails, named, at its next chunk, or at once if it is the one
// taking), so one agent that sends without end cannot crowd honest hosts out. The sum may pass
// the limit by the chunks in flight meanwhile, one per streaming host.
//
// Thread-safe: streams take and leave from the ingest's threads.
#ifndef PODPROF_AGGREGATOR_CAPTURE_STREAM_BUDGET_H_
#define PODPROF_AGGREGATOR_CAPTURE_STREAM_BUDGET_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"

namespace podprof::aggregator {

class StreamBudget {
 public:
  // `limit_bytes` > 0.
  explicit StreamBudget(int64_t limit_bytes) : limit_(limit_bytes) {}
  StreamBudget(const StreamBudget&) = delete;
  StreamBudget& operator=(const StreamBudget&) = delete;

  int64_t limit() const { return limit_; }

  // A new stream's share, empty; give it back with Leave.
  int64_t Join() ABSL_LOCKS_EXCLUDED(mu_);
  // Counts `bytes` more held by stream `id`. False when that stream is to be let go: the sum of
  // the streams not let go passed the limit and it holds the most of them, now or at an
  // earlier pass. Its bytes stay counted in used() until Leave, but no longer against the
  // others.
  bool Take(int64_t id, int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Stream `id` holds nothing any more: its bytes go back to the budget.
  void Leave(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // The bytes held now, by all streams.
  int64_t used() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int64_t limit_;
  mutable absl::Mutex mu_;
  // Guarded by mu_
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<int64_t, int64_t> held_ ABSL_GUARDED_BY(mu_);  // stream -> bytes
  absl::flat_hash_set<int64_t> let_go_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CAPTURE_STREAM_BUDGET_H_
