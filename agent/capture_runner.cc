#include "agent/capture_runner.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "agent/runtime_status.h"
#include "agent/workload_channel.h"
#include "agent/xspace_merge.h"
#include "common/checked.h"
#include "common/errno_status.h"
#include "common/logging.h"
#include "common/periodic.h"
#include "common/status_macros.h"
#include "kernelprof/options.h"
#include "proto/grpc_status.h"
#include "trace/byte_source.h"

namespace podprof::agent {

// The most a flight-recorder freeze's join may take once parsed, in bytes of the ring's bound
// (recorder.max_bytes): real windows parse to about 3 times their bytes (docs/RELIABILITY.md).
constexpr uint64_t kJoinBytesPerRingByte = 4;
namespace {

namespace fs = std::filesystem;
namespace rt = tpu::monitoring::runtime;

// A start instant this far in the past when the request arrives is a late start: the
// window would not be the one the aggregator asked for.
constexpr int64_t kLateToleranceNs = 50'000'000;

// Runtime metrics sampled during a capture, with their units.
const std::pair<const char*, const char*> kSampledMetrics[] = {
    {tpu_metrics::kDutyCyclePercent, "percent"},
    {tpu_metrics::kHbmUsageBytes, "bytes"},
};

constexpr char kCaptureDirPrefix[] = "podprof-capture-";
constexpr char kOwnerFile[] = "agent.pid";

// Removes a directory tree when it goes out of scope.
class TempDir {
 public:
  static absl::StatusOr<std::unique_ptr<TempDir>> Make(const std::string& parent) {
    std::string pattern = absl::StrCat(parent, "/", kCaptureDirPrefix, "XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) {
      return ErrnoToStatus(errno, absl::StrCat("cannot make a temporary directory in ", parent));
    }
    // Whose it is, so a later agent can tell a crashed one's leftovers from a live capture.
    std::ofstream(pattern + "/" + kOwnerFile) << getpid() << "\n";
    return std::unique_ptr<TempDir>(new TempDir(pattern));
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

absl::Status FromWorkload(const grpc::Status& s, const std::string& address, int64_t deadline_ns) {
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(
          absl::StrCat("workload profiler at ", address, " is unreachable: ", s.error_message()));
    case grpc::StatusCode::ALREADY_EXISTS:
      return absl::AlreadyExistsError(
          absl::StrCat("workload profiler at ", address, " is busy: ", s.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(absl::StrCat("workload profiler at ", address,
                                                      " did not answer within ",
                                                      deadline_ns / 1'000'000'000, " s"));
    default:
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                          absl::StrCat("workload profiler at ", address, ": ", s.error_message()));
  }
}

using ProfilerStub = tensorflow::ProfilerService::StubInterface;

// As XProf's client waits for a session: max(60 s, 2 x duration) after its start (60 s is
// [capture] workload_timeout).
int64_t WaitNs(const tensorflow::ProfileRequest& preq, int64_t timeout_ns, int64_t now_ns) {
  const int64_t duration_ns = static_cast<int64_t>(preq.opts().duration_ms()) * 1'000'000;
  const int64_t start_ns = static_cast<int64_t>(preq.opts().start_timestamp_ns());
  return std::max<int64_t>(timeout_ns, 2 * duration_ns) + std::max<int64_t>(0, start_ns - now_ns);
}

// One Profile call for the session `preq`, with WaitNs's deadline.
grpc::Status AskProfiler(ProfilerStub& stub, const tensorflow::ProfileRequest& preq,
                         int64_t timeout_ns, Clock& clock, tensorflow::ProfileResponse* presp) {
  grpc::ClientContext ctx;
  const int64_t now = clock.NowNs();
  ctx.set_deadline(DeadlineAt(now, WaitNs(preq, timeout_ns, now)));
  return stub.Profile(&ctx, preq, presp);
}

// After the profiler was found unreachable: a stub on a fresh channel that connected within
// kReconnectDeadlineNs, `preq`'s start moved to now when `asap`; or why the capture fails as
// unreachable after all (no connection, or one too late for the window's start).
absl::StatusOr<std::unique_ptr<ProfilerStub>> ReconnectProfiler(const Workload& workload,
                                                                Clock& clock, bool asap,
                                                                tensorflow::ProfileRequest* preq) {
  grpc::Channel* shared = workload.capture_channel != nullptr ? workload.capture_channel.get()
                                                              : workload.profiler_channel.get();
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                   ReconnectWorkload(workload.profiler_address, shared, clock, kReconnectDeadlineNs,
                                     kMaxCaptureResponseBytes));
  const int64_t now = clock.NowNs();
  const int64_t start_ns = static_cast<int64_t>(preq->opts().start_timestamp_ns());
  if (asap) {
    preq->mutable_opts()->set_start_timestamp_ns(static_cast<uint64_t>(now));
  } else if (now > start_ns + kLateToleranceNs) {
    return absl::UnavailableError(absl::StrCat("a fresh connection succeeded ",
                                               (now - start_ns) / 1'000'000,
                                               " ms after the window's start"));
  }
  PODPROF_LOG(INFO) << "reconnected to the workload profiler at " << workload.profiler_address;
  return tensorflow::ProfilerService::NewStub(channel);
}

// Samples the runtime metrics every interval on its own thread until stopped.
class MetricSampler {
 public:
  MetricSampler(Clock& clock, const Workload& workload, int64_t interval_ns, int64_t start_ns,
                int64_t end_ns)
      : clock_(clock), workload_(workload) {
    if (workload.metrics == nullptr) return;
    // From the window's start (or now) every interval, the last sample at or before its end.
    const int64_t first = std::max(start_ns, clock_.NowNs());
    if (first > end_ns) return;
    thread_ = std::make_unique<PeriodicThread>(
        clock_, first, [this, next = first, interval_ns, end_ns]() mutable {
          SampleOnce();
          next += interval_ns;
          return next <= end_ns ? std::optional<int64_t>(next) : std::nullopt;
        });
  }
  ~MetricSampler() { Stop(); }

  void Stop() {
    if (thread_ != nullptr) thread_->Stop();
  }
  // After Stop(): the series (one per chip and metric) and what went wrong.
  std::vector<podprof::v1::CounterSeries> Series() const {
    std::vector<podprof::v1::CounterSeries> out;
    for (const auto& [key, s] : series_) out.push_back(s);
    return out;
  }
  const std::string& error() const { return error_; }

 private:
  void SampleOnce() {
    const RuntimeMetrics& metrics = *workload_.metrics;
    for (size_t i = 0; i < metrics.size(); ++i) {
      for (const auto& [name, unit] : kSampledMetrics) {
        absl::StatusOr<std::vector<ChipValue>> values = metrics.ReadGauge(i, name);
        const int64_t t = clock_.NowNs();
        if (!values.ok()) {
          if (error_.empty()) {
            error_ = absl::StrCat("runtime metrics at ", metrics.address(i), " unavailable (", name,
                                  "): ", values.status().message());
          }
          continue;
        }
        for (const ChipValue& v : *values) {
          auto& series = series_[{v.chip, name}];
          if (series.name().empty()) {
            series.set_chip_ordinal(v.chip);
            series.set_name(name);
            series.set_unit(unit);
          }
          series.add_timestamp_ns(t);
          series.add_value(v.value);
        }
      }
    }
  }

  Clock& clock_;
  const Workload& workload_;
  std::unique_ptr<PeriodicThread> thread_;
  // Written by the sampler thread only; read after Stop() joined it.
  std::map<std::pair<int32_t, std::string>, podprof::v1::CounterSeries> series_;
  std::string error_;
};

}  // namespace

void CaptureCancel::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

bool CaptureCancel::cancelled() const {
  absl::MutexLock lock(&mu_);
  return cancelled_;
}

bool CaptureCancel::AwaitCancelOrClose() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &CaptureCancel::Decided));
  return cancelled_;
}

void CaptureCancel::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

namespace {

// A capture through the workload's own profiler needs its one session: an armed recorder lets
// go for the capture and is armed again after it (its ring starts anew).
class RecorderPause {
 public:
  explicit RecorderPause(Recorder* r)
      : recorder_(r != nullptr && r->state() == RecorderState::kArmed ? r : nullptr) {
    if (recorder_ != nullptr) recorder_->Disarm().IgnoreError();
  }
  ~RecorderPause() {
    if (recorder_ != nullptr) recorder_->Arm().IgnoreError();  // its driver re-arms on failure
  }
  RecorderPause(const RecorderPause&) = delete;
  RecorderPause& operator=(const RecorderPause&) = delete;

