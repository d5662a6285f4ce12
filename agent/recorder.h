// The flight recorder's ring on one host: the workload kept in continuous profiling, and the
// last `window` of its trace held here, ready to be frozen when a trigger fires.
//
// The profiler server bounds nothing (docs/INTEROP.md, "JAX's profiler server, continuous
// mode"): GetSnapshot hands over everything since the start or the last snapshot and goes on.
// So the ring is the client's: Rotate() takes a snapshot every `rotate` (half the window by
// default) and keeps the segments that reach into the last window, within a byte budget;
// Freeze(at) takes one more and returns the segments covering [at - window, at]. Each segment
// knows its own span from its XSpace's Task Environment plane; the few ms between one segment
// and the next (the server restarting its session) are gaps, not lost time claimed as traced.
//
// A workload whose server predates continuous mode (UNIMPLEMENTED) or that is being profiled
// by someone else (ALREADY_EXISTS) leaves the recorder off with the reason, for the agent to
// report per host; the caller then falls back to an immediate short capture.
#ifndef PODPROF_AGENT_RECORDER_H_
#define PODPROF_AGENT_RECORDER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/periodic.h"
#include "proto/podprof_types.pb.h"
#include "proto/profiler_service.grpc.pb.h"

namespace podprof::agent {

struct RecorderOptions {
  int64_t window_ns = 5'000'000'000;
  // How often the ring takes a snapshot; 0 = half the window. Shorter rotates cost the
  // workload more restarts of its session; longer ones hold more than the window.
  int64_t rotate_ns = 0;
  // The most the ring holds (serialized XSpaces); the oldest segments go first. A snapshot
  // larger than this alone is let go (the ring keeps recording, with a gap where it was), and
  // the agent's channel for snapshots refuses messages past it (agent.cc), so that no
  // workload's snapshot is ever held or parsed whole past this bound.
  uint64_t max_bytes = 64u << 20;
  // Each RPC's deadline: a snapshot of a busy TPU host is large and takes its time.
  int64_t rpc_timeout_ns = 30'000'000'000;
};

// One snapshot: its span on the host's clock (ns since the epoch) and its XSpace.
struct RecorderSegment {
  int64_t start_ns = 0;
  int64_t stop_ns = 0;
  // The serialized tensorflow.profiler.XSpace, shared by the ring and the freezes taken of it:
  // a freeze holds no copy of the window's bytes.
  std::shared_ptr<const std::string> xspace;
};

enum class RecorderState {
  kOff,          // not armed, or disarmed
  kArmed,        // the workload is in continuous profiling; the ring fills
  kUnsupported,  // the workload's profiler has no continuous mode (reason says which)
  kBusy,         // another client holds the workload's profiler
  kFailed,       // a snapshot failed and the workload dropped continuous mode
  kDisabled,     // turned off for good (it slowed the workload: recorder_guard.h); reason says
};
// The state as it crosses the wire (RecorderStatus.recorder_state); its name, what the logs
// say, is the one table's (proto/recorder_states.h).
podprof::v1::RecorderState RecorderStateToProto(RecorderState s);
// `s`'s name from proto/recorder_states.h: "off", "armed", ...
const char* RecorderStateName(RecorderState s);

// Thread-safe; `profiler` (the workload's) must outlive it.
class Recorder {
 public:
  // With `snapshot_channel` (the channel under `profiler`, or one to the same service),
  // snapshots are received on it as bytes (tensorflow.ProfileResponseBytes), never parsed into
  // objects: a snapshot then costs the agent its bytes. Without, through `profiler` (a test's
  // own stub), parsed.
  Recorder(tensorflow::ProfilerService::StubInterface* profiler, Clock& clock,
           RecorderOptions options, tensorflow::ProfileRequest request,
           std::shared_ptr<grpc::Channel> snapshot_channel = nullptr);

