// The flight recorder must not cost the workload what it is there to watch. Continuous
// profiling has a price on the device (each rotation stops and restarts every tracer), and how
// much is the workload's and the runtime's: so the guard measures it, as a profiler that stops
// itself past a failure threshold does. Before the recorder first arms, it takes `window` of the
// workload's step times without it (the baseline); once armed, `window` with it (the trial). If
// the trial's median step time exceeds the baseline's by more than `max_slowdown`, the recorder
// disarms for good and says so (state disabled, with both figures) in Info, the heartbeats and
// `podprof agents`. Comparing the two windows either side of the switch, not the whole run, keeps
// a workload that slows for its own reasons later from turning the recorder off just when a
// snapshot would help.
//
// Its step times are the agent's telemetry (agent/telemetry.h): the guard exists only where the
// telemetry runs; without step times (a workload that reports none) it lets the recorder arm
// after the baseline, unguarded, and logs why.
#ifndef PODPROF_AGENT_RECORDER_GUARD_H_
#define PODPROF_AGENT_RECORDER_GUARD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/recorder.h"
#include "common/clock.h"
#include "proto/podprof_types.pb.h"

namespace podprof::agent {

struct RecorderGuardOptions {
  int64_t window_ns = 30'000'000'000;
  double max_slowdown = 0.10;
};

// Thread-safe: Observe runs on the telemetry thread, MayArm on the recorder's.
class RecorderGuard {
 public:
  // `recorder` must outlive the guard.
  RecorderGuard(Recorder* recorder, Clock& clock, RecorderGuardOptions options);

  // One telemetry sample: its step time (the median over the chips that ended steps).
  void Observe(const podprof::v1::TelemetrySample& sample) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the recorder may arm now; `why` says what it waits for when not.
  bool MayArm(std::string* why) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Phase { kBaseline, kTrial, kPassed, kTripped };
  // Ends the trial: disables the recorder, or lets it be.
  void Judge() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Recorder* const recorder_;
  Clock& clock_;
  const RecorderGuardOptions options_;
  absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kBaseline;
  int64_t phase_start_ns_ ABSL_GUARDED_BY(mu_) = 0;
  // Armed time the trial has seen (pauses for captures do not count).
  int64_t trial_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_sample_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<double> baseline_ ABSL_GUARDED_BY(mu_), trial_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podprof::agent

#endif  // PODPROF_AGENT_RECORDER_GUARD_H_
