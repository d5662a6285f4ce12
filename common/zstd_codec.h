// zstd frames with a compression and a decompression context kept per thread: a fresh context
// per call allocates and clears about a megabyte of tables, which for the many small blocks of
// a pod's ingest was most of the aggregator's time (page faults on freshly mapped memory).
#ifndef PODPROF_COMMON_ZSTD_CODEC_H_
#define PODPROF_COMMON_ZSTD_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace podprof {

// One zstd frame of `raw` at `level` (it records its content size). A `front` of n > 0 bytes
// goes in a block of its own, so that ZstdDecompressPrefix reads it without decompressing the
// rest: for a header at the front of a large frame. Empty only if zstd fails.
std::string ZstdCompress(absl::string_view raw, int level, size_t front = 0);

// The content of one zstd frame; DataLoss naming `what` when `frame` is not one, or when its
// content would exceed `max_bytes`.
absl::StatusOr<std::string> ZstdDecompress(absl::string_view frame, uint64_t max_bytes,
                                           absl::string_view what);

// At most the first `n` bytes of one zstd frame's content, decompressing no more of the frame
// than its first block (ZstdCompress's `front`): for a header at the front of a large frame.
// DataLoss naming `what` when `frame` is not a zstd frame or is damaged there.
absl::StatusOr<std::string> ZstdDecompressPrefix(absl::string_view frame, size_t n,
                                                 absl::string_view what);

// Checks without decompressing that `frame` is exactly one whole zstd frame whose content is
// at most `max_bytes`; DataLoss naming `what` otherwise. Damage inside the frame shows only
// when it is decompressed.
absl::Status ZstdCheckFrame(absl::string_view frame, uint64_t max_bytes, absl::string_view what);
// ZstdCheckFrame's checks, and the frame's declared content size when they pass: what a
// reader bounds its trust in a header by before decoding anything.
absl::StatusOr<uint64_t> ZstdCheckedContentSize(absl::string_view frame, uint64_t max_bytes,
                                                absl::string_view what);

}  // namespace podprof

#endif  // PODPROF_COMMON_ZSTD_CODEC_H_
