// One host of a running pod capture: its Capture call's chunks decoded as they arrive on the
// stream pool, then, as its stream ends, the host analysed and its data written ahead while
// the other hosts still stream.
#ifndef PODPROF_AGGREGATOR_CAPTURE_HOST_STREAM_H_
#define PODPROF_AGGREGATOR_CAPTURE_HOST_STREAM_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/blocking_counter.h"
#include "aggregator/capture/alignment.h"
#include "aggregator/capture/capture_run.h"
#include "aggregator/capture/registry.h"
#include "aggregator/capture/stream_budget.h"
#include "aggregator/capture/stream_pool.h"
#include "analysis/host_summary.h"
#include "common/clock.h"
#include "ingest/capture_ingest.h"
#include "storage/capture_writer.h"
#include "stream/capture_decoder.h"

namespace podprof::aggregator {

class HostStream final : public StreamPool::Handler {
 public:
  // `max_bytes`: the most the host's stream may bring (OrchestratorLimits); `budget`: what all
  // hosts' streams may hold at once, shared, which must outlive this.
  HostStream(CaptureRun& run, size_t index, Registry& registry, storage::CaptureWriter& writer,
             Clock& clock, absl::BlockingCounter& left, int64_t max_bytes, StreamBudget& budget)
      : run_(run),
        index_(index),
        registry_(registry),
        writer_(writer),
        clock_(clock),
        left_(left),
        max_bytes_(static_cast<uint64_t>(max_bytes)),
        budget_(budget),
        budget_id_(budget.Join()),
        analysed_(absl::UnknownError("not analysed")) {
    progress_.mutable_host()->set_host_name(host());
    progress_.mutable_host()->set_status(podprof::v1::CAPTURE_STATUS_RUNNING);
  }

  const std::string& host() const { return run_.hosts[index_].host; }
  int slice() const { return run_.hosts[index_].slice; }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t events() const { return decoder_.events(); }
  // What the host's agent warned of, once its stream is in.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // The window the host's profiler covered, ns on the agent's clock, from its trailer (0 when
  // it did not say), once its stream is in.
  int64_t actual_start_ns() const { return actual_start_ns_; }
  int64_t actual_end_ns() const { return actual_end_ns_; }
  // "agent" when the host's own summary was merged, "aggregator" when it was analysed here
  // (an agent too old to analyse, or one whose chips came apart); empty before it delivered.
  const std::string& analysed_by() const { return analysed_by_; }
  CollectiveEndList& collective_ends() { return collective_ends_; }
  // The host's rows once it delivered, or why analysing it failed (the store's error).
  absl::StatusOr<ingest::AnalysedHost>& analysed() { return analysed_; }

  void Waiting() {
    progress_.set_detail("waiting");
    run_.Advance(index_, CaptureRun::kWaiting, progress_, clock_);
  }

  // Decodes a chunk (reporting progress every 64); false, with the reason kept, on a bad one.
  bool OnChunk(podprof::v1::CaptureChunk& chunk) override;
  // The call is over: the host is analysed and its data written ahead of the capture, or why
  // it failed is kept; then it counts as finished (the run may go on and free this).
  void OnDone(const grpc::Status& s) override;

 private:
  // The host's summary: the agent's, checked against its stream, or computed here from the
  // stream when the agent sent none. None, with error_ set, when either fails.
  std::optional<analysis::HostSummary> Summary();

  CaptureRun& run_;
  const size_t index_;
  Registry& registry_;
  storage::CaptureWriter& writer_;
  Clock& clock_;
  absl::BlockingCounter& left_;
  const uint64_t max_bytes_;
  StreamBudget& budget_;
  const int64_t budget_id_;
  podprof::v1::CaptureProgress progress_;
  stream::CaptureDecoder decoder_;
  std::string error_;
  uint64_t bytes_ = 0;
  CollectiveEndList collective_ends_;
  std::string analysed_by_;
  std::vector<std::string> warnings_;
  int64_t actual_start_ns_ = 0, actual_end_ns_ = 0;
  absl::StatusOr<ingest::AnalysedHost> analysed_;
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_CAPTURE_HOST_STREAM_H_
