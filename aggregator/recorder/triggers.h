// The flight recorder's triggers: each second the pod's telemetry (telemetry.h) is checked for
// a step-time regression, a straggling chip, a duty-cycle drop, a hang and a slower DCN link
// into a host of a multi-slice job, and when one holds,
// a snapshot of every host is taken at that instant (the agents' recorders give the window
// before it; an agent without one captures from then on). Webhooks (Alertmanager's form) and
// people add snapshots of their own. Each trigger has a cooldown and an hourly budget, and
// automatic snapshots keep a gap between them, so one incident takes one snapshot.
//
// The defaults, and why (docs/RECORDER.md has the longer argument):
//  - step_time: the pod's median step time over the last 10 s above 1.10x its median over the
//    60 s before. A healthy step varies by a few percent from step to step; over ten seconds of
//    steps the median moves far less, so 10% sustained is a real change, and small enough to
//    catch one chip in a synchronous pod slowed by 1.2x (every chip waits for it).
//  - straggler: one chip's step time, as a ratio to the pod's median of the same second, above
//    the chips' median ratio by 10% and by six robust deviations (1.4826 x MAD) over most of the
//    last 10 s: a chip alone, not pod-wide noise or a change still spreading through the pod.
//  - duty_cycle: the median of the pod's per-second duty cycle over 10 s below 0.85x the median
//    over the 60 s before (15%, the drop Google's managed ML diagnostics triggers on), while
//    steps still end every second (a pod with none is the hang trigger's).
//  - hang: no step ended on any chip for 30 s while the agents still report, after steps did
//    (a step of a large model can take seconds; 30 s is many of them).
//  - dcn (multi-slice jobs): one host's DCN transfer latency p50 (agent/dcn_latency.h) above
//    1.5x its own median over the `baseline` seconds before and by at least 50 us, in each of
//    its last 5 samples: a link that got slower, not one noisy second (a healthy transit moves
//    by a few microseconds; the network's own budget is tens of them). Its own baseline, not the
//    pod's: links differ, and the hosts of one slice share the slow link into it.
//  - cooldown 10 min per trigger, 6 per trigger per hour, and 60 s between automatic snapshots.
#ifndef PODPROF_AGGREGATOR_RECORDER_TRIGGERS_H_
#define PODPROF_AGGREGATOR_RECORDER_TRIGGERS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/recorder/telemetry.h"
#include "common/clock.h"
#include "common/periodic.h"
#include "nlohmann/json.hpp"

namespace podprof::aggregator {

struct TriggerOptions {
  // Automatic snapshots from telemetry; webhooks and people may still take them when off.
  bool enabled = true;
  // The window each snapshot keeps before its instant.
  int64_t window_ns = 5'000'000'000;
  int recent_s = 10;
  int baseline_s = 60;
  double step_regression = 0.10;
  double straggler = 0.10;
  double duty_drop = 0.15;
  int64_t hang_ns = 30'000'000'000;
  double dcn_regression = 0.5;
  double dcn_margin_us = 50;
  int dcn_intervals = 5;
  int64_t cooldown_ns = int64_t{600} * 1'000'000'000;
  int hourly_budget = 6;
  int64_t min_gap_ns = 60'000'000'000;
};

// A trigger that holds: its name (step_time, straggler, duty_cycle, hang, dcn, webhook), a sentence
// for people, and the telemetry that made it hold.
struct Firing {
  std::string trigger;
  std::string reason;
  nlohmann::json evidence = nlohmann::json::object();
  int64_t at_ns = 0;  // when the gate admitted it (set by TriggerLoop::Fire)
};

// Which triggers hold now, most specific first (hang, dcn, straggler, step_time, duty_cycle),
// given the pod's closed seconds (oldest first), each chip's recent samples and each host's
// DCN points over the recent and baseline seconds (TelemetryHub::DcnHistory).
std::vector<Firing> Evaluate(
    const std::vector<PodPoint>& pod,
    const std::map<std::pair<std::string, int>, std::vector<ChipPoint>>& chips,
    const TriggerOptions& options, const std::map<std::string, HostDcn>& dcn = {});

// The firing an Alertmanager webhook body stands for ({"status": "firing", "receiver": ...,
// "alerts": [{"status", "labels": {"alertname", ...}, "annotations": {"summary", ...}}]}, as a
// goodput monitor or an alert rule sends it): the "webhook" trigger, its reason the firing
// alerts' names and summaries ("; "-joined, cut to 1 kB, what a label holds), its evidence how
// many alerts fired and the receiver. None when no alert fires (a resolved group).
// InvalidArgument naming the field ("alerts[2].status") for alerts that are not an array of at
// most 1000, or a status, alertname or receiver that is not a string; annotations are
// free-form, so a summary that is not a string is left out.
absl::StatusOr<std::optional<Firing>> FiringOfAlertmanager(const nlohmann::json& body);

// Cooldowns and budgets. Not thread-safe (TriggerLoop guards it).
class TriggerGate {
 public:
  explicit TriggerGate(const TriggerOptions& options) : options_(options) {}
  // Empty when `trigger` may snapshot at `now_ns` (and counts it); else why not.
  std::string Admit(const std::string& trigger, int64_t now_ns, bool automatic);