  // Puts the workload in continuous profiling. FailedPrecondition (the reason in state() and
  // reason()) when its server cannot or is busy; Unavailable when it does not answer.
  absl::Status Arm() ABSL_LOCKS_EXCLUDED(mu_);
  // Takes a snapshot when one is due (or `force`) and lets go of what fell out of the window
  // or the budget. FailedPrecondition when not armed.
  absl::Status Rotate(bool force = false) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes a snapshot now and returns the segments that cover [at_ns - window, at_ns], oldest
  // first (the ring keeps them): from the one holding the window's start (or, when the start
  // falls between two segments, the one before), however long the snapshot took.
  absl::StatusOr<std::vector<RecorderSegment>> Freeze(int64_t at_ns) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends continuous profiling (what was not snapshotted is dropped) and empties the ring.
  absl::Status Disarm() ABSL_LOCKS_EXCLUDED(mu_);
  // Disarms and stays off with `reason` (state disabled): Arm() refuses from now on, until the
  // agent restarts.
  absl::Status Disable(std::string reason) ABSL_LOCKS_EXCLUDED(mu_);
  // Why the recorder is not armed yet while nothing has been tried (the guard's baseline).
  void SetWaiting(std::string reason) ABSL_LOCKS_EXCLUDED(mu_);

  RecorderState state() const ABSL_LOCKS_EXCLUDED(mu_);
  std::string reason() const ABSL_LOCKS_EXCLUDED(mu_);
  // What the ring holds now: its serialized XSpaces' bytes, and how many segments.
  uint64_t bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t segments() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t window_ns() const { return options_.window_ns; }
  uint64_t max_bytes() const { return options_.max_bytes; }

 private:
  absl::StatusOr<RecorderSegment> Snapshot();
  // Rotate, keeping at least the window before `keep_from_ns` (a freeze's instant).
  absl::Status Rotate(bool force, int64_t keep_from_ns) ABSL_LOCKS_EXCLUDED(mu_);
  // Appends `segment`; lets go of the oldest while the next alone covers the ring from
  // `cutoff_ns`, and while the budget is passed.
  void Keep(RecorderSegment segment, int64_t cutoff_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t rotate_ns() const {
    return options_.rotate_ns > 0 ? options_.rotate_ns : options_.window_ns / 2;
  }

  tensorflow::ProfilerService::StubInterface* const profiler_;
  const std::shared_ptr<grpc::Channel> snapshot_channel_;
  Clock& clock_;
  const RecorderOptions options_;
  const tensorflow::ProfileRequest request_;
  // One snapshot at a time: the server serves them one after another anyway, and two would
  // race to append their segments out of order.
  absl::Mutex snapshot_mu_;
  mutable absl::Mutex mu_;
  RecorderState state_ ABSL_GUARDED_BY(mu_) = RecorderState::kOff;
  std::string reason_ ABSL_GUARDED_BY(mu_);
  int64_t oversized_ ABSL_GUARDED_BY(mu_) = 0;  // snapshots let go past max_bytes since armed
  std::deque<RecorderSegment> ring_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_rotate_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

// Keeps a Recorder going on a thread of its own (podprof-recorder): arms it, rotates it when a
// snapshot is due, and arms it again `rearm_ns` after it stopped being armed (the workload
// restarted, another client let go, a snapshot failed). Destroying it disarms the recorder.
class RecorderDriver {
 public:
  // Arms only when `may_arm` (if given) says so; it may fill `why` with what it waits for.
  using MayArm = std::function<bool(std::string* why)>;
  RecorderDriver(Recorder* recorder, Clock& clock, int64_t tick_ns = 100'000'000,
                 int64_t rearm_ns = 10'000'000'000, MayArm may_arm = nullptr);
  ~RecorderDriver();
  RecorderDriver(const RecorderDriver&) = delete;
  RecorderDriver& operator=(const RecorderDriver&) = delete;

 private:
  // One look at the recorder; the time of the next.
  int64_t Tick();

  Recorder* const recorder_;
  Clock& clock_;
  const int64_t tick_ns_, rearm_ns_;
  const MayArm may_arm_;
  // Only the driver's thread: when it may arm again, and the state it last logged.
  int64_t next_arm_ns_ = 0;
  RecorderState logged_ = RecorderState::kOff;
  PeriodicThread thread_;  // last: stopped before the members it uses go
};

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_RECORDER_H_
