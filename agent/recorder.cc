#include "agent/recorder.h"

#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/xspace_merge.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "proto/grpc_status.h"
#include "proto/recorder_states.h"

namespace podprof::agent {

podprof::v1::RecorderState RecorderStateToProto(RecorderState s) {
  switch (s) {
    case RecorderState::kOff:
      return podprof::v1::RECORDER_STATE_OFF;
    case RecorderState::kArmed:
      return podprof::v1::RECORDER_STATE_ARMED;
    case RecorderState::kUnsupported:
      return podprof::v1::RECORDER_STATE_UNSUPPORTED;
    case RecorderState::kBusy:
      return podprof::v1::RECORDER_STATE_BUSY;
    case RecorderState::kFailed:
      return podprof::v1::RECORDER_STATE_FAILED;
    case RecorderState::kDisabled:
      return podprof::v1::RECORDER_STATE_DISABLED;
  }
  return podprof::v1::RECORDER_STATE_UNSPECIFIED;
}

const char* RecorderStateName(RecorderState s) {
  return podprof::v1::RecorderStateName(RecorderStateToProto(s));
}

Recorder::Recorder(tensorflow::ProfilerService::StubInterface* profiler, Clock& clock,
                   RecorderOptions options, tensorflow::ProfileRequest request,
                   std::shared_ptr<grpc::Channel> snapshot_channel)
    : profiler_(profiler),
      snapshot_channel_(std::move(snapshot_channel)),
      clock_(clock),
      options_(options),
      request_(std::move(request)) {}

namespace {

// GetSnapshot as the generated stub calls it, its answer read as tensorflow.ProfileResponseBytes.
grpc::Status GetSnapshotBytes(grpc::Channel* channel, grpc::ClientContext* ctx,
                              tensorflow::ProfileResponseBytes* out) {
  const grpc::internal::RpcMethod method("/tensorflow.ProfilerService/GetSnapshot",
                                         grpc::internal::RpcMethod::NORMAL_RPC);
  tensorflow::GetSnapshotRequest req;
  return grpc::internal::BlockingUnaryCall<
      tensorflow::GetSnapshotRequest, tensorflow::ProfileResponseBytes, grpc::protobuf::MessageLite,
      grpc::protobuf::MessageLite>(channel, method, ctx, req, out);
}

}  // namespace

absl::Status Recorder::Arm() {
  absl::MutexLock snapshot(&snapshot_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (state_ == RecorderState::kDisabled) return absl::FailedPreconditionError(reason_);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock_.NowNs(), options_.rpc_timeout_ns));
  tensorflow::ContinuousProfilingResponse resp;
  const grpc::Status s = profiler_->StartContinuousProfiling(&ctx, request_, &resp);
  absl::MutexLock lock(&mu_);
  ring_.clear();
  bytes_ = 0;
  oversized_ = 0;
  if (s.ok()) {
    state_ = RecorderState::kArmed;
    reason_.clear();
    last_rotate_ns_ = clock_.NowNs();
    return absl::OkStatus();
  }
  switch (s.error_code()) {
    case grpc::StatusCode::UNIMPLEMENTED:
      state_ = RecorderState::kUnsupported;
      reason_ =
          absl::StrCat("the workload's profiler has no continuous mode (", s.error_message(), ")");
      break;
    case grpc::StatusCode::ALREADY_EXISTS:
      state_ = RecorderState::kBusy;
      reason_ = absl::StrCat("another client is profiling the workload (", s.error_message(), ")");
      break;
    default:
      state_ = RecorderState::kOff;
      reason_ = absl::StrCat("the workload's profiler did not start continuous profiling: ",
                             s.error_message());
      return absl::UnavailableError(reason_);
  }
  return absl::FailedPreconditionError(reason_);
}

