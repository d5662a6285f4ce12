// The aggregator's decoder of an agent's capture stream (podprof.v1.Agent/Capture): rebuilds
// the host's capture one chunk at a time, rejecting chunks that contradict the earlier ones
// (a kernel id out of order or unknown, columns of different lengths) instead of trusting them.
#ifndef PODPROF_AGGREGATOR_CHUNK_ASSEMBLER_H_
#define PODPROF_AGGREGATOR_CHUNK_ASSEMBLER_H_

#include <cstdint>
#include <string>

#include "proto/podprof_agent.pb.h"
#include "trace/model.h"

namespace podprof::aggregator {

// Rebuilds a HostCapture from an agent's chunks, one chunk at a time.
class ChunkAssembler {
 public:
  // Returns false for a chunk that contradicts the earlier ones.
  bool Add(const podprof::v1::CaptureChunk& c);
  bool done() const { return done_; }
  uint64_t events() const { return events_; }
  trace::HostCapture& capture() { return capture_; }

 private:
  int ChipIndex(int ordinal, const podprof::v1::ChipInfo* info) {
    for (size_t i = 0; i < capture_.host.chips.size(); ++i) {
      if (capture_.host.chips[i].ordinal == ordinal) return static_cast<int>(i);
    }
    trace::Chip chip;
    chip.ordinal = ordinal;
    if (info != nullptr) {
      chip.global_id = info->global_chip_id();
      chip.generation = info->generation();
      chip.device_type = info->device_type_string();
      chip.peak_tflops = info->peak_tflops();
      chip.peak_hbm_gbps = info->peak_hbm_gbps();
    }
    capture_.host.chips.push_back(chip);
    return static_cast<int>(capture_.host.chips.size()) - 1;
  }
  podprof::v1::HostInfo host_;
  podprof::v1::CaptureTrailer trailer_;
  trace::HostCapture capture_;
  uint64_t events_ = 0;
  bool done_ = false;
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CHUNK_ASSEMBLER_H_
