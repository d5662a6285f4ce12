// The capture runner's second half (capture_runner.h): a capture's XSpace, the file the
// workload wrote or the flight recorder's joined window, read a device plane at a time,
// analysed as it streams when the aggregator merges this agent's analysis, and streamed to the
// aggregator with the sampled series, the host's summary and the trailer. The first half,
// capture_runner.cc, drives the workload's profiler (or freezes the recorder's ring) to get it.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/capture_runner.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "kernelprof/capture_check.h"
#include "trace/byte_source.h"
#include "trace/host_planes.h"
#include "trace/perf_counters.h"
#include "trace/xspace_reader.h"

namespace podprof::agent {
namespace {

// What the aggregator is told of this host: `sysfs` (the chips this host found itself), or
// when that shows none (simulation, containers) the capture's chips; either way completed
// with what only the trace says (peaks, device type).
podprof::v1::HostInfo HostInfoFor(const podprof::v1::HostInfo& sysfs, const trace::Host& traced) {
  podprof::v1::HostInfo info = sysfs;
  if (info.chips().empty()) {
    for (const trace::Chip& c : traced.chips) *info.add_chips() = stream::ChipInfoOf(c);
    return info;
  }
  for (auto& ci : *info.mutable_chips()) {
    for (const trace::Chip& c : traced.chips) {
      if (c.ordinal != ci.ordinal()) continue;
      if (ci.peak_tflops() <= 0) ci.set_peak_tflops(c.peak_tflops);
      if (ci.peak_hbm_gbps() <= 0) ci.set_peak_hbm_gbps(c.peak_hbm_gbps);
      if (ci.device_type_string().empty()) ci.set_device_type_string(c.device_type);
      if (ci.generation().empty()) ci.set_generation(c.generation);
      // The pod-wide id names the chip in a DCN transfer's source-target pairs; chips learned
      // from the metric service (before any capture) have none.
      if (ci.global_chip_id() < 0) ci.set_global_chip_id(static_cast<int32_t>(c.global_id));
    }
  }
  return info;
}

// The events of `piece` on TPU and GPU chips (the CPU device's, from host threads, aside).
int64_t DeviceEvents(const trace::HostCapture& piece, const std::vector<trace::Chip>& chips) {
  int64_t n = 0;
  for (const trace::EventBlock& b : piece.blocks) {
    const bool device = b.chip >= 0 && b.chip < static_cast<int>(chips.size()) &&
                        chips[b.chip].kind != trace::DeviceKind::kCpu;
    if (device) n += static_cast<int64_t>(b.size()) + b.encoded_events;
  }
  return n;
}

// The series sampled beside a capture as the analysis reads them, by chip ordinal; a host-wide
// one (ordinal -1) is left out, as the aggregator leaves it out.
std::vector<trace::CounterSeries> SampledSeries(const std::vector<podprof::v1::CounterSeries>& in) {
  std::vector<trace::CounterSeries> out;
  for (const podprof::v1::CounterSeries& c : in) {
    if (c.chip_ordinal() < 0) continue;
    trace::CounterSeries s;
    s.chip = c.chip_ordinal();
    s.name = c.name();
    const int n = std::min(c.timestamp_ns_size(), c.value_size());
    s.time_ns.assign(c.timestamp_ns().begin(), c.timestamp_ns().begin() + n);
    s.value.assign(c.value().begin(), c.value().begin() + n);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

absl::Status CaptureRunner::NoEvents(CaptureOutcome* outcome) const {
  if (!outcome->no_events_ok) {
    return absl::FailedPreconditionError(
        absl::StrCat("empty trace: the workload profiler at ", workload_.profiler_address,
                     " recorded no device events (is the TPU busy with this workload?)"));
  }
  outcome->warnings.push_back("no device event in the window: no kernel ran on any chip");
  return absl::OkStatus();
}

void CaptureRunner::AddMissing(trace::ByteSource& xspace, const podprof::v1::CaptureOptions& asked,
                               const std::string& host_name, kernelprof::CaptureHolds* holds,
                               CaptureOutcome* outcome) {
  // The host planes are read again only when a host tracer was asked for: the streaming read
  // skipped them, and they can be most of the file.
  if (asked.host_tracer_level() > 0 || asked.python_tracer_level() > 0) {
    absl::StatusOr<trace::HostPlanes> planes = trace::ReadHostPlanes(xspace);
    if (planes.ok()) {
      holds->host_planes = *planes;
    } else {
      PODPROF_LOG(WARNING) << "host planes not checked: " << planes.status().message();
    }
  }
  for (std::string& w : kernelprof::MissingFromCapture(host_name, asked, *holds)) {
    outcome->warnings.push_back(std::move(w));
  }
}

absl::Status CaptureRunner::Finish(trace::ByteSource& xspace, bool empty_trace,
                                   const podprof::v1::CaptureRequest& request,
                                   const podprof::v1::HostInfo& host, const RunnerLimits& limits,
                                   const std::vector<podprof::v1::CounterSeries>& sampled,
                                   const std::string& sampler_error, stream::ChunkSink* sink,
                                   CaptureOutcome* outcome) {
  outcome->xspace_bytes = static_cast<uint64_t>(xspace.size());
  // Chunks no larger than the aggregator said it accepts, nor than this agent allows.
  const size_t chunk_limit =
      stream::NegotiateChunkBytes(limits.max_chunk_bytes, request.max_chunk_bytes());
  // The host analysed here when the aggregator merges this agent's version of the analysis.
  const bool analyse = limits.analyse && request.analysis_version() == analysis::kAnalysisVersion;
  kernelprof::CaptureHolds holds;
  RETURN_IF_ERROR(StreamXSpace(xspace, host, request.options(), chunk_limit,
                               analyse ? &sampled : nullptr, sink, outcome, &holds));
  // A snapshot from the ring was taken with the recorder's options, not the request's.
  if (!request.snapshot()) {
    AddMissing(xspace, request.options(), host.host_name(), &holds, outcome);
  }
  if (!sampler_error.empty()) outcome->warnings.push_back(sampler_error);
  RETURN_IF_ERROR(stream::StreamCounters(sampled, chunk_limit, sink, &outcome->counts));
  podprof::v1::CaptureTrailer trailer;
  if (outcome->summary) {
    ASSIGN_OR_RETURN(const uint64_t rows,
                     stream::StreamSummary(*outcome->summary, outcome->chips, chunk_limit, sink,
                                           &outcome->counts));
    trailer.set_summary_rows(rows);
    outcome->summary.reset();
  }
  for (const std::string& w : outcome->warnings) trailer.add_warnings(w);
  trailer.set_event_count(outcome->counts.events);
  trailer.set_kernel_count(outcome->counts.kernels);
  trailer.set_counter_sample_count(outcome->counts.counter_samples);
  trailer.set_actual_start_ns(outcome->actual_start_ns);
  trailer.set_actual_end_ns(outcome->actual_end_ns);
  trailer.set_empty_trace(empty_trace);
  trailer.set_xspace_bytes(outcome->xspace_bytes);
  if (!sink->Write(stream::EncodeTrailer(std::move(trailer), chunk_limit))) {
    return absl::CancelledError("the client went away before the trailer");
  }
  return absl::OkStatus();
}

absl::Status CaptureRunner::StreamXSpace(
    trace::ByteSource& xspace, const podprof::v1::HostInfo& host,
    const podprof::v1::CaptureOptions& options, size_t chunk_limit,
    const std::vector<podprof::v1::CounterSeries>* analyse_with, stream::ChunkSink* sink,
    CaptureOutcome* outcome, kernelprof::CaptureHolds* holds) {
  // The XSpace is read and streamed a device plane (a chip) at a time: a long capture's
  // timelines and counters never sit in memory whole.
  class Pieces final : public trace::PieceSink {
   public:
    Pieces(const podprof::v1::HostInfo& host, size_t limit,
           const std::vector<podprof::v1::CounterSeries>* analyse_with, stream::ChunkSink* sink,
           CaptureOutcome* outcome, kernelprof::CaptureHolds* holds)
        : host_(host),
          limit_(limit),
          analyse_with_(analyse_with),
          sink_(sink),
          outcome_(outcome),
          holds_(holds) {}
    absl::Status OnHost(const trace::Host& host) override {
      outcome_->chips = host.chips;
      if (analyse_with_ != nullptr) analyser_.emplace(host.chips, SampledSeries(*analyse_with_));
      sent_ = stream::StreamHost(HostInfoFor(host_, host), limit_, sink_, &outcome_->counts);
      return sent_;
    }
    absl::Status OnPlane(const trace::HostCapture& piece, size_t first_new_kernel) override {
      for (const trace::CounterSeries& s : piece.counters) {
        if (trace::IsPerfSeries(s.name)) holds_->perf_series[s.chip].insert(s.name);
      }
      holds_->device_events += DeviceEvents(piece, outcome_->chips);
      // An agent that analyses its host sends its blocks as the store keeps them, for the
      // aggregator to store undecoded.
      sent_ = stream::StreamPiece(piece, first_new_kernel, limit_, sink_, &outcome_->counts,
                                  /*columns=*/analyser_.has_value());
      if (sent_.ok() && analyser_) analyser_->Add(piece);
      return sent_;
    }
    const absl::Status& sent() const { return sent_; }
    // The host's summary; none when not asked for, or when a chip came in two pieces (the
    // aggregator then analyses the host itself, and says so).
    std::optional<analysis::HostSummary> Summary() {
      if (!analyser_) return std::nullopt;
      absl::StatusOr<analysis::HostSummary> s = analyser_->Finish();
      if (!s.ok()) {
        PODPROF_LOG(INFO) << "no summary of this host sent: " << s.status().message();
        return std::nullopt;
      }
      return std::move(*s);
    }

   private:
    const podprof::v1::HostInfo& host_;
    const size_t limit_;
    const std::vector<podprof::v1::CounterSeries>* const analyse_with_;
    stream::ChunkSink* const sink_;
    CaptureOutcome* const outcome_;
    kernelprof::CaptureHolds* const holds_;
    absl::Status sent_;
    std::optional<analysis::HostAnalyser> analyser_;
  };
  Pieces pieces(host, chunk_limit, analyse_with, sink, outcome, holds);
  trace::ReadOptions ropts;
  ropts.host_name = host.host_name();
  // A file the workload wrote names its host, as XProf reads it, where the agent knows none.
  if (ropts.host_name.empty() && absl::EndsWith(xspace.name(), ".xplane.pb")) {
    ropts.host_name = trace::HostNameFromPath(xspace.name());
  }
  // Sampled counters were shifted right by the scaling the capture asked for: shift them back.
  if (options.kernel_profiling())
    ropts.perf_counter_scaling = static_cast<int>(options.counter_scaling());
  absl::StatusOr<trace::HostCapture> rest = trace::ReadXSpaceInPieces(xspace, ropts, &pieces);
  if (!pieces.sent().ok()) return pieces.sent();  // the stream broke, not the file
  if (!rest.ok()) {
    return absl::DataLossError(absl::StrCat("unreadable XSpace from the workload: ", xspace.name(),
                                            ": ", rest.status().message()));
  }
  if (outcome->counts.events == 0) RETURN_IF_ERROR(NoEvents(outcome));
  // After the runner's own (a snapshot's, say), the capture's.
  outcome->warnings.insert(outcome->warnings.end(), rest->warnings.begin(), rest->warnings.end());
  holds->chips = outcome->chips;
  outcome->actual_start_ns = rest->host.profile_start_ns;
  outcome->actual_end_ns = rest->host.profile_stop_ns;
  outcome->summary = pieces.Summary();
  return absl::OkStatus();
}

}  // namespace podprof::agent