 private:
  Recorder* const recorder_;
};

}  // namespace

std::string SessionIdFor(const std::string& capture_id) {
  std::string s;
  for (char c : capture_id) {
    s.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_');
  }
  return s.empty() ? "capture" : s.substr(0, 100);
}

// Long: one capture's steps in the order they happen (checks, the wait for the start, the
// workload's profiler asked, its files read and streamed, the outcome), each short, sharing
// the cancellation and the outcome; splitting it is left for when the agent analyses (#37).
absl::Status CaptureRunner::Run(const podprof::v1::CaptureRequest& request,
                                const podprof::v1::HostInfo& host, const RunnerLimits& limits,
                                CaptureCancel* cancel, stream::ChunkSink* sink,
                                CaptureOutcome* outcome) {
  // An agent may be asked directly, not only by an aggregator that checked already.
  RETURN_IF_ERROR(
      CheckCaptureDurationMs(request.duration_ms(), limits.max_capture_duration_ns, "agent"));
  if (request.snapshot()) {
    outcome->no_events_ok = true;
    Recorder* r = workload_.recorder.get();
    const bool armed = r != nullptr && r->state() == RecorderState::kArmed;
    // A window that starts ahead: the aggregator found a host of the pod without an armed
    // recorder and asks every host for the window after the request, from one instant.
    const bool ahead = request.start_ns() > clock_.NowNs();
    if (armed && !ahead) return RunSnapshot(request, host, limits, sink, outcome);
    // The look-back is lost (or not asked for); the next best is the moment after the trigger.
    // Which window the host holds is said first: it changes what every figure means, where the
    // runtime status after it is detail.
    podprof::v1::CaptureRequest now = request;
    now.set_snapshot(false);
    now.set_start_ns(ahead ? request.start_ns() : 0);
    outcome->warnings.push_back(
        armed ? absl::StrCat("the pod's snapshot holds the ", request.duration_ms(),
                             " ms after the request (a host of the pod has no flight recorder "
                             "armed): this host's recorder was not used")
              : absl::StrCat("no flight recorder armed on this host (",
                             r == nullptr ? "[recorder] enabled is false" : r->reason(),
                             "): captured ", request.duration_ms(),
                             " ms from the request on instead of the window before it"));
    AddRuntimeStatus(outcome);
    return Run(now, host, limits, cancel, sink, outcome);
  }
  const int64_t duration_ns = static_cast<int64_t>(request.duration_ms()) * 1'000'000;
  const int64_t now = clock_.NowNs();
  // A start far past any clock would overflow the sums below (start + tolerance, + duration).
  constexpr int64_t kLatestStartNs = int64_t{1} << 62;  // the year 2116
  if (request.start_ns() > kLatestStartNs) {
    return absl::InvalidArgumentError(absl::StrCat("start_ns must be at most ", kLatestStartNs,
                                                   " (2116), got ", request.start_ns()));
  }
  if (request.start_ns() > 0 && now > request.start_ns() + kLateToleranceNs) {
    return absl::FailedPreconditionError(absl::StrCat("late start: the start instant passed ",
                                                      (now - request.start_ns()) / 1'000'000,
                                                      " ms before the request arrived"));
  }
  const int64_t start_ns = request.start_ns() > 0 ? request.start_ns() : now;
  absl::StatusOr<std::unique_ptr<TempDir>> repo = TempDir::Make(limits.temp_dir);
  if (!repo.ok()) return repo.status();
  const std::string session = SessionIdFor(request.capture_id());

  tensorflow::ProfileRequest preq;
  preq.set_repository_root((*repo)->path());
  preq.set_session_id(session);
  preq.set_host_name("podprof-agent");
  preq.set_duration_ms(request.duration_ms());
  auto* opts = preq.mutable_opts();
  opts->set_version(1);
  opts->set_session_id(session);
  opts->set_duration_ms(request.duration_ms());
  opts->set_start_timestamp_ns(static_cast<uint64_t>(start_ns));
  opts->set_host_tracer_level(
      request.options().host_tracer_level() != 0 ? request.options().host_tracer_level() : 2);
  // UNSPECIFIED: every tracer the workload has runs. A device type would switch the others
  // off (the GPU tracer returns none unless it is GPU or UNSPECIFIED), and the same agent
  // serves TPU, GPU and CPU workloads.
  opts->set_device_type(tensorflow::ProfileOptions::UNSPECIFIED);
  // The programs' HLO on `/host:metadata`, as XProf's own capture asks: op categories and
  // named scopes of JAX on CPU come only from it (trace/hlo_proto.h), and XProf's tools read it.
  opts->set_enable_hlo_proto(true);
  // Tracer levels and kernel-profiling settings, as the client asked: an agent may be asked
  // directly, not only through an aggregator that validated the request already.
  RETURN_IF_ERROR(kernelprof::FillProfileOptions(request.options(), opts));

  MetricSampler sampler(clock_, workload_, limits.counter_interval_ns, start_ns,
                        start_ns + duration_ns);
  CaptureCancel uncancellable;
  if (cancel == nullptr) cancel = &uncancellable;
  RecorderPause pause(workload_.recorder.get());
  tensorflow::ProfileResponse presp;
  bool terminated = false;
  grpc::Status ps = Profile(&preq, request.start_ns() <= 0, limits.workload_timeout_ns, cancel,
                            &terminated, &presp);
  sampler.Stop();
  if (terminated)
    return absl::CancelledError("capture cancelled; the workload's session was terminated");
  if (!ps.ok()) {
    return FromWorkload(ps, workload_.profiler_address,
                        WaitNs(preq, limits.workload_timeout_ns, clock_.NowNs()));
  }

  // The profiler names the file after the request's host; take whatever it wrote.
  std::string path;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path((*repo)->path()) / session, ec)) {
    if (e.path().string().size() > 10 &&
        e.path().string().compare(e.path().string().size() - 10, 10, ".xplane.pb") == 0) {
      path = e.path().string();
    }
  }
  if (path.empty()) {
    if (presp.empty_trace()) {
      return absl::FailedPreconditionError(absl::StrCat("empty trace: the workload profiler at ",
                                                        workload_.profiler_address,
                                                        " captured nothing"));
    }
    return absl::DataLossError(absl::StrCat("the workload profiler at ", workload_.profiler_address,
                                            " wrote no .xplane.pb file"));
  }
  absl::StatusOr<std::unique_ptr<trace::FileSource>> file = trace::FileSource::Open(path);
  if (!file.ok()) {
    return absl::DataLossError(
        absl::StrCat("unreadable XSpace from the workload: ", file.status().message()));
  }
  return Finish(**file, presp.empty_trace(), request, host, limits, sampler.Series(),
                sampler.error(), sink, outcome);
}

