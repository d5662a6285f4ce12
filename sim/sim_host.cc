#include "sim/sim_host.h"

#include <malloc.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/errno_status.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "sim/capture_files.h"
#include "sim/xspace_builder.h"

namespace podprof::sim {
namespace {

// Longest wait between checks of a cancelled client: bounds how long a gone client holds
// the session. (Terminate wakes a session at once; this is only for clients that vanish.)
// Not shorter: every host's poll is a wake-up competing with the others' start instants.
constexpr int64_t kPollNs = 200'000'000;
// The last stretch before an instant is a plain sleep (see WaitUntil).
constexpr int64_t kFinalApproachNs = 2'000'000;

// The host side of a step, for the runtime's transfer metrics. A step's input batch per chip
// and its outputs (loss and metrics) per chip, bytes, and the host's PCIe link to a chip.
constexpr int64_t kInputBatchBytes = int64_t{16} << 20;
constexpr int64_t kStepOutputBytes = 4096;
constexpr double kHostLinkBytesPerS = 16e9;
// Fixed cost of one device-to-host copy (DMA setup and the completion interrupt), us.
constexpr double kDeviceToHostSetupUs = 20;
// What a host core reduces per second, FLOP/s: the host's share of a cross-slice reduction.
constexpr double kHostReduceFlopsPerS = 25e9;
// The hosts' network: smallest round trip to another host, us, and a connection's delivery
// rate at its best, Mbit/s.
constexpr double kTcpMinRttUs = 30;
constexpr double kTcpDeliveryMbps = 20'000;

// Uniform in [0, 1) from a hash.
double UnitInterval(uint64_t h) { return static_cast<double>(h >> 11) / 9007199254740992.0; }

absl::Status MakeDirs(const std::string& path) {
  std::string partial;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      partial = path.substr(0, i);
      if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoToStatus(errno, absl::StrCat("mkdir ", partial));
      }
    }
  }
  return absl::OkStatus();
}

// Writes `path` through a temporary file and a rename, so readers never see a partial file;
// `write` fills the stream and says whether it could. A failed write leaves no file behind.
template <typename WriteFn>
absl::Status WriteAtomically(const std::string& path, WriteFn write) {
  std::string tmp = path + ".tmp";
  absl::Status status;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return ErrnoToStatus(errno, absl::StrCat("open ", tmp));
    status = write(out);
    out.flush();
    if (status.ok() && !out) status = ErrnoToStatus(errno, absl::StrCat("write ", tmp));
  }
  if (status.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoToStatus(errno, absl::StrCat("rename to ", path));
  }
  if (!status.ok()) std::remove(tmp.c_str());
  return status;
}

absl::Status Serialized(const tensorflow::profiler::XSpace& space, std::ostream& out) {
  if (!space.SerializeToOstream(&out)) return absl::InternalError("cannot serialize the XSpace");
  return absl::OkStatus();
}

// Hands the heap's free pages back to the system. A session's planes are many small
// allocations, which glibc keeps for reuse after they are freed: without this a host that had
// written one large session held its peak (gigabytes, before the planes were streamed) until
// it exited, failed and cancelled sessions included.
void ReleaseFreedMemory() { malloc_trim(0); }

}  // namespace

absl::StatusOr<std::unique_ptr<SimHost>> SimHost::Create(const SimHostOptions& options,
                                                         Clock& truth) {
  ASSIGN_OR_RETURN(PodModel model, PodModel::Create(options.pod));
  std::unique_ptr<SimHost> host(new SimHost(options, truth, std::move(model)));
  if (!options.replay_path.empty()) {
    ASSIGN_OR_RETURN(Replay replay, Replay::Load(options.replay_path));
    host->replay_ = std::move(replay);
  }
  RETURN_IF_ERROR(host->WriteTruth());
  return host;
}

