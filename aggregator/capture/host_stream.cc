#include "aggregator/capture/host_stream.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "analysis/host_summary.h"
#include "trace/columns.h"

namespace podprof::aggregator {

namespace v1 = podprof::v1;

namespace {

// The longest window a summary's durations are held to: a day, beyond any capture's limit
// (limits.max_capture_duration is checked before a capture starts), and far within an int64
// of ps.
constexpr uint64_t kMaxWindowMs = 24 * 3600 * 1000;

}  // namespace

bool HostStream::OnChunk(v1::CaptureChunk& chunk) {
  const size_t size = chunk.ByteSizeLong();
  bytes_ += size;
  if (bytes_ > max_bytes_) {
    error_ = absl::StrCat("the agent's stream passed ", max_bytes_,
                          " bytes, the most one host may send (ingest.max_host_stream_bytes)");
    return false;
  }
  if (!budget_.Take(budget_id_, static_cast<int64_t>(size))) {
    error_ = absl::StrCat(
        "the hosts' streams held more than ", budget_.limit(),
        " bytes at once (ingest.max_stream_bytes) and this host's held the most: let go at ",
        bytes_, " bytes");
    return false;
  }
  if (absl::Status bad = decoder_.Add(std::move(chunk)); !bad.ok()) {
    error_ = absl::StrCat("the agent sent a bad chunk: ", bad.message());
    return false;
  }
  // Progress while streaming: at the first chunk, then every 64 chunks. A host that is
  // streaming is alive, even if its heartbeats are late behind the ingest.
  if (decoder_.chunks() % 64 == 1) {
    registry_.Touch(host());
    progress_.set_detail("streaming");
    progress_.mutable_host()->set_event_count(decoder_.events());
    progress_.mutable_host()->set_bytes_received(bytes_);
    run_.Advance(index_, CaptureRun::kStreaming, progress_, clock_);
  }
  return true;
}

std::optional<analysis::HostSummary> HostStream::Summary() {
  trace::HostCapture& cap = decoder_.capture();
  if (decoder_.has_summary()) {
    // The agent's own analysis, held to its stream before it is merged: a summary that does
    // not add up, or counts other executions than were sent, fails the host with the reason.
    analysis::HostSummary& summary = decoder_.summary();
    // No execution outlasts the window it was captured in; a minute's slack covers one that
    // began before the window opened and a recorder's segment edges.
    const int64_t max_duration_ps =
        (static_cast<int64_t>(std::min<uint64_t>(run_.request.duration_ms(), kMaxWindowMs)) +
         60'000) *
        1'000'000'000;
    absl::Status bad =
        analysis::CheckSummary(summary, cap.host.chips.size(), cap.kernels.size(), max_duration_ps);
    if (bad.ok()) bad = analysis::VerifySummary(summary, decoder_.tally());
    if (!bad.ok()) {
      error_ = absl::StrCat("the agent's summary disagrees with its stream: ", bad.message());
      return std::nullopt;
    }
    analysed_by_ = "agent";
    return std::move(summary);
  }
  // Analysed here, while other hosts still stream, on the host's own clock: what stays in
  // memory until the pod's alignment is known is its rows, not its decoded capture.
  absl::Status bad = trace::DecodeEncodedSeries(&cap);
  if (bad.ok()) bad = trace::DecodeEncodedBlocks(&cap);
  if (!bad.ok()) {
    error_ = absl::StrCat("the agent sent a bad chunk: ", bad.message());
    return std::nullopt;
  }
  analysed_by_ = "aggregator";
  return analysis::SummariseHost(cap);
}

void HostStream::OnDone(const grpc::Status& s) {
  // The call is over: let its context (and with it the call's arena, which grows with every
  // message of a long stream) go now rather than with the kept CaptureRun.
  run_.ForgetContext(index_);
  if (error_.empty() && !s.ok()) error_ = run_.cancelled ? "cancelled" : s.error_message();
  if (error_.empty() && !decoder_.done()) error_ = "the agent's stream ended without a trailer";
  std::optional<analysis::HostSummary> summary;
  if (error_.empty()) summary = Summary();
  if (summary) {
    trace::HostCapture& cap = decoder_.capture();
    cap.host.name = host();
    actual_start_ns_ = cap.host.profile_start_ns;
    actual_end_ns_ = cap.host.profile_stop_ns;
    collective_ends_ = analysis::CollectiveEnds(*summary, cap.host.chips);
    analysed_ = ingest::MergeHost(writer_, index_, cap, std::move(*summary), &run_.pod);
    // Its timelines and counters go to the store now, under the running capture: what waits
    // for the pod is then its statistics and collective arrivals, not its data.
    if (analysed_.ok()) {
      analysed_->write.host = host();
      analysed_->write.analysed_by = analysed_by_;
      analysed_->write.warnings = warnings_ = std::move(cap.warnings);
      absl::Status written = writer_.WriteHostData(run_.id, &analysed_->write);
      if (!written.ok()) analysed_ = written;
    }
  }
  decoder_.capture() = trace::HostCapture();
  budget_.Leave(budget_id_);
  progress_.mutable_host()->set_status(error_.empty() ? v1::CAPTURE_STATUS_COMPLETE
                                                      : v1::CAPTURE_STATUS_FAILED);
  progress_.mutable_host()->set_error_message(error_);
  progress_.mutable_host()->set_event_count(decoder_.events());
  progress_.mutable_host()->set_bytes_received(bytes_);
  progress_.set_detail(error_.empty() ? "done" : "failed");
  run_.Advance(index_, CaptureRun::kFinished, progress_, clock_);
  left_.DecrementCount();  // last: the run may go on (and free this) from here
}

}  // namespace podprof::aggregator
