// Stable 64-bit string hash (FNV-1a). Stable across processes and versions, so it can be
// stored and compared later, unlike absl::Hash.
#ifndef PODPROF_TRACE_HASH_H_
#define PODPROF_TRACE_HASH_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace podprof::trace {

inline uint64_t Fnv1a64(absl::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace podprof::trace

#endif  // PODPROF_TRACE_HASH_H_
