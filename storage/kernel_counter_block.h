// A host's counter attributions (trace::KernelCounter: one counter over one kernel's executions
// on one chip) as the store keeps them since version 13: one compressed blob per host, a row of
// kernel_counter_blocks, instead of a kernel_counters row each. A v5p host-second holds about
// 1,100 of them (35 kernels x 4 chips x 8 counters); as rows they were three quarters of the
// SQLite file and most of the writer thread's inserts (docs/SCALE.md), and only the per-chip
// insight query reads them, a whole capture at a time. Internal to storage/.
//
// The blob is one zstd frame (level 1) of:
//   format   1 byte, 1
//   names    varint count, then each counter name as a varint length and its bytes
//   rows     varint count, then per row: zigzag varint chip ordinal, varint kernels.id, varint
//            index into the names, a flags byte (1: a running total), the integral's 8
//            little-endian bytes (an IEEE double), zigzag varint covered_ps, zigzag varint
//            executions
#ifndef PODPROF_STORAGE_KERNEL_COUNTER_BLOCK_H_
#define PODPROF_STORAGE_KERNEL_COUNTER_BLOCK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trace/analysis_rows.h"
#include "trace/model.h"

namespace podprof::storage::internal {

// One attribution as stored: its chip by ordinal and its kernel by kernels.id.
struct StoredKernelCounter {
  int chip_ordinal = 0;
  int64_t kernel_id = 0;
  std::string counter;
  bool cumulative = false;
  double integral = 0;
  int64_t covered_ps = 0;
  int64_t executions = 0;
};

// `rows` of host `host` (chip indices into `chips`, kernel indices into `kernel_ids`) as one
// blob. InvalidArgument naming the host for an index out of range.
absl::StatusOr<std::string> EncodeKernelCounterBlock(const std::string& host,
                                                     const std::vector<trace::KernelCounter>& rows,
                                                     const std::vector<trace::Chip>& chips,
                                                     const std::vector<int64_t>& kernel_ids);

// The rows of a blob. DataLoss for a damaged one (a blob read back is the disk's bytes), never
// more rows than its bytes can hold.
absl::StatusOr<std::vector<StoredKernelCounter>> DecodeKernelCounterBlock(absl::string_view blob);

}  // namespace podprof::storage::internal

#endif  // PODPROF_STORAGE_KERNEL_COUNTER_BLOCK_H_