SimHost::SimHost(const SimHostOptions& options, Clock& truth, PodModel model)
    : options_(options),
      truth_(truth),
      host_clock_(truth, options.clock_offset_ns, options.clock_drift_ppm, options.clock_epoch_ns),
      model_(std::move(model)),
      dcn_latencies_(model_, model_.StepAt(truth_.NowNs()), host_clock_.NowNs()) {
  // Counting starts with the first step that begins after start-up, as a runtime's would.
  timed_through_ = model_.StepAt(truth_.NowNs());
  timings_.resize(model_.chips());
  for (Cumulative& c : timings_) c.start_host_ns = host_clock_.NowNs();
}

int TimingBucket(double value) {
  if (value < kTimingScale) return 0;
  const int b = 1 + static_cast<int>(std::floor(std::log2(value / kTimingScale)));
  return std::min(b, kTimingBuckets + 1);
}

void Cumulative::Add(double value) {
  min = count == 0 ? value : std::min(min, value);
  max = count == 0 ? value : std::max(max, value);
  ++count;
  sum += value;
  sum_sq += value * value;
  ++buckets[TimingBucket(value)];
}

std::vector<Cumulative> SimHost::ProgramTimings() {
  const int64_t done = model_.StepAt(truth_.NowNs()) - 1;  // the last step that surely ended
  std::vector<std::pair<int64_t, int64_t>> spans;
  if (options_.continuous_overhead > 0) {
    absl::MutexLock lock(&mu_);
    spans = continuous_spans_;
  }
  auto cost = [&](int64_t start_ns) {
    for (const auto& [from, to] : spans) {
      if (from <= start_ns && start_ns < to) return 1 + options_.continuous_overhead;
    }
    return 1.0;
  };
  absl::MutexLock lock(&timing_mu_);
  // A metric service first asked long after start-up counts at most the last 100,000 steps.
  timed_through_ = std::max(timed_through_, done - 100'000);
  for (int64_t s = timed_through_ + 1; s <= done; ++s) {
    const std::vector<ChipStep> step = model_.Step(s);
    for (size_t c = 0; c < step.size(); ++c) {
      // A step the job did not issue ran no program.
      if (step[c].runs.empty()) continue;
      timings_[c].Add(static_cast<double>(step[c].busy_end_ps) / 1e6 * cost(step[c].start_ns));
    }
  }
  timed_through_ = std::max(timed_through_, done);
  return timings_;
}

std::map<std::string, DcnLatencyClass> SimHost::DcnLatencies() {
  // A step's transfers have all arrived once it ended (its last kernel is a recv-done).
  const int64_t done = model_.StepAt(truth_.NowNs()) - 1;
  absl::MutexLock lock(&timing_mu_);
  dcn_latencies_.CountThrough(done);
  return dcn_latencies_.classes();
}

bool SimHost::WaitUntil(int64_t host_ns, absl::Notification* stop,
                        const std::function<bool()>& cancelled) {
  // Asking gRPC whether the client is gone costs a completion-queue round trip, so it is asked
  // once per poll slice and never right at an instant: with many hosts on few cores all waking
  // at one instant, every microsecond spent there is added to the start skew.
  while (true) {
    if (stop->HasBeenNotified()) return false;
    const int64_t now = host_clock_.NowNs();
    if (now >= host_ns) return true;
    if (host_ns - now <= kFinalApproachNs) {
      // The last stretch is a plain sleep, whose wake-up is cheaper than the Notification's; a
      // stop arriving meanwhile is seen by the caller's next wait.
      host_clock_.SleepUntilNs(host_ns, nullptr);
      return true;
    }
    if (!host_clock_.SleepUntilNs(std::min(host_ns - kFinalApproachNs, now + kPollNs), stop)) {
      return false;
    }
    if (cancelled()) return false;
  }
}

absl::StatusOr<SessionResult> SimHost::RunSession(const SessionRequest& request,
                                                  const std::function<bool()>& cancelled) {
  if (request.repository_root.empty()) {
    return absl::InvalidArgumentError("repository_root is empty: nowhere to write the trace");
  }
  if (request.session_id.empty() || request.session_id.find('/') != std::string::npos ||
      request.session_id == "." || request.session_id == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("session_id \"", request.session_id, "\" is not a directory name"));
  }
  if (request.duration_ms <= 0 || request.duration_ms > kMaxSessionMs) {
    return absl::InvalidArgumentError(
        absl::StrCat("duration_ms must be 1..", kMaxSessionMs, ", got ", request.duration_ms));
  }
  if (request.file_host.empty() || request.file_host.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("host name \"", request.file_host, "\" cannot name a file"));
  }
  std::shared_ptr<absl::Notification> stop;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the host is shutting down");
    if (continuous_since_ns_ >= 0) {
      // The real server's answer, word for word: its one profiler session is taken.
      return absl::InternalError("Another profiling session active.");
    }
    if (!active_session_.empty()) {
      return absl::AlreadyExistsError(absl::StrCat("another profiling session (\"", active_session_,
                                                   "\") is running; one at a time"));
    }
    active_session_ = request.session_id;
    stop_ = stop = std::make_shared<absl::Notification>();
  }
  auto release = [&] {
    absl::MutexLock lock(&mu_);
    active_session_.clear();
    stop_.reset();
  };

  SessionResult result;
  if (request.start_host_ns > 0) {
    if (!WaitUntil(request.start_host_ns, stop.get(), cancelled) && !stop->HasBeenNotified()) {
      release();
      return absl::CancelledError("the client went away before the session started");
    }
  }
  result.true_start_ns = truth_.NowNs();
  result.host_start_ns = host_clock_.ToHost(result.true_start_ns);
  if (request.start_host_ns > 0 && result.host_start_ns > request.start_host_ns) {
    result.late_by_ns = result.host_start_ns - request.start_host_ns;
    // Only a real lateness is worth a log line; waking a little after the instant is normal.
    if (result.late_by_ns > 1'000'000) {
      PODPROF_LOG(WARNING) << "session " << request.session_id << ": profiling is late by "
                           << result.late_by_ns << " ns";
    }
  }
  const int64_t end_host = result.host_start_ns + request.duration_ms * 1'000'000;
  bool completed = !stop->HasBeenNotified() && WaitUntil(end_host, stop.get(), cancelled);
  result.terminated = !completed && stop->HasBeenNotified();
  if (!completed && !result.terminated) {
    release();
    return absl::CancelledError("the client went away during the session");
  }
  result.true_end_ns = truth_.NowNs();
  const int64_t host_end = host_clock_.ToHost(result.true_end_ns);

  absl::Status written = WriteTrace(request, host_end, cancelled, &result);
  ReleaseFreedMemory();
  result.empty_trace = result.kernel_events == 0;
  {
    absl::MutexLock lock(&mu_);
    history_.emplace_back(request, result);
  }
  release();
  if (!written.ok()) return written;
  absl::Status truth = WriteTruth();
  if (!truth.ok()) PODPROF_LOG(ERROR) << "cannot record ground truth: " << truth.message();
  return result;
}

