// The store's columnar encodings of timelines and counter series (SCHEMA.md: timeline_blocks,
// counter_series): encoded by the ingest pipeline before the write transaction, decoded by the
// store's readers.
#ifndef PODPROF_STORAGE_TIMELINE_CODEC_H_
#define PODPROF_STORAGE_TIMELINE_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "trace/model.h"

namespace podprof::storage {

// A zstd frame of `b`'s events: varint count, then per event zigzag start delta, zigzag
// duration, kernel id (`kernel_ids[b.kernel[i]]`: the stored kernels.id), collective id.
std::string EncodeTimeline(const trace::EventBlock& b, const std::vector<int64_t>& kernel_ids);
// Appends a blob's events to `b`'s columns; kernel ids stay the stored kernels.id. DataLoss
// for a damaged blob.
absl::Status DecodeTimeline(absl::string_view blob, trace::EventBlock* b);

// A zstd frame of a series: varint count, then per sample zigzag time delta and the value's 8
// bytes.
std::string EncodeCounters(const trace::CounterSeries& s);
absl::StatusOr<trace::CounterSeries> DecodeCounters(absl::string_view blob);

}  // namespace podprof::storage

#endif  // PODPROF_STORAGE_TIMELINE_CODEC_H_