absl::StatusOr<RecorderSegment> Recorder::Snapshot() {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock_.NowNs(), options_.rpc_timeout_ns));
  tensorflow::ProfileResponseBytes resp;
  grpc::Status s;
  if (snapshot_channel_ != nullptr) {
    s = GetSnapshotBytes(snapshot_channel_.get(), &ctx, &resp);
  } else {
    tensorflow::GetSnapshotRequest req;
    tensorflow::ProfileResponse parsed;
    s = profiler_->GetSnapshot(&ctx, req, &parsed);
    resp.set_xspace(parsed.xspace().SerializeAsString());
  }
  // Past max_bytes (the channel's receive limit, or the message as received): let go, and the
  // ring goes on. The workload sent it whole, so its session is still on.
  const uint64_t size = s.ok() ? resp.xspace().size() : 0;
  if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED || size > options_.max_bytes) {
    absl::MutexLock lock(&mu_);
    ++oversized_;
    reason_ = absl::StrCat(
        "a snapshot of the workload ",
        s.ok() ? absl::StrCat("(", size >> 20, " MiB) ") : std::string(), "passed max_bytes (",
        options_.max_bytes >> 20, " MiB) and was let go: the window has a gap there (", oversized_,
        " let go since armed; raise [recorder] max_bytes or shorten [recorder] window)");
    return absl::ResourceExhaustedError(reason_);
  }
  if (!s.ok()) {
    absl::MutexLock lock(&mu_);
    // The server drops continuous mode when a snapshot fails; so does the ring.
    state_ = RecorderState::kFailed;
    reason_ = absl::StrCat("a snapshot failed: ", s.error_message());
    return absl::UnavailableError(reason_);
  }
  RecorderSegment segment;
  RETURN_IF_ERROR(ProfileWindowOfBytes(resp.xspace(), &segment.start_ns, &segment.stop_ns));
  segment.xspace = std::make_shared<const std::string>(std::move(*resp.mutable_xspace()));
  return segment;
}

absl::Status Recorder::Rotate(bool force) { return Rotate(force, INT64_MAX); }

absl::Status Recorder::Rotate(bool force, int64_t keep_from_ns) {
  absl::MutexLock snapshot(&snapshot_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (state_ != RecorderState::kArmed) {
      return absl::FailedPreconditionError(
          absl::StrCat("the recorder is ", RecorderStateName(state_)));
    }
    if (!force && clock_.NowNs() - last_rotate_ns_ < rotate_ns()) return absl::OkStatus();
  }
  absl::StatusOr<RecorderSegment> segment = Snapshot();
  if (!segment.ok()) {
    // A snapshot let go for its size: the next one is due a rotation later, not at once.
    if (absl::IsResourceExhausted(segment.status())) {
      absl::MutexLock lock(&mu_);
      last_rotate_ns_ = clock_.NowNs();
    }
    return segment.status();
  }
  absl::MutexLock lock(&mu_);
  last_rotate_ns_ = clock_.NowNs();
  // What must stay is the window before the earlier of now and the instant a freeze asked for:
  // a slow snapshot (hundreds of ms on a loaded host) read `now` that much after the freeze's
  // instant, and let go of the window's first segment just before it was frozen.
  Keep(*std::move(segment), std::min(last_rotate_ns_, keep_from_ns) - options_.window_ns);
  return absl::OkStatus();
}

void Recorder::Keep(RecorderSegment segment, int64_t cutoff_ns) {
  bytes_ += segment.xspace->size();
  ring_.push_back(std::move(segment));
  // The oldest segment goes once the next one alone covers the window from `cutoff` (the
  // host's clock is the workload's: the segments' spans and the cutoff are both on it), so a
  // cutoff that falls in the gap between two segments (the server restarting its session)
  // keeps the one before it; and while the budget is passed. The newest is never past the
  // budget alone (Snapshot lets such a one go), so the ring holds at most max_bytes.
  while (ring_.size() > 1 && (ring_[1].start_ns <= cutoff_ns || bytes_ > options_.max_bytes)) {
    bytes_ -= ring_.front().xspace->size();
    ring_.pop_front();
  }
}