absl::Status SimHost::WriteTrace(const SessionRequest& request, int64_t host_end_ns,
                                 const std::function<bool()>& cancelled, SessionResult* result) {
  std::string dir = absl::StrCat(request.repository_root, "/", request.session_id);
  result->path =
      absl::StrCat(dir, "/", absl::StrReplaceAll(request.file_host, {{":", "_"}}), ".xplane.pb");
  RETURN_IF_ERROR(MakeDirs(dir));
  if (replay_.has_value()) {
    tensorflow::profiler::XSpace space =
        replay_->Rebase(options_.host_name, result->host_start_ns, host_end_ns);
    result->kernel_events = replay_->device_events();
    return WriteAtomically(result->path, [&](std::ostream& out) { return Serialized(space, out); });
  }
  SessionWindow window;
  window.true_start_ns = result->true_start_ns;
  window.true_end_ns = result->true_end_ns;
  window.device_offset_ns = options_.device_clock_offset_ns;
  window.counters = options_.counters;
  window.kernel_profiling = request.kernel_profiling;
  window.host_name = options_.host_name;
  // Written as it is generated: a kernel-profiling session is mostly counter samples, far
  // more than its kernels, and never in memory whole.
  return WriteAtomically(result->path, [&](std::ostream& out) -> absl::Status {
    absl::StatusOr<WriteResult> w = WriteXSpace(model_, host_clock_, window, out, cancelled);
    if (!w.ok()) return w.status();
    result->kernel_events = w->kernel_events;
    return absl::OkStatus();
  });
}

