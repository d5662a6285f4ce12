#include "agent/recorder_guard.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/median.h"

namespace podprof::agent {
namespace {

// Step times each side needs for a median worth comparing.
constexpr size_t kMinSamples = 3;

// The sample's step time: the median over the chips that ended steps; 0 when none did.
double StepOf(const podprof::v1::TelemetrySample& s) {
  std::vector<double> chips;
  for (const podprof::v1::ChipTelemetry& c : s.chips()) {
    if (c.steps() > 0) chips.push_back(c.step_mean_us());
  }
  return Median(chips);
}

}  // namespace

RecorderGuard::RecorderGuard(Recorder* recorder, Clock& clock, RecorderGuardOptions options)
    : recorder_(recorder), clock_(clock), options_(options) {
  phase_start_ns_ = clock_.NowNs();
}

bool RecorderGuard::MayArm(std::string* why) {
  absl::MutexLock lock(&mu_);
  switch (phase_) {
    case Phase::kBaseline: {
      // A window, and enough steps in it to compare (or twice the window without them).
      const int64_t elapsed = clock_.NowNs() - phase_start_ns_;
      if (elapsed >= options_.window_ns &&
          (baseline_.size() >= kMinSamples || elapsed >= 2 * options_.window_ns)) {
        return true;
      }
      *why = absl::StrFormat(
          "measuring the workload's step time without the recorder first (%d s), to check the "
          "recorder's cost against it",
          options_.window_ns / 1'000'000'000);
      return false;
    }
    case Phase::kTripped:
      *why = "disabled by its guard";
      return false;
    default:
      return true;
  }
}

void RecorderGuard::Observe(const podprof::v1::TelemetrySample& sample) {
  const double step = StepOf(sample);
  const bool armed = recorder_->state() == RecorderState::kArmed;
  absl::MutexLock lock(&mu_);
  const int64_t now = clock_.NowNs();
  const int64_t since_last = last_sample_ns_ > 0 ? now - last_sample_ns_ : 0;
  last_sample_ns_ = now;
  switch (phase_) {
    case Phase::kBaseline:
      if (!armed) {
        if (step > 0) baseline_.push_back(step);
        return;
      }
      phase_ = Phase::kTrial;  // the driver armed it: the trial begins with the next sample
      return;
    case Phase::kTrial:
      if (!armed) return;  // paused for a capture, or re-arming: not the recorder's time
      if (step > 0) trial_.push_back(step);
      trial_ns_ += since_last;
      if (trial_ns_ >= 2 * options_.window_ns ||
          (trial_ns_ >= options_.window_ns && trial_.size() >= kMinSamples)) {
        Judge();
      }
      return;
    default:
      return;
  }
}

void RecorderGuard::Judge() {
  if (baseline_.size() < kMinSamples || trial_.size() < kMinSamples) {
    phase_ = Phase::kPassed;
    PODPROF_LOG(WARNING) << "flight recorder unguarded: the workload reported too few step times "
                            "to measure the recorder's cost ("
                         << baseline_.size() << " without it, " << trial_.size() << " with it)";
    return;
  }
  const double before = Median(baseline_), with = Median(trial_);
  const double cost = with / before - 1;
  if (cost <= options_.max_slowdown) {
    phase_ = Phase::kPassed;
    PODPROF_LOG(INFO) << absl::StrFormat(
        "flight recorder costs the workload %+.1f%% step time (%.3f ms with it, %.3f ms "
        "without): within the guard's %.0f%%",
        100 * cost, with / 1000, before / 1000, 100 * options_.max_slowdown);
    return;
  }
  phase_ = Phase::kTripped;
  const std::string reason = absl::StrFormat(
      "it slowed the workload: median step %.3f ms with it, %.3f ms in the %d s before it "
      "(%+.1f%%, more than [recorder] max_slowdown %.0f%%); restart the agent to try again",
      with / 1000, before / 1000, options_.window_ns / 1'000'000'000, 100 * cost,
      100 * options_.max_slowdown);
  PODPROF_LOG(WARNING) << "flight recorder disabled: " << reason;
  if (absl::Status s = recorder_->Disable(reason); !s.ok()) PODPROF_LOG(WARNING) << s.message();
}

}  // namespace podprof::agent
