// The aggregator's side of a capture stream (podprof.v1.Agent/Capture): rebuilds the host's
// capture one chunk at a time, rejecting a chunk that contradicts the earlier ones (a kernel id
// out of order or unknown, columns of different lengths, anything after the trailer) with a
// status that says which chunk and what was wrong, instead of trusting it.
#ifndef PODPROF_STREAM_CAPTURE_DECODER_H_
#define PODPROF_STREAM_CAPTURE_DECODER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "analysis/host_summary.h"
#include "proto/podprof_agent.pb.h"
#include "trace/model.h"

namespace podprof::stream {

// Rebuilds a HostCapture from an agent's chunks. Thread-compatible.
class CaptureDecoder {
 public:
  // InvalidArgument naming the chunk (its index from 0, its kind) and the fault. After an
  // error the capture holds what the earlier chunks gave, every index inside it.
  absl::Status Add(const podprof::v1::CaptureChunk& c);  // a copy of `c`, as below
  // The same, taking the encoded blocks and series it keeps out of `c` instead of copying them
  // (an aggregator's streams bring megabytes a second of them).
  absl::Status Add(podprof::v1::CaptureChunk&& c);
  bool done() const { return done_; }
  uint64_t chunks() const { return chunks_; }
  uint64_t events() const { return events_; }
  const podprof::v1::CaptureTrailer& trailer() const { return trailer_; }
  trace::HostCapture& capture() { return capture_; }
  // The agent's summary of its host, by this capture's chip and kernel indices, in
  // analysis::OrderSummary's order; meaningful when summary_rows() > 0. Its rows are checked
  // against the kernels and chips the stream defined (not yet against its events:
  // analysis::CheckSummary's business).
  bool has_summary() const { return summary_rows_ > 0; }
  uint64_t summary_rows() const { return summary_rows_; }
  analysis::HostSummary& summary() { return summary_; }
  // What the stream's events say, to hold the summary to (analysis::VerifySummary).
  const analysis::StreamTally& tally() const { return tally_; }

 private:
  absl::Status AddKernels(const podprof::v1::KernelDefBatch& batch);
  // The encoded columns or samples are moved out of `e` / `cs`.
  absl::Status AddEvents(podprof::v1::EventBlock& e);
  absl::Status AddEncodedEvents(podprof::v1::EventBlock& e);
  absl::Status AddCounters(podprof::v1::CounterSeries& cs);
  absl::Status AddSummary(const podprof::v1::HostSummaryPart& part);
  absl::Status AddArrivals(const podprof::v1::CollectiveArrivals& a);
  // The chip index of a summary row's ordinal, or the kernel index of its 1-based id:
  // InvalidArgument naming `what` when the stream defined no such chip or kernel.
  absl::StatusOr<int> SummaryChip(int ordinal, const char* what) const;
  absl::StatusOr<uint32_t> SummaryKernel(uint32_t id, const char* what) const;
  // The index of the chip with `ordinal`, added (described by `info` when given) if new.
  int ChipIndex(int ordinal, const podprof::v1::ChipInfo* info);

  trace::HostCapture capture_;
  podprof::v1::CaptureTrailer trailer_;
  uint64_t chunks_ = 0;
  uint64_t events_ = 0;
  bool done_ = false;
  analysis::HostSummary summary_;
  uint64_t summary_rows_ = 0;
  bool summarised_ = false;
  analysis::StreamTally tally_;  // a summary chunk came: no more events or series
};

}  // namespace podprof::stream

#endif  // PODPROF_STREAM_CAPTURE_DECODER_H_