absl::Status SimHost::StartContinuous() {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("the host is shutting down");
  if (continuous_since_ns_ >= 0 || !active_session_.empty()) {
    return absl::AlreadyExistsError("a profiling session is already running");
  }
  continuous_since_ns_ = truth_.NowNs();
  continuous_spans_.push_back({continuous_since_ns_, INT64_MAX});
  return absl::OkStatus();
}

absl::StatusOr<tensorflow::profiler::XSpace> SimHost::Snapshot(
    const std::function<bool()>& cancelled) {
  SessionWindow window;
  {
    absl::MutexLock lock(&mu_);
    if (continuous_since_ns_ < 0) {
      return absl::NotFoundError("No continuous profiling session found.");
    }
    if (snapshotting_) return absl::UnavailableError("a snapshot is being taken");
    snapshotting_ = true;
    window.true_start_ns = continuous_since_ns_;
    window.true_end_ns = continuous_since_ns_ = std::max(continuous_since_ns_, truth_.NowNs());
  }
  absl::StatusOr<tensorflow::profiler::XSpace> space = SnapshotSpace(window, cancelled);
  absl::MutexLock lock(&mu_);
  snapshotting_ = false;
  return space;
}

absl::StatusOr<tensorflow::profiler::XSpace> SimHost::SnapshotSpace(
    SessionWindow window, const std::function<bool()>& cancelled) {
  if (replay_.has_value()) {
    return replay_->Rebase(options_.host_name, host_clock_.ToHost(window.true_start_ns),
                           host_clock_.ToHost(window.true_end_ns));
  }
  window.device_offset_ns = options_.device_clock_offset_ns;
  window.counters = options_.counters;
  window.host_name = options_.host_name;
  // Written, then parsed: the snapshot travels as a message, and the writer streams bytes.
  std::ostringstream out;
  absl::StatusOr<WriteResult> w = WriteXSpace(model_, host_clock_, window, out, cancelled);
  if (!w.ok()) return w.status();
  tensorflow::profiler::XSpace space;
  if (!space.ParseFromString(std::move(out).str())) {
    return absl::InternalError("the simulated XSpace does not parse");
  }
  return space;
}

absl::Status SimHost::StopContinuous() {
  absl::MutexLock lock(&mu_);
  if (continuous_since_ns_ < 0) {
    return absl::NotFoundError("No continuous profiling session found.");
  }
  continuous_since_ns_ = -1;
  if (!continuous_spans_.empty()) continuous_spans_.back().second = truth_.NowNs();
  return absl::OkStatus();
}

absl::Status SimHost::Terminate(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  if (active_session_.empty() || active_session_ != session_id) {
    return absl::NotFoundError(absl::StrCat("no running session \"", session_id, "\""));
  }
  if (!stop_->HasBeenNotified()) stop_->Notify();
  return absl::OkStatus();
}

void SimHost::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  if (stop_ && !stop_->HasBeenNotified()) stop_->Notify();
}

