#include "aggregator/capture/orchestrator.h"

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
#include "aggregator/capture/stored_options.h"
#include "analysis/host_summary.h"
#include "common/checked.h"
#include "common/logging.h"
#include "common/parallel.h"
#include "common/status_macros.h"
#include "ingest/capture_ingest.h"
#include "kernelprof/options.h"
#include "proto/grpc_status.h"
#include "proto/recorder_states.h"
#include "stream/capture_decoder.h"

namespace podprof::aggregator {
namespace {

namespace v1 = podprof::v1;

// Probes in the bursts right before and after a capture (the fastest bounds these hosts'
// offsets for this very window).
constexpr int kCaptureBurst = 8;
// Start lead per host for dispatching its Capture call (stream, the agent's setup): the least
// allowed, and the first capture's until one has measured it on this aggregator (see
// Orchestrator::dispatch_per_host_ns_; 256 hosts on a busy 2-core machine measured 3-6 ms).
constexpr int64_t kDispatchPerHostNs = 1'000'000;
constexpr int64_t kFirstDispatchPerHostNs = 4'000'000;
// Threads that send a capture's requests side by side: each request wakes an agent, and on a
// busy machine the woken agents take the CPU from a single sender, so a pod's last requests
// would reach their agents after the start instant.
constexpr int kDispatchThreads = 16;

// A slice asked for that none of the selected agents is in fails the capture, naming it: a
// capture of "slices 0 and 2" that quietly holds only slice 0 would mislead whoever compares
// the slices.
absl::Status CheckEverySliceSelected(const std::vector<int>& slices,
                                     const std::vector<Registry::Handle>& hosts) {
  for (const int slice : slices) {
    if (std::none_of(hosts.begin(), hosts.end(),
                     [slice](const Registry::Handle& h) { return h.slice == slice; })) {
      return absl::FailedPreconditionError(
          absl::StrCat("slice ", slice,
                       " has no online agent matching the capture (`podprof agents` shows each "
                       "agent's slice)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

Orchestrator::~Orchestrator() {
  std::map<std::string, std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, run] : runs_) {
      absl::MutexLock l(&run->mu);
      run->Cancel();
    }
    threads.swap(threads_);
  }
  for (auto& [id, t] : threads) t.join();
}

void Orchestrator::PruneLocked() {
  // A finished capture's thread has returned or is returning: join it now rather than keep
  // its stack until shutdown (a week of captures would otherwise hold thousands).
  std::vector<std::string> done;
  for (const auto& [id, run] : runs_) {
    absl::MutexLock l(&run->mu);
    if (run->done) done.push_back(id);
  }
  for (const std::string& id : done) {
    auto t = threads_.find(id);
    if (t != threads_.end()) {
      t->second.join();
      threads_.erase(t);
    }
  }
  // Ids start with the creation time in ms, so the oldest come first.
  for (size_t i = 0; i + kKeptFinishedRuns < done.size(); ++i) runs_.erase(done[i]);
}

absl::StatusOr<v1::StartCaptureResponse> Orchestrator::Start(const v1::StartCaptureRequest& req) {
  // The ms fields are compared with the limits before any multiply: duration_ms = 2^58 + 1000
  // wrapped to 1 s once in ns and passed the duration limit. Every later use of the request's
  // duration and delay (CollectHosts, the deadlines) relies on this check. Refused before any
  // agent is asked: a capture this long would be cut or lost later.
  RETURN_IF_ERROR(CheckCaptureDurationMs(req.duration_ms(), limits_.max_duration_ns, "aggregator"));
  if (req.delay_ms() > static_cast<uint64_t>(limits_.max_delay_ns / 1'000'000)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "delay_ms must be at most ", limits_.max_delay_ns / 1'000'000, ", got ", req.delay_ms()));
  }
  const int64_t duration_ns = static_cast<int64_t>(req.duration_ms()) * 1'000'000;  // in range
  if (req.snapshot() && req.delay_ms() != 0) {
    return absl::InvalidArgumentError("a snapshot looks back from now: delay_ms must be 0");
  }
  if (req.start_ns() != 0 && (req.snapshot() || req.delay_ms() != 0)) {
    return absl::InvalidArgumentError(
        "start_ns names the window's start: it cannot come with delay_ms or snapshot");
  }
  // Negative first: start_ns - now would overflow for one near INT64_MIN.
  if (const int64_t now_ns = clock_.NowNs();
      req.start_ns() < 0 || req.start_ns() - now_ns > limits_.max_delay_ns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start_ns must lie within ", limits_.max_delay_ns / 1'000'000, " ms from now, got ",
        req.start_ns(),
        req.start_ns() < 0
            ? ""
            : absl::StrCat(" (", (req.start_ns() - now_ns) / 1'000'000, " ms from now)")));
  }
  if (req.host_names_size() > limits_.max_hosts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "at most ", limits_.max_hosts, " hosts per capture, got ", req.host_names_size()));
  }
  if (req.slices_size() > limits_.max_hosts) {
    return absl::InvalidArgumentError(absl::StrCat("at most ", limits_.max_hosts,
                                                   " slices per capture, got ", req.slices_size()));
  }
  for (const int slice : req.slices()) {
    if (slice < 0) return absl::InvalidArgumentError(absl::StrCat("slice ", slice, " is negative"));
  }
  for (const std::string& h : req.host_names()) {
    if (h.empty() || h.size() > 253) {
      return absl::InvalidArgumentError(
          absl::StrCat("host name of ", h.size(), " bytes: names are 1..253 bytes"));
    }
  }
  if (req.labels_size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most 64 labels per capture, got ", req.labels_size()));
  }
  for (const auto& [k, v] : req.labels()) {
    if (k.empty() || k.size() > 256 || v.size() > 4096) {
      return absl::InvalidArgumentError(
          "label keys must be 1..256 bytes and values at most 4096 bytes");
    }
  }
  if (req.has_cause()) {
    if (!req.snapshot()) {
      return absl::InvalidArgumentError("a cause is a snapshot's: it cannot come without snapshot");
    }
    for (const auto& [k, v] : CauseLabels(req.cause())) {
      if (v.size() > 4096) {
        return absl::InvalidArgumentError(
            absl::StrCat("the cause's ", k, " is ", v.size(), " bytes: at most 4096"));
      }
    }
  }
  // Refused here, before any agent is asked, so that a bad option cannot fail a pod of hosts.
  if (absl::Status s = kernelprof::ValidateCaptureOptions(req.options()); !s.ok()) return s;
  if (absl::Status admitted = Admit(); !admitted.ok()) return admitted;
  absl::StatusOr<v1::StartCaptureResponse> started = StartAdmitted(req, duration_ns);
  EndAdmission();
  return started;
}

