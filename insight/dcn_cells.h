// A multi-slice capture's paired transfers (insight/dcn.h) as a matrix of slices x instances,
// for the capture page's slice view: per (rendezvous, step) instance, how long each slice's
// receivers waited and how late each slice was as a producer on its own. The instances are the
// ones AnalyseDcn judges, in the same order (their first recv-done start), so that a cell the
// view marks is one the verdict counted.
#ifndef PODPROF_INSIGHT_DCN_CELLS_H_
#define PODPROF_INSIGHT_DCN_CELLS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "insight/dcn.h"

namespace podprof::insight {

// The matrix's bounds: enough for the largest multi-slice jobs (64 slices) over a capture of
// 2000 rendezvous instances (1000 steps of two rendezvous), 256k figures at most.
inline constexpr size_t kMaxDcnCellSlices = 64;
inline constexpr size_t kMaxDcnCellInstances = 2000;

struct DcnInstance {
  std::string rendezvous;
  int64_t step = -1;
  int64_t start_ns = 0;  // its first recv-done's start, aggregator clock
};

struct DcnCells {
  std::vector<int> slices;             // ascending; the rows
  std::vector<DcnInstance> instances;  // in time order; the columns
  // Row-major: [slice row x instances.size() + instance column]. `wait_ns`: the recv-done
  // time of the slice's receivers (DcnTransfer::wait_ns, summed over its chips' receives);
  // `producer_ns`: the slice's own lateness as a sender (DcnTransfer::producer_own_ns, summed
  // over what it sent), the figure the late-slice verdict counts. 0 where the slice took no
  // part in the instance.
  std::vector<int64_t> wait_ns, producer_ns;
  // Cut by the bounds: the instances after the first max_instances, the slices above the first
  // max_slices (ascending ids).
  uint64_t instances_left_out = 0;
  uint64_t slices_left_out = 0;
};

// The matrix of `transfers` (every paired transfer of the capture, any order). Transfers with
// a slice of -1 at either end take no part (as in the verdict); none left gives an empty
// matrix.
DcnCells DcnSliceCells(const std::vector<DcnTransfer>& transfers,
                       size_t max_slices = kMaxDcnCellSlices,
                       size_t max_instances = kMaxDcnCellInstances);

}  // namespace podprof::insight

#endif  // PODPROF_INSIGHT_DCN_CELLS_H_