grpc::Status CaptureRunner::Profile(tensorflow::ProfileRequest* preq, bool asap, int64_t timeout_ns,
                                    CaptureCancel* cancel, bool* terminated,
                                    tensorflow::ProfileResponse* presp) {
  absl::Mutex mu;
  // Guarded by mu: where the session runs, and whether the watcher ended it.
  ProfilerStub* session_on = workload_.capture_profiler != nullptr
                                 ? workload_.capture_profiler.get()
                                 : workload_.profiler.get();
  bool cancelled = false;
  std::unique_ptr<ProfilerStub> fresh;  // outlives the watcher, which may use it
  const std::string session = preq->session_id();
  std::thread watcher([&] {
    // Cancellation must reach the workload, or its session would run on unobserved.
    if (!cancel->AwaitCancelOrClose()) return;
    ProfilerStub* stub;
    {
      absl::MutexLock lock(&mu);
      cancelled = true;
      stub = session_on;
    }
    grpc::ClientContext tctx;
    tctx.set_deadline(DeadlineAt(clock_.NowNs(), 2'000'000'000));
    tensorflow::TerminateRequest treq;
    treq.set_session_id(session);
    tensorflow::TerminateResponse tresp;
    stub->Terminate(&tctx, treq, &tresp);
  });
  grpc::Status s = AskProfiler(*session_on, *preq, timeout_ns, clock_, presp);
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    absl::StatusOr<std::unique_ptr<ProfilerStub>> again =
        ReconnectProfiler(workload_, clock_, asap, preq);
    if (!again.ok()) {
      s = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       absl::StrCat(s.error_message(), "; ", again.status().message()));
    } else {
      fresh = *std::move(again);
      bool ask;
      {
        // A cancellation from here on terminates the session on the fresh channel; one that
        // lands before the session begins there finds none to end, and the session runs its
        // duration out with nobody reading it.
        absl::MutexLock lock(&mu);
        session_on = fresh.get();
        ask = !cancelled;
      }
      if (ask) s = AskProfiler(*fresh, *preq, timeout_ns, clock_, presp);
    }
  }
  cancel->Close();
  watcher.join();
  absl::MutexLock lock(&mu);
  *terminated = cancelled;
  return s;
}