absl::Status Orchestrator::Admit() {
  // A rolling minute of starts, and the captures running or being started.
  const int64_t now = clock_.NowNs();
  absl::MutexLock lock(&mu_);
  while (!recent_starts_.empty() && now - recent_starts_.front() > 60'000'000'000) {
    recent_starts_.pop_front();
  }
  if (static_cast<int>(recent_starts_.size()) >= limits_.max_starts_per_minute) {
    return absl::ResourceExhaustedError(
        absl::StrCat("more than ", limits_.max_starts_per_minute,
                     " StartCapture calls in the last minute; try again later"));
  }
  int running = admitted_;
  for (const auto& [id, run] : runs_) {
    absl::MutexLock rl(&run->mu);
    running += !run->done;
  }
  if (running >= limits_.max_concurrent) {
    return absl::ResourceExhaustedError(absl::StrCat(
        running, " captures are running, the most allowed at once; wait for one to end"));
  }
  // Every admitted call counts in the minute, also one that then finds no agent: the limit
  // defends against a flood of calls, whatever becomes of them.
  recent_starts_.push_back(now);
  ++admitted_;
  return absl::OkStatus();
}

void Orchestrator::EndAdmission() {
  absl::MutexLock lock(&mu_);
  --admitted_;
}

std::vector<std::string> Orchestrator::HostsWithoutRecorder(
    const std::vector<Registry::Handle>& hosts) {
  std::map<std::string, v1::RecorderStatus> recorders;
  for (const v1::AgentStatus& a : registry_->List({})) {
    recorders[a.host().host_name()] = a.recorder();
  }
  std::vector<std::string> out;
  for (const Registry::Handle& h : hosts) {
    const v1::RecorderStatus& r = recorders[h.host];
    if (v1::RecorderStateOf(r) == v1::RECORDER_STATE_ARMED) continue;
    const std::string said = v1::RecorderStateText(r);
    const std::string state = said.empty() ? "no recorder reported" : said;
    out.push_back(r.reason().empty() ? absl::StrCat(h.host, " (", state, ")")
                                     : absl::StrCat(h.host, " (", state, ": ", r.reason(), ")"));
  }
  return out;
}

