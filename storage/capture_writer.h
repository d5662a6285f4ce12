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

  // The stored ids of kernel definitions, one list per host (see Store::ResolveKernels).
  absl::StatusOr<std::vector<std::vector<int64_t>>> ResolveKernels(
      const std::vector<const std::vector<trace::KernelDef>*>& hosts);
  // The whole capture in one transaction (see Store::WriteCapture).
  absl::Status WriteCapture(const CaptureWrite& capture);
  // A host's data ahead of its running capture (see Store::WriteHostData).
  absl::Status WriteHostData(const std::string& capture_id, HostWrite* host);
  // The `running` record of a capture about to start (see Store::BeginCapture).
  absl::Status BeginCapture(const CaptureWrite& header);
  // Every `running` capture marked `interrupted`; returns how many.
  absl::StatusOr<int> MarkInterrupted();

  // What WriteCapture has committed: captures, and the events and bytes their hosts sent.
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