absl::StatusOr<std::vector<RecorderSegment>> Recorder::Freeze(int64_t at_ns) {
  RETURN_IF_ERROR(Rotate(/*force=*/true, at_ns));
  absl::MutexLock lock(&mu_);
  // From the last segment that starts at or before the window's start (the one covering it,
  // or the one before the gap it falls in), up to the freeze.
  const int64_t from = at_ns - options_.window_ns;
  size_t first = 0;
  for (size_t i = 0; i < ring_.size(); ++i) {
    if (ring_[i].start_ns <= from) first = i;
  }
  std::vector<RecorderSegment> out;
  for (size_t i = first; i < ring_.size(); ++i) {
    if (ring_[i].start_ns <= at_ns) out.push_back(ring_[i]);
  }
  return out;
}

absl::Status Recorder::Disarm() {
  absl::MutexLock snapshot(&snapshot_mu_);
  {
    absl::MutexLock lock(&mu_);
    ring_.clear();
    bytes_ = 0;
    if (state_ != RecorderState::kArmed) {
      if (state_ != RecorderState::kDisabled) state_ = RecorderState::kOff;
      return absl::OkStatus();
    }
    state_ = RecorderState::kOff;
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineAt(clock_.NowNs(), options_.rpc_timeout_ns));
  tensorflow::StopContinuousProfilingRequest req;
  tensorflow::StopContinuousProfilingResponse resp;
  const grpc::Status s = profiler_->StopContinuousProfiling(&ctx, req, &resp);
  // NOT_FOUND: the workload already dropped it (restarted, or a failed snapshot): off either way.
  if (!s.ok() && s.error_code() != grpc::StatusCode::NOT_FOUND) {
    return absl::UnavailableError(
        absl::StrCat("the workload did not stop continuous profiling: ", s.error_message()));
  }
  return absl::OkStatus();
}

absl::Status Recorder::Disable(std::string reason) {
  absl::Status s = Disarm();
  absl::MutexLock lock(&mu_);
  state_ = RecorderState::kDisabled;
  reason_ = std::move(reason);
  return s;
}

void Recorder::SetWaiting(std::string reason) {
  absl::MutexLock lock(&mu_);
  if (state_ == RecorderState::kOff) reason_ = std::move(reason);
}

RecorderState Recorder::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

std::string Recorder::reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

uint64_t Recorder::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

size_t Recorder::segments() const {
  absl::MutexLock lock(&mu_);
  return ring_.size();
}

RecorderDriver::RecorderDriver(Recorder* recorder, Clock& clock, int64_t tick_ns, int64_t rearm_ns,
                               MayArm may_arm)
    : recorder_(recorder),
      clock_(clock),
      tick_ns_(tick_ns),
      rearm_ns_(rearm_ns),
      may_arm_(std::move(may_arm)),
      thread_("podprof-recorder", clock, clock.NowNs(), [this] { return Tick(); }) {}

RecorderDriver::~RecorderDriver() {
  thread_.Stop();
  if (absl::Status s = recorder_->Disarm(); !s.ok()) PODPROF_LOG(WARNING) << s.message();
}

int64_t RecorderDriver::Tick() {
  const RecorderState state = recorder_->state();
  if (state == RecorderState::kArmed) {
    if (absl::Status s = recorder_->Rotate(); !s.ok()) PODPROF_LOG(WARNING) << s.message();
  } else if (std::string why; may_arm_ && !may_arm_(&why)) {
    recorder_->SetWaiting(why);
  } else if (state != RecorderState::kDisabled && clock_.NowNs() >= next_arm_ns_) {
    recorder_->Arm().IgnoreError();  // the state and reason say what happened
    next_arm_ns_ = clock_.NowNs() + rearm_ns_;
  }
  if (recorder_->state() != logged_) {
    logged_ = recorder_->state();
    PODPROF_LOG(INFO) << "flight recorder " << RecorderStateName(logged_)
                      << (recorder_->reason().empty() ? "" : ": ") << recorder_->reason();
  }
  return clock_.NowNs() + tick_ns_;
}

}  // namespace podprof::agent
