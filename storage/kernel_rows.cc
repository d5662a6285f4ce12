#include "storage/kernel_rows.h"

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

namespace podprof::storage::internal {

KernelKey ReadKernelKey(RowReader& row) {
  KernelKey k;
  k.id = row.Int();
  k.module = row.Text();
  k.op_name = row.Text();
  k.category = row.Text();
  k.program_id = row.Uint64();
  k.hlo_hash = row.Uint64();
  k.flops = row.Int();
  k.bytes_accessed = row.Int();
  return k;
}

trace::KernelDef KernelDefOf(const KernelKey& key, std::string source) {
  trace::KernelDef d;
  d.module = key.module;
  d.name = key.op_name;
  d.category = key.category;
  d.program_id = key.program_id;
  d.hlo_hash = key.hlo_hash;
  d.flops = key.flops;
  d.bytes_accessed = key.bytes_accessed;
  d.source = std::move(source);
  return d;
}

void BindKernelIdentity(Statement& s, int first, const trace::KernelDef& k) {
  s.Bind(first, k.module).Bind(first + 1, k.name).Bind(first + 2, k.category);
  s.Bind(first + 3, static_cast<int64_t>(k.program_id));
  s.Bind(first + 4, static_cast<int64_t>(k.hlo_hash));
  s.Bind(first + 5, k.flops).Bind(first + 6, k.bytes_accessed);
}

std::string KernelIdentityKey(const trace::KernelDef& k) {
  return absl::StrCat(k.module, "\x1f", k.name, "\x1f", k.category, "\x1f", k.program_id, "\x1f",
                      k.hlo_hash, "\x1f", k.flops, "\x1f", k.bytes_accessed);
}

}  // namespace podprof::storage::internal
