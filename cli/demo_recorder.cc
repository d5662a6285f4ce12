#include "cli/demo_recorder.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/capture_command.h"
#include "cli/demo_pod.h"
#include "cli/exit_codes.h"
#include "common/clock.h"
#include "launch/pod_launcher.h"
#include "nlohmann/json.hpp"
#include "proto/recorder_states.h"

namespace podprof::cli {
namespace {

using nlohmann::json;
using Stub = v1::Aggregator::StubInterface;
constexpr int64_t kSecondNs = 1'000'000'000;
// The recorders' ring and the triggered snapshot's window: long enough that a trigger firing
// 3.5-4.5 s after the fault (two of its three recent seconds must have changed, and each
// second settles 1.5 s before it counts) still holds a second or two from before it. Three
// recent seconds, not two: a stall's first second is a partial one, whose low duty cycle alone
// would otherwise fire the duty-cycle trigger before the hang's.
constexpr int64_t kWindowNs = 6 * kSecondNs;
// The baseline snapshot's window, taken from the recorders before the fault.
constexpr int64_t kBaselineNs = 2 * kSecondNs;
// How long a snapshot may take to be stored once its trigger fired.
constexpr int64_t kStoreTimeoutNs = 60 * kSecondNs;

std::string Seconds(int64_t ns) { return absl::StrFormat("%.1f s", ns / 1e9); }

// The recorders armed behind a 2 s guard, triggers on 3 s of recent seconds against the 6 s
// before, a hang after 4 s without a step, snapshots of the 6 s before the trigger.
void ArmRecorders(const DemoFault& fault, int64_t epoch_ns, launch::PodOptions* pod) {
  absl::StrAppend(&pod->aggregator_config,
                  "# podprof demo --recorder: triggers that need seconds, not minutes\n"
                  "[triggers]\nrecent = \"3s\"\nbaseline = \"6s\"\nwindow = \"",
                  kWindowNs / kSecondNs, "s\"\nhang_after = \"4s\"\nmin_gap = \"5s\"\n");
  pod->agent_config = absl::StrCat(
      "# podprof demo --recorder: each agent's flight recorder armed after a 2 s guard\n"
      "[recorder]\nenabled = true\nwindow = \"",
      kWindowNs / kSecondNs, "s\"\nguard_window = \"2s\"\n");
  pod->simhost_flags.push_back(absl::StrCat("--fault-epoch-ns=", epoch_ns));
  for (const std::string& f : fault.simhost_flags) pod->simhost_flags.push_back(f);
}

// Waits until every agent's recorder is armed, or until `give_up_ns` (wall clock); whether
// they all were, and the states of those that were not.
std::pair<bool, std::string> WaitForRecorders(AggregatorClient& client, Clock& clock, int hosts,
                                              int64_t give_up_ns) {
  std::vector<std::string> not_armed;
  do {
    v1::ListAgentsResponse agents;
    not_armed.clear();
    if (client.Call(&Stub::ListAgents, v1::ListAgentsRequest(), &agents).ok()) {
      int armed = 0;
      for (const auto& a : agents.agents()) {
        if (v1::RecorderStateOf(a.recorder()) == v1::RECORDER_STATE_ARMED) {
          ++armed;
        } else {
          not_armed.push_back(absl::StrCat(a.host().host_name(), " ",
                                           v1::RecorderStateText(a.recorder()), " ",
                                           a.recorder().reason()));
        }
      }
      if (armed == hosts) return {true, ""};
    }
  } while (clock.SleepUntilNs(std::min(give_up_ns, clock.NowNs() + 250'000'000), nullptr) &&
           clock.NowNs() < give_up_ns);
  return {false, absl::StrJoin(not_armed, "; ")};
}

// A snapshot of the `kBaselineNs` before now from the recorders, labelled as the demo's
// baseline; its id.
absl::StatusOr<std::string> TakeBaseline(AggregatorClient& client) {
  CaptureOptions c;
  c.snapshot = true;
  c.duration_ns = kBaselineNs;
  c.cause.set_trigger("manual");
  c.cause.set_reason("podprof demo: the healthy baseline, before the fault");
  c.labels = {{"demo", "baseline"}};
  c.format = OutputFormat::kJson;
  c.timeout_ns = kStoreTimeoutNs;
  std::ostringstream sink_out, sink_err;
  absl::StatusOr<CaptureResult> r = RunCapture(client, c, sink_out, sink_err);
  if (!r.ok()) return r.status();
  if (r->status != v1::CAPTURE_STATUS_COMPLETE && r->status != v1::CAPTURE_STATUS_PARTIAL) {
    return absl::UnavailableError(absl::StrCat("the baseline snapshot ", r->capture_id, " ended ",
                                               CaptureStatusName(r->status)));
  }
  return r->capture_id;
}

bool Automatic(const std::string& trigger) {
  return trigger == "step_time" || trigger == "straggler" || trigger == "duty_cycle" ||
         trigger == "hang" || trigger == "dcn";
}

bool Finished(v1::CaptureStatus s) {
  return s != v1::CAPTURE_STATUS_PENDING && s != v1::CAPTURE_STATUS_RUNNING;
}

// The first snapshot an automatic trigger took since `since_ns`, once stored; NotFound when no
// trigger fired by `fire_by_ns` (its label trigger_ns; the polls go on until then),
// DeadlineExceeded when its snapshot was not stored within kStoreTimeoutNs of it.
absl::StatusOr<v1::CaptureSummary> WaitForTrigger(AggregatorClient& client, Clock& clock,
                                                  int64_t since_ns, int64_t fire_by_ns) {
  int64_t give_up = fire_by_ns;
  std::string seen;
  while (true) {
    v1::ListCapturesRequest request;
    request.set_since_ns(since_ns);
    request.set_limit(50);
    v1::ListCapturesResponse listed;
    if (client.Call(&Stub::ListCaptures, request, &listed).ok()) {
      // Newest first: the oldest triggered one is the incident's.
      for (int i = listed.captures_size() - 1; i >= 0; --i) {
        const v1::CaptureSummary& c = listed.captures(i);
        if (!c.has_cause() || !Automatic(c.cause().trigger())) continue;
        // One that fired past the deadline did not fire within it.
        if (c.cause().trigger_ns() > fire_by_ns) continue;
        if (Finished(c.status())) return c;
        if (seen.empty()) give_up = clock.NowNs() + kStoreTimeoutNs;
        seen = c.capture_id();
        break;
      }
    }
    if (clock.NowNs() >= give_up) break;
    clock.SleepUntilNs(std::min(give_up, clock.NowNs() + 500'000'000), nullptr);
  }
  if (!seen.empty()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the triggered snapshot ", seen, " was not stored within ", Seconds(kStoreTimeoutNs)));
  }
  return absl::NotFoundError("no trigger fired");
}

// What the demo found, as it prints it.
struct Found {
  v1::CaptureSummary snapshot;
  v1::GetStragglersResponse stragglers;
  std::string baseline_id;
  std::string diff_headline;
  int64_t elapsed_ns = 0;   // from the demo's start to the trigger
  int64_t fault_ns = 0;     // when the fault began (wall clock)
  int64_t fault_at_ns = 0;  // the same, from the demo's start
};

// "12 kernels ran slower (p50 past 5%); the most: fusion.3 +61% p50", from the comparison of
// the baseline with the snapshot.
std::string DiffHeadline(AggregatorClient& client, const std::string& baseline,
                         const std::string& snapshot) {
  v1::CompareCapturesRequest request;
  request.set_baseline_capture_id(baseline);
  request.set_candidate_capture_id(snapshot);
  v1::CompareCapturesResponse diff;
  if (absl::Status s = client.Call(&Stub::CompareCaptures, request, &diff); !s.ok()) {
    return absl::StrCat("(no diff: ", s.message(), ")");
  }
  const v1::KernelDelta* most = nullptr;
  for (const v1::KernelDelta& d : diff.deltas()) {
    if (d.regression() && (most == nullptr || d.p50_change() > most->p50_change())) most = &d;
  }
  if (most == nullptr) return "no kernel ran slower at its median (p50) by more than 5%";
  return absl::StrFormat("%d kernels ran slower (p50 up more than 5%%); the most: %s, p50 %+.0f%%",
                         diff.regression_count(), most->kernel().op_name(),
                         100 * most->p50_change());
}

// The straggler the analysis named, as "host-2 chip 1", or "".
std::string Named(const v1::GetStragglersResponse& s) {
  if (!s.straggler_named() || s.chips_size() == 0) return "";
  return absl::StrCat(s.chips(0).host_name(), " chip ", s.chips(0).chip_ordinal());
}

// Where the snapshot's window lies against the fault, for people.
std::string WindowSaid(const Found& f) {
  const v1::CaptureSummary& c = f.snapshot;
  std::string said = c.window() == "before-request"
                         ? absl::StrCat("the ", Seconds(c.end_ns() - c.start_ns()),
                                        " before the trigger, from the flight recorders")
                         : absl::StrCat(Seconds(c.end_ns() - c.start_ns()), ", ",
                                        c.window().empty() ? "window unknown" : c.window());
  absl::StrAppend(
      &said, c.start_ns() < f.fault_ns
                 ? absl::StrCat(" (from ", Seconds(f.fault_ns - c.start_ns()), " before the fault)")
                 : " (all of it after the fault)");
  return said;
}

void WriteFoundTable(const Found& f, const DemoFault& fault, const std::string& agg,
                     const std::string& web, std::ostream& out) {
  const v1::CaptureSummary& c = f.snapshot;
  out << "\ntriggered snapshot " << c.capture_id() << " (" << CaptureStatusName(c.status()) << ": "
      << c.hosts_size() << " hosts, " << c.event_count() << " events)\n"
      << "  trigger    " << c.cause().trigger() << ", " << Seconds(f.elapsed_ns - f.fault_at_ns)
      << " after the fault\n"
      << "  reason     " << c.cause().reason() << "\n"
      << "  window     " << WindowSaid(f) << "\n"
      << "  straggler  " << f.stragglers.verdict() << "\n";
  if (!fault.host.empty()) {
    const bool named = Named(f.stragglers) == absl::StrCat(fault.host, " chip ", fault.chip);
    out << "  injected   " << fault.said << (named ? ": the straggler named" : ": NOT named")
        << "\n";
  } else {
    out << "  injected   " << fault.said
        << " (the trigger for it: " << absl::StrJoin(fault.triggers, " or ") << ")\n";
  }
  if (!f.baseline_id.empty()) {
    out << "\nbefore and after (baseline " << f.baseline_id << ": " << Seconds(kBaselineNs)
        << " from the recorders before the fault):\n  podprof diff " << f.baseline_id << " "
        << c.capture_id() << " --aggregator " << agg << "\n  " << f.diff_headline << "\n";
  }
  out << "\nweb page: " << web << "captures/" << c.capture_id() << "\n";
}

json FoundJson(const Found& f, const DemoFault& fault, const std::string& dir,
               const std::string& web) {
  const v1::CaptureSummary& c = f.snapshot;
  json o = {{"snapshot_id", c.capture_id()},
            {"status", CaptureStatusName(c.status())},
            {"trigger", c.cause().trigger()},
            {"reason", c.cause().reason()},
            {"start_ns", c.start_ns()},
            {"end_ns", c.end_ns()},
            {"window", c.window()},
            {"straggler_verdict", f.stragglers.verdict()},
            {"straggler_named", f.stragglers.straggler_named()},
            {"injected", fault.said},
            {"baseline_id", f.baseline_id},
            {"diff_headline", f.diff_headline},
            {"elapsed_s", f.elapsed_ns / 1e9},
            {"fault_ns", f.fault_ns},
            {"dir", dir},
            {"web_url", web + "captures/" + c.capture_id()}};
  if (f.stragglers.straggler_named() && f.stragglers.chips_size() > 0) {
    o["straggler"] = {{"host", f.stragglers.chips(0).host_name()},
                      {"chip", f.stragglers.chips(0).chip_ordinal()}};
  }
  return o;
}

}  // namespace

absl::StatusOr<DemoFault> ScenarioFault(const std::string& scenario, int hosts,
                                        int64_t fault_at_ns) {
  const std::string at = absl::StrCat(fault_at_ns / 1'000'000, "ms");
  DemoFault f;
  if (scenario == "straggler") {
    const int host = std::min(2, hosts - 1);
    f.host = absl::StrCat("host-", host);
    f.chip = 1;
    f.simhost_flags = {absl::StrCat("--slowdown-at=", at, ":", host, ":1:1.6")};
    f.said = absl::StrCat("chip 1 of ", f.host, " turns 1.6x slower");
    // In a synchronous pod every chip waits for the slow one: the pod's step time rises.
    f.triggers = {"step_time", "straggler"};
  } else if (scenario == "hang") {
    f.simhost_flags = {absl::StrCat("--stall-at=", at)};
    f.said = "the job stops issuing steps";
    f.triggers = {"hang"};
  } else if (scenario == "duty-drop") {
    f.simhost_flags = {absl::StrCat("--duty-drop-at=", at, ":0.4")};
    f.said = "the input pipeline starves the pod: 40% of the steps are not issued";
    f.triggers = {"duty_cycle"};
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--scenario ", scenario, ": no such scenario; use straggler, hang or duty-drop"));
  }
  return f;
}

namespace {

using Say = std::function<void(const std::string&)>;

// Waits for the recorders, then takes the baseline snapshot while there is room before the
// fault (the ring must hold its window, which must end before the fault); its id, or "" with
// why not said.
std::string ArmedBaseline(AggregatorClient& client, Clock& clock, int hosts, int64_t t0,
                          int64_t fault_ns, const Say& say) {
  auto [armed, why_not] = WaitForRecorders(client, clock, hosts, fault_ns);
  if (!armed) {
    say(absl::StrCat("  the recorders were not all armed before the fault (", why_not,
                     "): no baseline, and the snapshot captures from its trigger on"));
    return "";
  }
  say(absl::StrCat("  recorders armed at ", Seconds(clock.NowNs() - t0)));
  const int64_t at = clock.NowNs() + kBaselineNs;
  if (at > fault_ns - 500'000'000) {
    say("  no baseline snapshot: the recorders armed too close to the fault (--fault-at later "
        "leaves room)");
    return "";
  }
  clock.SleepUntilNs(at, nullptr);
  absl::StatusOr<std::string> baseline = TakeBaseline(client);
  if (!baseline.ok()) {
    say(absl::StrCat("  no baseline snapshot: ", baseline.status().message()));
    return "";
  }
  say(absl::StrCat("  baseline snapshot ", *baseline, ": the ", Seconds(kBaselineNs), " before ",
                   Seconds(at - t0)));
  return *baseline;
}

// The straggler analysis of the snapshot and the baseline's diff against it, into `found`.
void Analyse(AggregatorClient& client, Found* found) {
  v1::GetStragglersRequest who;
  who.set_capture_id(found->snapshot.capture_id());
  if (absl::Status s = client.Call(&Stub::GetStragglers, who, &found->stragglers); !s.ok()) {
    found->stragglers.set_verdict(absl::StrCat("(no straggler analysis: ", s.message(), ")"));
  }
  if (!found->baseline_id.empty()) {
    found->diff_headline = DiffHeadline(client, found->baseline_id, found->snapshot.capture_id());
  }
}

// Where the demo's pod is: the aggregator's address, its web root, the demo's folder.
struct PodPlace {
  std::string agg, web, dir;
};

// Prints what was found as options.format says; the exit code: 0 once the snapshot is stored.
int WriteFound(const Found& found, const DemoFault& fault, const DemoOptions& options,
               const PodPlace& place, launch::Pod& pod, std::ostream& out, const Say& say) {
  if (options.format == OutputFormat::kTable) {
    WriteFoundTable(found, fault, place.agg, place.web, out);
    if (options.keep) {
      say(absl::StrCat("\nstill running (--keep): podprof captures --aggregator ", place.agg,
                       "; stop them with kill ", absl::StrJoin(pod.Pids(), " ")));
    }
  } else {
    json o = FoundJson(found, fault, place.dir, place.web);
    o["aggregator"] = place.agg;
    if (options.keep) o["pids"] = pod.Pids();
    out << o.dump(2) << "\n";
  }
  out.flush();
  const v1::CaptureStatus status = found.snapshot.status();
  return status == v1::CAPTURE_STATUS_COMPLETE || status == v1::CAPTURE_STATUS_PARTIAL
             ? 0
             : kExitPartial;
}

}  // namespace

int RunRecorderDemo(const DemoOptions& options, std::ostream& out, std::ostream& err) {
  auto fail = [&](int code, const std::string& message) {
    err << "podprof demo --recorder: " << message << "\n";
    return code;
  };
  if (options.hosts < 1 || options.hosts > 64) return fail(kExitUsage, "--hosts must be 1..64");
  if (options.format == OutputFormat::kCsv) {
    return fail(kExitUsage, "--format csv: the recorder's demo prints a table or json");
  }
  // The triggers compare 3 s against the 6 s before, after the recorders' 4 s guard.
  if (options.fault_at_ns < 12 * kSecondNs) {
    return fail(kExitUsage,
                "--fault-at must be at least 12s: the triggers need a healthy "
                "baseline first");
  }
  absl::StatusOr<DemoFault> fault =
      ScenarioFault(options.scenario, options.hosts, options.fault_at_ns);
  if (!fault.ok()) return fail(kExitUsage, std::string(fault.status().message()));
  absl::StatusOr<std::string> bin = BinDir(options);
  if (!bin.ok()) return fail(kExitBadInput, std::string(bin.status().message()));
  absl::StatusOr<std::string> dir = DemoDir(options);
  if (!dir.ok()) return fail(kExitBadInput, std::string(dir.status().message()));

  const bool table = options.format == OutputFormat::kTable;
  auto say = [&](const std::string& line) {
    (table ? out : err) << line << "\n";
    (table ? out : err).flush();
  };
  RealClock real_clock;
  Clock& clock = options.clock != nullptr ? *options.clock : real_clock;
  const int64_t t0 = clock.NowNs();
  launch::PodOptions pod_options = DemoPod(options, *bin, *dir, clock);
  ArmRecorders(*fault, t0, &pod_options);
  launch::Pod pod(pod_options);
  StopOnSignal stop_on_signal(options.keep, pod);
  if (absl::Status s = pod.Start(); !s.ok()) return fail(kExitBadInput, std::string(s.message()));
  const std::string agg = pod.aggregator_address();
  const std::string web =
      absl::StrCat("http://127.0.0.1:", pod.aggregator_ready().value("http_port", 0), "/");
  say(absl::StrCat("podprof demo --recorder: aggregator on ", agg, ", ", options.hosts,
                   " simulated TPU ", options.generation, " hosts, recorders of ",
                   Seconds(kWindowNs), "; files in ", *dir));
  say(absl::StrCat("scenario ", options.scenario, ": ", fault->said, " at ",
                   Seconds(options.fault_at_ns), " from the start"));

  AggregatorTarget target;
  target.address = agg;
  AggregatorClient client(target, clock);
  if (absl::Status s = WaitForAgents(client, clock, options.hosts, *dir); !s.ok()) {
    return fail(kExitBadInput, std::string(s.message()));
  }
  const int64_t fault_ns = t0 + options.fault_at_ns;
  Found found;
  found.baseline_id = ArmedBaseline(client, clock, options.hosts, t0, fault_ns, say);
  say(absl::StrCat("  waiting for a trigger (at most ", Seconds(options.trigger_timeout_ns),
                   " after the fault)..."));
  absl::StatusOr<v1::CaptureSummary> snap =
      WaitForTrigger(client, clock, t0, fault_ns + options.trigger_timeout_ns);
  if (!snap.ok()) {
    pod.StopAll();
    return fail(
        kExitPartial,
        absl::StrCat(snap.status().message(), " within ", Seconds(options.trigger_timeout_ns),
                     " of the fault (", fault->said, " at ", Seconds(options.fault_at_ns),
                     "); the aggregator's log says what the triggers saw: ", *dir,
                     "/aggregator.log; on a loaded machine try --trigger-timeout 90s"));
  }
  found.snapshot = *snap;
  found.fault_ns = fault_ns;
  found.fault_at_ns = options.fault_at_ns;
  const int64_t trigger_ns =
      snap->cause().trigger_ns() != 0 ? snap->cause().trigger_ns() : clock.NowNs();
  found.elapsed_ns = trigger_ns - t0;
  Analyse(client, &found);
  return WriteFound(found, *fault, options, {agg, web, *dir}, pod, out, say);
}

}  // namespace podprof::cli
