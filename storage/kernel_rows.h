// A kernel definition at the store's boundary, one way each: trace::KernelDef bound into a
// kernels row for the writer, and a kernels row read back for the queries. Internal to
// storage/.
#ifndef PODPROF_STORAGE_KERNEL_ROWS_H_
#define PODPROF_STORAGE_KERNEL_ROWS_H_

#include <string>

#include "storage/rows.h"
#include "storage/sqlite.h"
#include "trace/model.h"

namespace podprof::storage::internal {

// The identity columns of a kernels row aliased `k`, in the order ReadKernelKey reads them:
// id, module, op name, category, program id, HLO hash, flops, bytes accessed.
inline constexpr char kKernelKeyColumns[] =
    "k.id, k.module, k.op_name, k.category, k.program_id, k.hlo_hash, k.flops, k.bytes_accessed";
// Reads the eight columns kKernelKeyColumns lists (source is not among them: the stored row
// has one, but a statistics row leaves it empty).
KernelKey ReadKernelKey(RowReader& row);
// A stored kernel as the capture model's definition, with its source location.
trace::KernelDef KernelDefOf(const KernelKey& key, std::string source);

// Binds a definition's identity, the columns kernels is unique over, as parameters
// `first`..`first + 6`: module, op name, category, program id, HLO hash, flops, bytes accessed.
void BindKernelIdentity(Statement& s, int first, const trace::KernelDef& k);
// The same identity as one string, for the writer's in-memory map of known kernels.
std::string KernelIdentityKey(const trace::KernelDef& k);

}  // namespace podprof::storage::internal

#endif  // PODPROF_STORAGE_KERNEL_ROWS_H_