 private:
  const TriggerOptions options_;
  std::map<std::string, std::deque<int64_t>> fired_;  // per trigger, the last hour's
  int64_t last_automatic_ns_ = INT64_MIN / 2;
};

// What a trigger did, for the API and the logs.
struct TriggerEvent {
  int64_t time_ns = 0;
  Firing firing;
  std::string capture_id;  // empty when suppressed or failed
  std::string outcome;     // "snapshot", or why not
};

// Runs the triggers on a thread of its own (podprof-trigger): each second it flushes the hub
// (pod seconds, stored roll-ups, retention), evaluates, and takes snapshots through `take`.
class TriggerLoop {
 public:
  // Starts a snapshot for a firing and returns its capture id.
  using TakeSnapshot = std::function<absl::StatusOr<std::string>(const Firing&)>;
  TriggerLoop(TelemetryHub* hub, Clock& clock, TriggerOptions options, TakeSnapshot take,
              bool run_thread = true);
  // Stops the thread and stores what the hub still holds.
  ~TriggerLoop();
  TriggerLoop(const TriggerLoop&) = delete;
  TriggerLoop& operator=(const TriggerLoop&) = delete;

  // One pass at `now_ns` (the thread's; tests call it on a fake clock).
  void Tick(int64_t now_ns) ABSL_LOCKS_EXCLUDED(mu_);
  // A firing from outside (a webhook): through the same gate; the capture id, or
  // ResourceExhausted naming the cooldown or budget that refused it.
  absl::StatusOr<std::string> Fire(const Firing& firing, bool automatic) ABSL_LOCKS_EXCLUDED(mu_);
  // The last 100 events, oldest first: snapshots taken, and each refusal once while its
  // trigger keeps holding.
  std::vector<TriggerEvent> Events() const ABSL_LOCKS_EXCLUDED(mu_);
  const TriggerOptions& options() const { return options_; }

 private:
  TelemetryHub* const hub_;
  Clock& clock_;
  const TriggerOptions options_;
  const TakeSnapshot take_;
  mutable absl::Mutex mu_;
  TriggerGate gate_ ABSL_GUARDED_BY(mu_);
  std::deque<TriggerEvent> events_ ABSL_GUARDED_BY(mu_);
  // Triggers refused while they keep holding (logged once), with why.
  std::map<std::string, std::string> refused_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<PeriodicThread> thread_;  // last: stopped before the members it uses go
};

}  // namespace podprof::aggregator

#endif  // PODPROF_AGGREGATOR_RECORDER_TRIGGERS_H_