absl::Status Orchestrator::PlanSnapshotWindow(CaptureRun& run, int64_t now, int64_t duration_ns) {
  // A snapshot looks back from the agents' rings: its window ends now, on every host at
  // once. A host without an armed recorder has no past to give, so the pod is captured from
  // the planned instant on instead, every host alike (one window, which the pod's
  // collective alignment needs), and stored and labelled as that window: a snapshot stored
  // as the seconds before a request while it held the seconds after it misled (#53).
  const std::vector<std::string> unarmed = HostsWithoutRecorder(run.hosts);
  if (unarmed.empty()) {
    run.window = kBeforeRequest;
    run.start_ns = now - duration_ns;
  } else if (limits_.refuse_snapshot_without_recorder) {
    std::string names;
    for (size_t i = 0; i < unarmed.size() && i < 8; ++i) {
      absl::StrAppend(&names, i == 0 ? "" : ", ", unarmed[i]);
    }
    if (unarmed.size() > 8) absl::StrAppend(&names, " and ", unarmed.size() - 8, " more");
    return absl::FailedPreconditionError(absl::StrCat(
        "snapshot refused ([snapshots] without_recorder = \"refuse\"): no flight recorder "
        "armed on ",
        unarmed.size(), " of ", run.hosts.size(), " hosts: ", names,
        "; arm one with [recorder] enabled = true in each agent's configuration "
        "(docs/RECORDER.md), or take a capture from now on (podprof capture)"));
  } else {
    run.window = kAfterRequest;  // start_ns stays the pod's instant, the lead from now
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::StartCaptureResponse> Orchestrator::StartAdmitted(
    const v1::StartCaptureRequest& req, int64_t duration_ns) {
  std::vector<std::string> missing;
  const std::vector<int> slices(req.slices().begin(), req.slices().end());
  std::vector<Registry::Handle> hosts = registry_->Select(
      {req.host_names().begin(), req.host_names().end()},
      {req.label_selector().begin(), req.label_selector().end()}, &missing, slices);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("host ", missing[0], " is not an online agent",
                     slices.empty() ? "" : " in the slices asked for"));
  }
  RETURN_IF_ERROR(CheckEverySliceSelected(slices, hosts));
  if (hosts.empty()) return absl::FailedPreconditionError("no online agent matches the capture");
  auto run = std::make_shared<CaptureRun>();
  const int64_t now = clock_.NowNs();
  run->id = absl::StrFormat("cap-%d-%04x", now / 1'000'000, static_cast<unsigned>(now % 65536));
  run->request = req;
  run->hosts = std::move(hosts);
  run->pod.ExpectHosts(run->hosts.size());
  // Far enough ahead for the slowest agent to hear about it, with room for the pre-probes.
  // The pre-capture probe burst runs first, one agent after another: leave room for it.
  // Each host costs the pre-capture probe burst (a probe takes at least 100 us end to end on a
  // busy aggregator, whatever its round trip) and the dispatch of its Capture call; measured on
  // 256 hosts over 2 cores, about 2 ms per host in all, so budget 3 ms.
  int64_t lead = limits_.min_lead_ns, probe_time = 0;
  for (const auto& h : run->hosts) {
    ClockEstimate e;
    if (registry_->Estimate(h.host, now, &e)) {
      lead = std::max(lead, 20 * e.min_rtt_ns);
      probe_time += 3 * kCaptureBurst * std::max<int64_t>(e.min_rtt_ns, 100'000);
    }
  }
  lead += probe_time + static_cast<int64_t>(run->hosts.size()) * dispatch_per_host_ns_.load();
  run->start_ns = now + std::max<int64_t>(lead, int64_t{req.delay_ms()} * 1'000'000);
  if (req.start_ns() != 0) {
    // Asked for an instant (a step boundary): moving it would defeat the point.
    if (req.start_ns() < now + lead) {
      return absl::FailedPreconditionError(absl::StrCat(
          "start_ns is ", (req.start_ns() - now) / 1'000'000, " ms from now; the aggregator needs ",
          (lead + 999'999) / 1'000'000, " ms to reach the capture's ", run->hosts.size(),
          " hosts: ask further ahead"));
    }
    run->start_ns = req.start_ns();
  }
  run->requested_ns = now;
  if (req.snapshot()) RETURN_IF_ERROR(PlanSnapshotWindow(*run, now, duration_ns));
  // On record before it starts: if this process dies mid-capture, the next one marks it
  // interrupted instead of it silently missing.
  storage::CaptureWrite header;
  header.id = run->id;
  header.start_ns = run->start_ns;
  header.end_ns = run->start_ns + duration_ns;
  header.created_ns = now;
  header.labels = LabelsToStore(req);
  header.options_json = StoredOptionsJson(req);
  if (req.snapshot()) {
    header.source = storage::CaptureSource::kSnapshot;
    header.labels[kWindowLabel] = run->window;
  }
  if (absl::Status s = writer_->BeginCapture(header); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot record the capture: ", s.message()));
  }
  v1::StartCaptureResponse resp;
  resp.set_capture_id(run->id);
  resp.set_start_ns(run->start_ns);
  for (const auto& h : run->hosts) resp.add_host_names(h.host);
  absl::MutexLock lock(&mu_);
  PruneLocked();
  runs_[run->id] = run;
  threads_.emplace(run->id, std::thread([this, run] { Execute(run); }));
  return resp;
}

Orchestrator::Orchestrator(Registry* registry, storage::CaptureWriter* writer, Clock& clock,
                           OrchestratorLimits limits)
    : registry_(registry),
      writer_(writer),
      clock_(clock),
      limits_(limits),
      stream_budget_(limits.max_stream_bytes),
      streams_(limits.ingest_workers, limits.max_active_hosts),
      dispatch_per_host_ns_(kFirstDispatchPerHostNs) {}

// Long: the capture's dispatch in time order (a stream per host, the connections made within
// half the lead, every request sent, the streams waited for), the steps sharing the run's
// deadlines.
void Orchestrator::CollectHosts(CaptureRun& run, std::vector<std::unique_ptr<HostStream>>* hosts) {
  const int64_t duration_ns = static_cast<int64_t>(run.request.duration_ms()) * 1'000'000;
  absl::BlockingCounter left(static_cast<int>(run.hosts.size()));
  {
    absl::MutexLock lock(&run.mu);
    run.stage.assign(run.hosts.size(), CaptureRun::kNone);
    run.contexts.assign(run.hosts.size(), nullptr);
  }
  for (size_t i = 0; i < run.hosts.size(); ++i) {
    hosts->push_back(std::make_unique<HostStream>(run, i, *registry_, *writer_, clock_, left,
                                                  limits_.max_host_stream_bytes, stream_budget_));
  }
  // Connections are made when agents register and kept; one that is not ready yet (an agent
  // that just came back) is given until half the lead has passed, all of them together, so a
  // few slow handshakes cannot make every request late.
  const auto connect_by =
      std::chrono::system_clock::now() +
      std::chrono::nanoseconds(std::max<int64_t>(0, run.start_ns - clock_.NowNs()) / 2);
  // Every handshake is started before any is waited for: while this thread waits for one, its
  // polling moves the others along, so the wait is the slowest handshake, not their sum.
  std::vector<const Registry::Handle*> connecting;
  for (const Registry::Handle& h : run.hosts) {
    if (h.channel != nullptr && h.channel->GetState(true) != GRPC_CHANNEL_READY) {
      connecting.push_back(&h);
    }
  }
  for (const Registry::Handle* h : connecting) {
    if (run.cancelled) break;
    h->channel->WaitForConnected(connect_by);
  }
  if (!connecting.empty()) {
    PODPROF_LOG(INFO) << "capture " << run.id << ": " << connecting.size() << " of "
                      << run.hosts.size() << " agent connections were not ready";
  }
  // Every call runs from dispatch until its host's data is in, and at most
  // `max_active_hosts` hosts stream at once: the others wait their turn, a wave per that many
  // hosts ahead of them. So a host's allowance is a minute (or three windows) for itself plus
  // a window and a second per wave; a 2,240-host pod in waves of 16 gets 140 more windows.
  const int64_t waves =
      static_cast<int64_t>(run.hosts.size()) / std::max<int64_t>(1, limits_.max_active_hosts);
  const int64_t stream_ns =
      std::max<int64_t>(60'000'000'000, 3 * duration_ns) + waves * (duration_ns + 1'000'000'000);
  const int64_t dispatch_begin_ns = clock_.MonotonicNs();
  auto dispatch = [&](size_t i) {
    const Registry::Handle& h = run.hosts[i];
    ClockEstimate est;
    registry_->Estimate(h.host, run.start_ns, &est);
    v1::CaptureRequest req;
    req.set_capture_id(run.id);
    req.set_host_name(h.host);
    req.set_start_ns(run.start_ns + est.offset_ns);  // the instant on the agent's clock
    req.set_duration_ms(run.request.duration_ms());
    req.set_counter_interval_ms(run.request.counter_interval_ms());
    req.set_max_chunk_bytes(static_cast<uint64_t>(registry_->max_chunk_bytes()));
    // The agent analyses its own host when it computes the version merged here; an older
    // agent ignores the field and the host is analysed as its stream ends.
    req.set_analysis_version(analysis::kAnalysisVersion);
    req.set_snapshot(run.request.snapshot());
    *req.mutable_options() = run.request.options();
    auto ctx = std::make_shared<grpc::ClientContext>();
    ctx->set_deadline(DeadlineAt(clock_.NowNs(), (run.start_ns - clock_.NowNs()) + stream_ns));
    {
      absl::MutexLock lock(&run.mu);
      run.contexts[i] = ctx;
      if (run.cancelled) ctx->TryCancel();
    }
    (*hosts)[i]->Waiting();
    streams_.Start(h.stub.get(), std::move(ctx), req, (*hosts)[i].get());
  };
  ParallelFor(run.hosts.size(), kDispatchThreads, dispatch);
  // The next capture's lead allows twice what a request took here, per host (never less than
  // the default): a pod on a busy aggregator learns its own dispatch time.
  const int64_t per_host_ns =
      (clock_.MonotonicNs() - dispatch_begin_ns) / static_cast<int64_t>(run.hosts.size());
  dispatch_per_host_ns_ = std::max<int64_t>(kDispatchPerHostNs, 2 * per_host_ns);
  const int64_t lead_left_ns = run.start_ns - clock_.NowNs();
  if (run.window == kBeforeRequest) {
    PODPROF_LOG(INFO) << "snapshot " << run.id << ": " << run.hosts.size()
                      << " requests sent for the " << duration_ns / 1'000'000 << " ms before "
                      << "now";
  } else if (lead_left_ns < 0) {
    PODPROF_LOG(WARNING) << "capture " << run.id << ": requests sent " << -lead_left_ns / 1'000'000
                         << " ms after the start instant; agents will refuse a late start";
  } else {
    PODPROF_LOG(INFO) << "capture " << run.id << ": " << run.hosts.size() << " requests sent, "
                      << lead_left_ns / 1'000'000 << " ms before the start";
  }
  // The agents capture and convert without a word: the instants say when each stage begins.
  auto advance_all = [&](CaptureRun::Stage to, const char* detail) {
    for (size_t i = 0; i < run.hosts.size(); ++i) {
      v1::CaptureProgress p;
      p.mutable_host()->set_host_name(run.hosts[i].host);
      p.mutable_host()->set_status(v1::CAPTURE_STATUS_RUNNING);
      p.set_detail(detail);
      run.Advance(i, to, p, clock_);
    }
  };
  if (clock_.SleepUntilNs(run.start_ns, &run.stop))
    advance_all(CaptureRun::kCapturing, "capturing");
  if (clock_.SleepUntilNs(run.start_ns + duration_ns, &run.stop)) {
    advance_all(CaptureRun::kConverting, "converting");
  }
  left.Wait();
}

void Orchestrator::Execute(std::shared_ptr<CaptureRun> run) {
  registry_->ProbeDue(kCaptureBurst, /*force=*/true);  // a fresh burst right before the window
  PODPROF_LOG(INFO) << "capture " << run->id << ": probed, "
                    << (run->start_ns - clock_.NowNs()) / 1'000'000 << " ms before the start";
  std::vector<std::unique_ptr<HostStream>> hosts;
  CollectHosts(*run, &hosts);
  registry_->ProbeDue(kCaptureBurst, /*force=*/true);  // and right after it
  StoreRun(*run, hosts);
}

absl::Status Orchestrator::Watch(const std::string& id,
                                 const std::function<bool(const v1::CaptureProgress&)>& send,
                                 const std::function<bool()>& cancelled) {
  std::shared_ptr<CaptureRun> run;
  {
    absl::MutexLock lock(&mu_);
    auto it = runs_.find(id);
    if (it == runs_.end()) {
      return absl::NotFoundError(absl::StrCat("no running or recent capture \"", id, "\""));
    }
    run = it->second;
  }
  size_t sent = 0;
  while (true) {
    std::vector<v1::CaptureProgress> batch;
    bool done;
    {
      absl::MutexLock lock(&run->mu);
      if (!run->done && run->log.size() <= sent)
        run->cv.WaitWithTimeout(&run->mu, absl::Milliseconds(100));
      batch.assign(run->log.begin() + static_cast<long>(sent), run->log.end());
      done = run->done;
    }
    for (const auto& p : batch) {
      if (!send(p)) return absl::CancelledError("the watcher went away");
      ++sent;
    }
    if (done && batch.empty()) return absl::OkStatus();
    if (cancelled()) return absl::CancelledError("the watcher went away");
  }
}

absl::StatusOr<v1::CaptureStatus> Orchestrator::Cancel(const std::string& id) {
  std::shared_ptr<CaptureRun> run;
  {
    absl::MutexLock lock(&mu_);
    auto it = runs_.find(id);
    if (it == runs_.end()) return absl::NotFoundError(absl::StrCat("no capture \"", id, "\""));
    run = it->second;
  }
  absl::MutexLock lock(&run->mu);
  if (run->done) {
    // Already over: the state it ended in, which its last progress event (the summary) holds.
    return run->log.empty() ? v1::CAPTURE_STATUS_COMPLETE : run->log.back().status();
  }
  run->Cancel();
  return v1::CAPTURE_STATUS_CANCELLED;
}

}  // namespace podprof::aggregator
