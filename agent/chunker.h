// Turns a HostCapture into the bounded chunks of podprof.v1.Agent/Capture.
#ifndef PODPROF_AGENT_CHUNKER_H_
#define PODPROF_AGENT_CHUNKER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "proto/podprof_agent.pb.h"
#include "trace/model.h"

namespace podprof::agent {

// Receives chunks in order. Write() returns false when the receiver is gone (the stream broke);
// the producer then stops.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual bool Write(const podprof::v1::CaptureChunk& chunk) = 0;
};

struct ChunkCounts {
  uint64_t chunks = 0;
  uint64_t bytes = 0;
  uint64_t events = 0;
  uint64_t kernels = 0;
  uint64_t counter_samples = 0;
};

// Streams `host` first, then the kernel definitions (ids from 1, in capture order), the event
// blocks (split so no chunk exceeds about `max_chunk_bytes`; start times delta-encoded), the
// capture's counter series and `extra_counters`. The trailer is the caller's. Returns false if
// the sink broke. Memory: one chunk at a time.
bool StreamCapture(const trace::HostCapture& capture, const podprof::v1::HostInfo& host,
                   const std::vector<podprof::v1::CounterSeries>& extra_counters,
                   size_t max_chunk_bytes, ChunkSink* sink, ChunkCounts* counts);

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_CHUNKER_H_
