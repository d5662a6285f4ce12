// The agent's side of a capture stream (podprof.v1.Agent/Capture): turns a HostCapture into
// chunks that are each at most the negotiated message size by construction.
//
// Every payload is split the same way: kernel definitions into batches, event blocks into runs
// of events, counter series into runs of samples, the trailer's warnings cut to what fits. The
// split is computed from the exact protobuf wire sizes of what goes in (not an estimate per
// item), so a chunk never outgrows the receiver's limit whatever the values are. A single item
// larger than a chunk (a kernel whose HLO or MLIR text is huge) has its long texts shortened.
#ifndef PODPROF_STREAM_CAPTURE_ENCODER_H_
#define PODPROF_STREAM_CAPTURE_ENCODER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "analysis/host_summary.h"
#include "proto/podprof_agent.pb.h"
#include "trace/model.h"

namespace podprof::stream {

// Receives chunks in order. Write() returns false when the receiver is gone (the stream broke);
// the producer then stops.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual bool Write(const podprof::v1::CaptureChunk& chunk) = 0;
};

struct ChunkCounts {
  uint64_t chunks = 0;
  uint64_t bytes = 0;  // serialized chunk bytes
  uint64_t events = 0;
  uint64_t kernels = 0;
  uint64_t counter_samples = 0;
  uint64_t largest_chunk = 0;  // bytes of the largest chunk sent
};

// The smallest chunk limit the encoder accepts: room for a host description and for one kernel
// definition with its short fields whole.
constexpr size_t kMinChunkBytes = 16 << 10;

// The limit to use: the agent's own `own_limit`, lowered to what the receiver asked for
// (`requested`, 0 = no request), never below kMinChunkBytes.
size_t NegotiateChunkBytes(size_t own_limit, uint64_t requested);

// A chip as the host description (the stream's first chunk) carries it.
podprof::v1::ChipInfo ChipInfoOf(const trace::Chip& chip);

// The pieces of a stream, in this order: the host (first chunk), then pieces of the capture
// (each with the kernels it defines newly, ids continuing from the previous piece's), then
// series from elsewhere. Each chunk serializes to at most `max_chunk_bytes`, which must be at
// least kMinChunkBytes. Cancelled when the sink broke.
absl::Status StreamHost(const podprof::v1::HostInfo& host, size_t max_chunk_bytes, ChunkSink* sink,
                        ChunkCounts* counts);
// `piece.kernels` from `first_kernel` on, then its blocks and counter series. With `columns`,
// the blocks go in the store's column encoding (EventBlock.columns), as an agent that analyses
// its host sends them, for the aggregator to store undecoded.
absl::Status StreamPiece(const trace::HostCapture& piece, size_t first_kernel,
                         size_t max_chunk_bytes, ChunkSink* sink, ChunkCounts* counts,
                         bool columns = false);
absl::Status StreamCounters(const std::vector<podprof::v1::CounterSeries>& series,
                            size_t max_chunk_bytes, ChunkSink* sink, ChunkCounts* counts);

// The agent's summary of its host (`chips` are the capture's, which the summary's indices
// name) as summary chunks of at most `max_chunk_bytes`: kernels as this stream's ids, chips
// by ordinal, counter and line names cut as their series and blocks travel. Returns the rows
// sent (CaptureTrailer.summary_rows: statistics, attributions, scopes and arrivals). Cancelled
// when the sink broke.
absl::StatusOr<uint64_t> StreamSummary(const analysis::HostSummary& summary,
                                       const std::vector<trace::Chip>& chips,
                                       size_t max_chunk_bytes, ChunkSink* sink,
                                       ChunkCounts* counts);

// A whole capture: streams `host` first, then the kernel definitions (ids from 1, in capture
// order), the event blocks (start times delta-encoded), the capture's counter series and
// `extra_counters`; each chunk serializes to at most `max_chunk_bytes`. The trailer is the caller's
// (see EncodeTrailer). Cancelled when the sink broke; InvalidArgument when `max_chunk_bytes` is
// below kMinChunkBytes or the host description alone does not fit. Memory: one chunk at a time.
absl::Status StreamCapture(const trace::HostCapture& capture, const podprof::v1::HostInfo& host,
                           const std::vector<podprof::v1::CounterSeries>& extra_counters,
                           size_t max_chunk_bytes, ChunkSink* sink, ChunkCounts* counts,
                           bool columns = false);

// `trailer` as a chunk of at most `max_chunk_bytes`: warnings that do not fit are dropped, the
// last kept one saying how many were.
podprof::v1::CaptureChunk EncodeTrailer(podprof::v1::CaptureTrailer trailer,
                                        size_t max_chunk_bytes);

}  // namespace podprof::stream

#endif  // PODPROF_STREAM_CAPTURE_ENCODER_H_
