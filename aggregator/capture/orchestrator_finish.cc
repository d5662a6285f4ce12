// The end of a pod capture, once every host's stream has ended (Orchestrator::StoreRun): the
// clock models refined by the collectives, each host's correction, a snapshot's stored window,
// the pod's analysis, the one write, and the summary posted to the capture's watchers. Apart
// from orchestrator.cc, which admits, dispatches and watches captures.
#include <grpcpp/grpcpp.h>
#include <malloc.h>

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/blocking_counter.h"
#include "aggregator/capture/capture_run.h"
#include "aggregator/capture/host_stream.h"
#include "aggregator/capture/orchestrator.h"
#include "aggregator/capture/stored_options.h"
#include "analysis/host_summary.h"
#include "common/checked.h"
#include "common/logging.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "ingest/capture_ingest.h"
#include "kernelprof/options.h"
#include "proto/grpc_status.h"
#include "stream/capture_decoder.h"

namespace podprof::aggregator {

namespace v1 = podprof::v1;

// The snapshot's stored window and its label: the window its hosts' profilers covered, as
// their trailers say, put on the aggregator's clock. A host whose window starts in the second
// half of the look-back or later captured from the request on; one that starts earlier gave its
// ring. While every host gave its ring the planned window (ending at the request) stays; once
// any captured after the request, the stored window is the span of the hosts' windows, so that
// it covers the events stored under it.
void Orchestrator::SnapshotWindow(CaptureRun& run,
                                  const std::vector<std::unique_ptr<HostStream>>& hosts,
                                  const std::map<std::string, const HostCorrection*>& correction_of,
                                  storage::CaptureWrite* w) {
  const int64_t duration_ns = static_cast<int64_t>(run.request.duration_ms()) * 1'000'000;
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  int before = 0, after = 0;
  for (const auto& h : hosts) {
    auto c = correction_of.find(h->host());
    if (!h->ok() || c == correction_of.end() || h->actual_start_ns() <= 0 ||
        h->actual_end_ns() <= h->actual_start_ns()) {
      continue;
    }
    const int64_t start = h->actual_start_ns() - c->second->offset_ns;
    const int64_t end = h->actual_end_ns() - c->second->offset_ns;
    lo = std::min(lo, start);
    hi = std::max(hi, end);
    ++(start >= run.requested_ns - duration_ns / 2 ? after : before);
  }
  if (after > 0) {
    run.window = before > 0 ? kMixedWindows : kAfterRequest;
    w->start_ns = lo;
    w->end_ns = hi;
  } else if (before > 0) {
    run.window = kBeforeRequest;
    w->start_ns = run.requested_ns - duration_ns;
    w->end_ns = run.requested_ns;
  }
  // No host delivered a window: the planned one and its label stay.
  w->labels[kWindowLabel] = run.window;
}

// Long: the end of a capture in order (each host's clock correction from the probes, refined
// by the collectives, then the pod's rows and its write), each step reading what the one
// before left.
void Orchestrator::StoreRun(CaptureRun& run, std::vector<std::unique_ptr<HostStream>>& hosts) {
  const int64_t duration_ns = static_cast<int64_t>(run.request.duration_ms()) * 1'000'000;
  // Probe-only corrections at the window's middle, then the collectives.
  const int64_t mid = run.start_ns + duration_ns / 2;
  const int64_t begin_ns = clock_.MonotonicNs();
  std::vector<HostCorrection> probe;
  std::map<std::string, CollectiveEndList> ends;
  for (const auto& h : hosts) {
    if (!h->ok()) continue;
    HostCorrection c;
    c.host = h->host();
    ClockEstimate est;
    registry_->Estimate(c.host, mid, &est);
    c.probe_offset_ns = c.offset_ns = est.offset_ns;
    c.uncertainty_ns = est.uncertainty_ns;
    c.drift_ppb = est.drift_ppb;
    probe.push_back(c);
    ends[c.host] = std::move(h->collective_ends());
  }
  size_t end_bytes = 0;
  for (const auto& [host, list] : ends) end_bytes += list.capacity() * sizeof(list[0]);
  std::vector<HostCorrection> corrections = RefineWithCollectives(ends, probe, mid);
  ends.clear();
  const int64_t aligned_ns = clock_.MonotonicNs();
  std::map<std::string, const HostCorrection*> correction_of;
  for (const HostCorrection& c : corrections) correction_of[c.host] = &c;

  storage::CaptureWrite w;
  w.id = run.id;
  w.start_ns = run.start_ns;
  w.end_ns = run.start_ns + duration_ns;
  w.created_ns = clock_.NowNs();
  w.labels = LabelsToStore(run.request);
  w.options_json = StoredOptionsJson(run.request);
  if (run.request.snapshot()) {
    w.source = storage::CaptureSource::kSnapshot;
    SnapshotWindow(run, hosts, correction_of, &w);
  }
  run.stored_start_ns = w.start_ns;
  run.stored_end_ns = w.end_ns;
  std::vector<ingest::AnalysedHost> analysed;
  absl::Status stored = absl::OkStatus();
  int ok = 0;
  for (const auto& h : hosts) {
    ingest::AnalysedHost a;
    if (h->ok() && h->analysed().ok()) {
      ++ok;
      a = std::move(*h->analysed());
      const HostCorrection& c = *correction_of.at(h->host());
      ingest::SetHostClock({c.offset_ns, c.drift_ppb, mid}, &a);
      a.write.clock_uncertainty_ns = c.uncertainty_ns;
    } else if (h->ok()) {
      // The store refused this host's rows (written ahead in a transaction of their own, so
      // nothing of it is left): that host fails with the store's reason, and the others are
      // stored. One host's bad row lost every host's data before.
      a.write.status = storage::HostOutcome::kFailed;
      a.write.error = absl::StrCat("storing the host failed: ", h->analysed().status().message());
    } else {
      a.write.status = storage::HostOutcome::kFailed;
      a.write.error = h->error();
    }
    a.write.host = h->host();
    a.write.slice = h->slice();
    a.write.bytes = h->bytes();
    analysed.push_back(std::move(a));
  }
  using storage::CaptureState;
  w.state = ok == static_cast<int>(hosts.size()) ? CaptureState::kComplete
            : ok > 0                             ? CaptureState::kPartial
                                                 : CaptureState::kFailed;
  if (run.cancelled) w.state = CaptureState::kCancelled;
  const CaptureState state = w.state;
  if (stored.ok())
    stored = ingest::WriteAnalysed(*writer_, std::move(w), std::move(analysed), &run.pod);
  if (!stored.ok()) {
    // The capture's last write failed: it ends `failed` now, with the reason in its progress
    // and the log (PostSummary), rather than staying `running` until a restart marks it
    // interrupted.
    if (absl::Status ended = writer_->EndFailed(run.id); !ended.ok()) {
      PODPROF_LOG(ERROR) << "capture " << run.id << " could not be marked failed: " << ended;
    }
  }
  // The hosts that delivered were alive when their streams ended; while the pod's capture was
  // being stored their heartbeats may have queued behind the ingest (a busy aggregator on few
  // cores), and they must not miss the next capture for that.
  for (const auto& h : hosts) {
    if (h->ok()) registry_->Touch(h->host());
  }
  PostSummary(run, hosts, corrections, state, stored);
  // What the pod cost after its last host: an operator's first question when captures land
  // late.
  PODPROF_LOG(INFO) << "capture " << run.id << " " << storage::CaptureStateName(state) << ": " << ok
                    << "/" << hosts.size() << " hosts; aligned in "
                    << (aligned_ns - begin_ns) / 1'000'000 << " ms (collective ends "
                    << end_bytes / 1'000'000 << " MB), analysed and stored in "
                    << (clock_.MonotonicNs() - aligned_ns) / 1'000'000 << " ms";
  {
    absl::MutexLock lock(&run.mu);
    run.done = true;
    run.cv.SignalAll();
  }
  // Ingest allocates and frees hundreds of MB in bursts across many threads; give the freed
  // pages back to the system instead of letting each capture's high-water mark linger. After
  // the capture is reported done: trimming a large heap takes a while.
  hosts.clear();
  malloc_trim(0);
}

void Orchestrator::PostSummary(CaptureRun& run,
                               const std::vector<std::unique_ptr<HostStream>>& hosts,
                               const std::vector<HostCorrection>& corrections,
                               storage::CaptureState state, const absl::Status& stored) {
  v1::CaptureProgress last;
  last.set_done(true);
  last.set_percent_complete(100);
  auto* summary = last.mutable_summary();
  summary->set_capture_id(run.id);
  summary->set_start_ns(run.stored_start_ns);
  summary->set_end_ns(run.stored_end_ns);
  if (run.request.snapshot()) summary->set_window(run.window);
  *summary->mutable_options() = run.request.options();
  for (const HostCorrection& c : corrections) {
    auto* h = summary->add_hosts();
    h->set_host_name(c.host);
    h->set_status(v1::CAPTURE_STATUS_COMPLETE);
    h->set_clock_offset_ns(c.offset_ns);
    h->set_clock_uncertainty_ns(c.uncertainty_ns);
    h->set_probe_clock_offset_ns(c.probe_offset_ns);
    h->set_collectives_matched(static_cast<uint32_t>(c.collectives));
    for (const auto& s : hosts) {
      if (s->host() != c.host) continue;
      h->set_event_count(s->events());
      h->set_bytes_received(s->bytes());
      h->set_analysed_by(s->analysed_by());
      for (const std::string& w : s->warnings()) h->add_warnings(w);
    }
    if (!c.refined) {
      h->add_warnings(
          "clock from probes only: no collective matched (a CPU device's are not used)");
    }
  }
  uint64_t events = 0;
  for (const auto& s : hosts) events += s->events();
  summary->set_event_count(events);
  for (const auto& s : hosts) {
    if (s->ok()) continue;
    auto* h = summary->add_hosts();
    h->set_host_name(s->host());
    h->set_status(v1::CAPTURE_STATUS_FAILED);
    h->set_error_message(s->error());
    h->set_event_count(s->events());
    h->set_bytes_received(s->bytes());
  }
  v1::CaptureStatus code = state == storage::CaptureState::kComplete  ? v1::CAPTURE_STATUS_COMPLETE
                           : state == storage::CaptureState::kPartial ? v1::CAPTURE_STATUS_PARTIAL
                           : state == storage::CaptureState::kCancelled
                               ? v1::CAPTURE_STATUS_CANCELLED
                               : v1::CAPTURE_STATUS_FAILED;
  if (!stored.ok()) {
    code = v1::CAPTURE_STATUS_FAILED;
    summary->set_error_message(absl::StrCat("storing the capture failed: ", stored.message()));
    PODPROF_LOG(ERROR) << "capture " << run.id << ": " << stored.message();
  }
  last.set_status(code);
  summary->set_status(code);
  run.Post(last, clock_);
}

}  // namespace podprof::aggregator
