// The capture writer: a capture's rows, analysed and encoded beforehand (ingest/), inserted on
// the database's writer thread. Kernel definitions are resolved to ids first, in a short
// transaction of their own; a pod's hosts may each be inserted ahead of the capture under its
// `running` row; the capture itself is one transaction, visible to readers when it commits.
// Thread-safe.
#ifndef PODPROF_STORAGE_CAPTURE_WRITER_H_
#define PODPROF_STORAGE_CAPTURE_WRITER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "storage/database.h"
#include "storage/fleet_outbox.h"
#include "storage/rows.h"
#include "trace/model.h"

namespace podprof::storage {

class CaptureWriter {
 public:
  // Queues committed captures in `outbox` (as FleetOutbox::QueueForFleet asks).
  CaptureWriter(Database& db, FleetOutbox& outbox) : db_(db), outbox_(outbox) {}
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;

  // The stored ids of kernel definitions (kernels.id), one list per host: inserted where new
  // (with their texts, filled in where an earlier capture left them empty), in one short
  // transaction on the writer thread. Kernel rows are identities shared by captures, so
  // resolving them before the capture itself is stored leaves nothing wrong behind.
  absl::StatusOr<std::vector<std::vector<int64_t>>> ResolveKernels(
      const std::vector<const std::vector<trace::KernelDef>*>& hosts);
  // Inserts a whole capture, analysed and encoded beforehand, in one transaction on the writer
  // thread; blocks until committed. AlreadyExists for a duplicate id; ResourceExhausted when
  // the disk is full (nothing of the capture is stored, reads go on).
  absl::Status WriteCapture(const CaptureWrite& capture);
  // Inserts a host's chips, timelines, counters and attributions under a capture still `running`
  // (see BeginCapture), ahead of the capture's own write, so that a pod's hosts need not wait in
  // memory for its slowest one; moves them out of `host` and records the chips' rows in it for
  // WriteCapture. Queries see none of it until WriteCapture commits the host's outcome (reads
  // of a capture's hosts go through capture_hosts). FailedPrecondition when no such capture
  // is running.
  absl::Status WriteHostData(const std::string& capture_id, HostWrite* host);
  // Records a capture as `running` before its window (its id, times, labels and options),
  // so that a crash of the aggregator leaves a trace of it; WriteCapture replaces the record.
  absl::Status BeginCapture(const CaptureWrite& header);
  // Ends capture `id`, still `running`, as `failed`: its last write failed (a full disk, a
  // row the store refused), and it must not stay `running` until a restart. The hosts' data
  // written ahead stays under it. OK when it was not running.
  absl::Status EndFailed(const std::string& id);
  // What start-up found of the previous process (Recover).
  struct Recovery {
    int interrupted = 0;                // captures still `running`, now `interrupted`
    int64_t bytes_truncated = 0;        // torn segment tails cut off
    int64_t rows_dropped = 0;           // timeline and counter rows whose bytes were gone
    int64_t files_removed = 0;          // segment files no row named
    std::vector<std::string> warnings;  // one per capture that lost rows, naming it
  };
  // Called once at start-up, when no capture of this process can be running yet: marks every
  // capture still `running` as `interrupted`, and makes the segment files and their rows agree
  // (storage/segment_index.h: torn tails cut, rows whose bytes are gone dropped with a
  // warning naming the capture, files no row names removed).
  absl::StatusOr<Recovery> Recover();

  // What WriteCapture has committed since the store was opened: captures, and the events and
  // bytes their hosts sent (counters for /metrics).
  struct Written {
    int64_t captures = 0, events = 0, bytes = 0;
  };
  Written written() const { return {captures_.load(), events_.load(), bytes_.load()}; }

 private:
  Database& db_;
  FleetOutbox& outbox_;
  std::atomic<int64_t> captures_{0}, events_{0}, bytes_{0};
  // Kernel identity key -> (kernels.id, which texts the row holds), for ResolveKernels.
  absl::Mutex kernel_ids_mu_;
  absl::flat_hash_map<std::string, std::pair<int64_t, unsigned>> kernel_ids_
      ABSL_GUARDED_BY(kernel_ids_mu_);
};

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_CAPTURE_WRITER_H_