void CaptureRunner::AddRuntimeStatus(CaptureOutcome* outcome) {
  if (workload_.metrics == nullptr) return;
  for (size_t i = 0; i < workload_.metrics->size(); ++i) {
    absl::StatusOr<rt::GetTpuRuntimeStatusResponse> status = workload_.metrics->RuntimeStatus(i);
    outcome->warnings.push_back(status.ok() ? DescribeRuntimeStatus(*status)
                                            : absl::StrCat("no runtime status at the snapshot (",
                                                           status.status().message(), ")"));
  }
}

absl::Status CaptureRunner::RunSnapshot(const podprof::v1::CaptureRequest& request,
                                        const podprof::v1::HostInfo& host,
                                        const RunnerLimits& limits, stream::ChunkSink* sink,
                                        CaptureOutcome* outcome) {
  const int64_t duration_ns = static_cast<int64_t>(request.duration_ms()) * 1'000'000;
  const int64_t now = clock_.NowNs();
  // The window's end, never later than now: a snapshot looks back.
  const int64_t at = request.start_ns() > 0 ? std::min(now, request.start_ns() + duration_ns) : now;
  ASSIGN_OR_RETURN(std::vector<RecorderSegment> frozen, workload_.recorder->Freeze(at));
  AddRuntimeStatus(outcome);  // once the window is safe from the ring
  if (!frozen.empty() && frozen.front().start_ns > at - duration_ns) {
    outcome->warnings.push_back(absl::StrCat(
        "the flight recorder holds ", (at - frozen.front().start_ns) / 1'000'000, " ms of the ",
        request.duration_ms(), " ms asked (armed, or re-armed after a capture, ", "since then)"));
  }
  // The join is parsed protobuf, several times the window's bytes (twenty for a workload whose
  // events are a few bytes each): refused before it is made past a bound of its own, so that
  // the agent's memory follows recorder.max_bytes whatever the workload sends.
  const uint64_t join_limit = kJoinBytesPerRingByte * workload_.recorder->max_bytes();
  uint64_t join_bytes = 0;
  for (const RecorderSegment& segment : frozen) {
    ASSIGN_OR_RETURN(const uint64_t parsed, ParsedBytesEstimate(*segment.xspace));
    join_bytes += parsed;
  }
  if (join_bytes > join_limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the flight recorder's window would take ", join_bytes >> 20,
                     " MiB once parsed to be joined, past the agent's bound of ", join_limit >> 20,
                     " MiB (", kJoinBytesPerRingByte,
                     " x [recorder] max_bytes): shorten [recorder] window or the "
                     "snapshot's --window"));
  }
  // A segment at a time, each one's bytes let go once parsed (the ring's own go with it): the
  // window's bytes, their parse and the join are never all held at once.
  SnapshotMerger merger;
  for (size_t i = 0; i < frozen.size(); ++i) {
    tensorflow::profiler::XSpace space;
    if (!space.ParseFromString(*frozen[i].xspace)) {
      return absl::DataLossError(absl::StrCat("the recorder's snapshot ", i, " does not parse"));
    }
    frozen[i].xspace.reset();
    RETURN_IF_ERROR(merger.Add(std::move(space)));
  }
  frozen.clear();
  std::string bytes;
  bool empty = false;
  {
    // The join goes once serialized: the streaming reader reads its bytes in place (no file),
    // and the parsed join, several times larger, is not held while they are read and streamed.
    ASSIGN_OR_RETURN(tensorflow::profiler::XSpace merged, std::move(merger).Finish());
    empty = merged.planes_size() == 0;
    if (!merged.SerializeToString(&bytes)) {
      return absl::DataLossError("the recorder's window does not serialize");
    }
  }
  trace::MemorySource xspace(bytes, "the flight recorder's window");
  return Finish(xspace, empty, request, host, limits, {}, "", sink, outcome);
}

int RemoveStaleCaptureDirs(const std::string& parent) {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kCaptureDirPrefix, 0) != 0 || !e.is_directory(ec)) continue;
    pid_t owner = 0;
    std::ifstream(e.path() / kOwnerFile) >> owner;
    // A directory without an owner is one whose agent died between mkdtemp and writing the
    // file, unless it is brand new (another agent sharing the directory is making it).
    const bool orphan = owner > 0 ? (kill(owner, 0) != 0 && errno == ESRCH)
                                  : fs::last_write_time(e.path(), ec) <
                                        fs::file_time_type::clock::now() - std::chrono::minutes(10);
    if (!orphan) continue;
    fs::remove_all(e.path(), ec);
    removed += !ec;
  }
  return removed;
}

}  // namespace podprof::agent
