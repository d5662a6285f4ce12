// CRC-32C (Castagnoli), the checksum of the store's segment records (storage/segments.h): the
// polynomial SSE 4.2 computes in hardware, so checking every blob the store writes or reads
// costs a fraction of a copy of it. Falls back to a table where the instruction is missing.
// Thread-safe.
#ifndef PODPROF_COMMON_CRC32C_H_
#define PODPROF_COMMON_CRC32C_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace podprof {

// The CRC-32C of `data`, continuing from `crc` (0 to start): Crc32c("123456789") is
// 0xe3069283, the polynomial's check value.
uint32_t Crc32c(absl::string_view data, uint32_t crc = 0);

}  // namespace podprof

#endif  // PODPROF_COMMON_CRC32C_H_