std::vector<ChipActivity> SimHost::Activity() {
  const int64_t now = truth_.NowNs();
  const int64_t s = model_.StepAt(now);
  std::vector<ChipStep> current = model_.Step(s);
  std::vector<ChipActivity> out(model_.chips());
  // Busy time and bytes moved over the steps that ended in the last second (at most 64 of
  // them): a gauge a 1 s poll reads sees every step it covers, stalls and skips included.
  const int64_t span = std::clamp<int64_t>(1'000'000'000 / model_.step_period_ns(), 1, 64);
  std::vector<int64_t> busy(model_.chips(), 0);
  std::vector<double> moved(model_.chips(), 0);
  for (int64_t k = s - span; k < s; ++k) {
    const std::vector<ChipStep> step = model_.Step(k);
    for (size_t c = 0; c < step.size(); ++c) {
      for (const OpRun& r : step[c].runs) {
        busy[c] += r.duration_ps;
        moved[c] += static_cast<double>(model_.ops()[r.op].bytes);
      }
    }
  }
  const int64_t period_ps = model_.step_period_ns() * 1000;
  // What the chip's peak bandwidth moves in one step period (GB/s times ns is bytes).
  const double period_bytes =
      model_.generation().peak_hbm_gbps * static_cast<double>(model_.step_period_ns());
  for (int c = 0; c < model_.chips(); ++c) {
    ChipActivity& a = out[c];
    a.chip = c;
    a.hbm_total_bytes = model_.generation().hbm_bytes;
    a.hbm_usage_bytes = model_.HbmUsageBytes(c);
    const double steps = static_cast<double>(span);
    a.duty_cycle_percent =
        100.0 * static_cast<double>(busy[c]) / (static_cast<double>(period_ps) * steps);
    a.hbm_bandwidth_percent = 100.0 * moved[c] / (period_bytes * steps);
    const int64_t rel_ps = (now - current[c].start_ns) * 1000;
    for (const OpRun& r : current[c].runs) {
      if (r.start_ps + r.duration_ps > rel_ps) ++a.queued_kernels;
    }
    if (rel_ps > current[c].busy_end_ps) {
      a.idle_seconds = static_cast<double>(rel_ps - current[c].busy_end_ps) / 1e12;
    }
  }
  return out;
}

HostTransfers SimHost::Transfers() {
  // The last complete step, as for the kernel timings: a client sees whole steps.
  const int64_t s = model_.StepAt(truth_.NowNs()) - 1;
  const std::vector<ChipStep> step = model_.Step(s);
  HostTransfers t;
  t.start_host_ns = host_clock_.ToHost(s * model_.step_period_ns());
  t.end_host_ns = host_clock_.ToHost((s + 1) * model_.step_period_ns());
  const uint64_t seed = model_.config().pod_seed;
  const auto host = static_cast<uint64_t>(model_.config().host_index);
  const auto us = [](int64_t ps) { return static_cast<double>(ps) / 1e6; };
  for (int c = 0; c < model_.chips(); ++c) {
    for (const OpRun& r : step[c].runs) {
      const OpTemplate& op = model_.ops()[r.op];
      if (!op.collective) continue;
      const double transfer = us(model_.CollectiveTransferPs(s, r.op, model_.slice()));
      const double inbound = us(r.duration_ps);
      const double reduce = static_cast<double>(op.flops) / kHostReduceFlopsPerS * 1e6;
      t.outbound_us.push_back({op.bytes, transfer});
      t.inbound_us.push_back({op.bytes, inbound});
      if (op.flops > 0) t.host_compute_us.push_back({op.bytes, reduce});
      t.collective_us.push_back({op.bytes, inbound + reduce});
    }
    // PCIe copies take longer when the host's other traffic shares the link: up to 8% for a
    // batch, up to 20% for a small copy, whose setup is most of its time.
    const auto chip = static_cast<uint64_t>(c);
    const auto step_index = static_cast<uint64_t>(s);
    const double in_jitter =
        1 + 0.08 * UnitInterval(MixHash(seed, 0x68326420, host, chip, step_index));
    const double out_jitter =
        1 + 0.2 * UnitInterval(MixHash(seed, 0x64326820, host, chip, step_index));
    t.host_to_device_us.push_back({kInputBatchBytes, static_cast<double>(kInputBatchBytes) /
                                                         kHostLinkBytesPerS * 1e6 * in_jitter});
    t.device_to_host_us.push_back(
        {kStepOutputBytes,
         (kDeviceToHostSetupUs + static_cast<double>(kStepOutputBytes) / kHostLinkBytesPerS * 1e6) *
             out_jitter});
  }
  // One connection to each other host of the pod; a host alone still holds one, to the
  // coordinator of the job.
  const int peers = std::max(1, model_.config().hosts - 1);
  for (int p = 0; p < peers; ++p) {
    const uint64_t h =
        MixHash(seed, 0x746370, host, static_cast<uint64_t>(p), static_cast<uint64_t>(s));
    t.tcp_min_rtt_us.push_back({0, kTcpMinRttUs * (1 + 0.5 * UnitInterval(h))});
    t.tcp_delivery_mbps.push_back(
        {0, kTcpDeliveryMbps * (0.7 + 0.3 * UnitInterval(MixHash(h, 0x72617465)))});
  }
  return t;
}

std::vector<CoreState> SimHost::CoreStates() {
  const int64_t now = truth_.NowNs();
  const int64_t s = model_.StepAt(now);
  const std::vector<ChipStep> current = model_.Step(s);
  // While the job issues no step (a stall, a skipped step) the cores wait after the last step it
  // did issue, with nothing queued: what a runtime shows of a job stuck upstream of its chips.
  int64_t last_issued = s;
  for (int back = 0; back < 100'000 && !model_.Issued(last_issued); ++back) --last_issued;
  const bool issued = last_issued == s;
  // v7x drives two TensorCores per chip (one per die); a generation whose catalog entry leaves
  // the count out runs one (v4 and v5p fuse theirs into one megacore).
  const int cores = std::max(1, model_.generation().tensor_cores);
  std::vector<CoreState> out;
  for (int c = 0; c < model_.chips(); ++c) {
    const int64_t rel_ps = (now - current[c].start_ns) * 1000;
    int op = -1;
    double progress = 0;
    for (const OpRun& r : current[c].runs) {
      if (r.start_ps <= rel_ps && rel_ps < r.start_ps + r.duration_ps) {
        op = r.op;
        progress = static_cast<double>(rel_ps - r.start_ps) / static_cast<double>(r.duration_ps);
        break;
      }
    }
    for (int k = 0; k < cores; ++k) {
      CoreState st;
      st.chip = c;
      st.global_chip_id = model_.GlobalChipId(c);
      st.core_on_chip = k;
      st.global_core_id = st.global_chip_id * cores + k;
      st.run_id = last_issued;
      st.op = issued ? op : -1;
      st.op_progress = issued ? progress : 0;
      st.next_queued = issued;
      out.push_back(st);
    }
  }
  return out;
}

absl::Status SimHost::WriteTruth() {
  if (options_.truth_file.empty()) return absl::OkStatus();
  nlohmann::json j;
  j["host_name"] = options_.host_name;
  j["host_index"] = options_.pod.host_index;
  j["clock_offset_ns"] = host_clock_.offset_ns();
  j["clock_drift_ppm"] = host_clock_.drift_ppm();
  j["clock_epoch_ns"] = host_clock_.epoch_ns();
  j["device_clock_offset_ns"] = options_.device_clock_offset_ns;
  j["step_period_ns"] = model_.step_period_ns();
  j["program_id"] = model_.program_id();
  j.update(DcnTruth(model_));  // slices, this host's slice, the DCN faults
  j["sessions"] = nlohmann::json::array();
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [req, res] : history_) {
      j["sessions"].push_back({{"session_id", req.session_id},
                               {"requested_start_host_ns", req.start_host_ns},
                               {"late_by_ns", res.late_by_ns},
                               {"true_start_ns", res.true_start_ns},
                               {"true_end_ns", res.true_end_ns},
                               {"host_start_ns", res.host_start_ns},
                               {"terminated", res.terminated},
                               {"kernel_events", res.kernel_events},
                               {"path", res.path}});
    }
  }
  return WriteAtomically(options_.truth_file, [&](std::ostream& out) {
    out << j.dump(2) << "\n";
    return absl::OkStatus();
  });
}

}  // namespace podprof::sim
