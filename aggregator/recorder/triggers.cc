#include "aggregator/recorder/triggers.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/logging.h"
#include "common/median.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "http/json_body.h"

namespace podprof::aggregator {
namespace {

using Json = nlohmann::json;
constexpr int64_t kSecondNs = 1'000'000'000;
constexpr int64_t kHourNs = 3600 * kSecondNs;
constexpr size_t kEventsKept = 100;

std::string Ms(double us) { return absl::StrFormat("%.2f ms", us / 1000); }

// The pod's closed seconds split into the recent window and the baseline before it.
struct Windows {
  std::vector<const PodPoint*> recent, baseline;
};

Windows Split(const std::vector<PodPoint>& pod, const TriggerOptions& o) {
  Windows w;
  if (pod.empty()) return w;
  const int64_t last = pod.back().second;
  for (const PodPoint& p : pod) {
    if (p.second > last - o.recent_s) {
      w.recent.push_back(&p);
    } else if (p.second > last - o.recent_s - o.baseline_s) {
      w.baseline.push_back(&p);
    }
  }
  return w;
}

// Values of the points that have one (`get` returns nullopt for the others).
template <typename Get>
std::vector<double> Values(const std::vector<const PodPoint*>& points, Get get) {
  std::vector<double> out;
  for (const PodPoint* p : points) {
    if (std::optional<double> v = get(*p)) out.push_back(*v);
  }
  return out;
}

Json Series(const std::vector<const PodPoint*>& points, bool step) {
  Json out = Json::array();
  for (const PodPoint* p : points) {
    out.push_back(Json::array({p->second, step ? std::round(p->step_us) : p->duty_percent}));
  }
  return out;
}

std::optional<Firing> StepTime(const Windows& w, const TriggerOptions& o) {
  auto step = [](const PodPoint& p) -> std::optional<double> {
    return p.steps > 0 ? std::optional<double>(p.step_us) : std::nullopt;
  };
  const std::vector<double> recent = Values(w.recent, step), base = Values(w.baseline, step);
  if (recent.size() * 2 < static_cast<size_t>(o.recent_s) ||
      base.size() * 2 < static_cast<size_t>(o.baseline_s)) {
    return std::nullopt;
  }
  const double r = Median(recent), b = Median(base);
  if (!(b > 0 && r > b * (1 + o.step_regression))) return std::nullopt;
  Firing f{"step_time",
           absl::StrFormat("pod step time %s over the last %d s, %.2fx its %s over the %d s "
                           "before",
                           Ms(r), o.recent_s, r / b, Ms(b), o.baseline_s)};
  f.evidence = {{"recent_step_us", std::round(r)},          {"baseline_step_us", std::round(b)},
                {"ratio", std::round(r / b * 1000) / 1000}, {"threshold", 1 + o.step_regression},
                {"recent", Series(w.recent, true)},         {"baseline", Series(w.baseline, true)}};
  return f;
}

std::optional<Firing> DutyCycle(const Windows& w, const TriggerOptions& o) {
  // A second with no step at all is a hang's to report, not a drop's.
  for (const PodPoint* p : w.recent) {
    if (p->steps == 0) return std::nullopt;
  }
  auto duty = [](const PodPoint& p) -> std::optional<double> {
    return p.duty_percent >= 0 ? std::optional<double>(p.duty_percent) : std::nullopt;
  };
  const std::vector<double> recent = Values(w.recent, duty), base = Values(w.baseline, duty);
  if (recent.size() * 2 < static_cast<size_t>(o.recent_s) ||
      base.size() * 2 < static_cast<size_t>(o.baseline_s)) {
    return std::nullopt;
  }
  // Medians: a drop that holds over most of the window, not one second's dip (the first
  // second of a stall is a partial one).
  const double r = Median(recent), b = Median(base);
  if (!(b >= 1 && r < b * (1 - o.duty_drop))) return std::nullopt;
  Firing f{"duty_cycle", absl::StrFormat("pod duty cycle %.1f%% over the last %d s, down %.0f%% "
                                         "from %.1f%% over the %d s before",
                                         r, o.recent_s, 100 * (1 - r / b), b, o.baseline_s)};
  f.evidence = {{"recent_duty_percent", r},
                {"baseline_duty_percent", b},
                {"threshold", 1 - o.duty_drop},
                {"recent", Series(w.recent, false)},
                {"baseline", Series(w.baseline, false)}};
  return f;
}

std::optional<Firing> Hang(const std::vector<PodPoint>& pod, const TriggerOptions& o) {
  if (pod.empty()) return std::nullopt;
  const int64_t last = pod.back().second, span = o.hang_ns / kSecondNs;
  int64_t quiet = 0, last_step = INT64_MIN;
  for (const PodPoint& p : pod) {
    if (p.steps > 0) last_step = std::max(last_step, p.second);
    if (p.second > last - span && p.steps == 0 && p.chips > 0) ++quiet;
  }
  // Every second of the span reported (at least 90% of them) and none ended a step, after
  // steps did: a job that never ran a step is starting, not hung.
  if (last_step == INT64_MIN || last_step > last - span || quiet * 10 < span * 9) {
    return std::nullopt;
  }
  Firing f{"hang", absl::StrFormat(
                       "no step ended on any chip for %d s (the last one at %s)", last - last_step,
                       absl::FormatTime("%H:%M:%S UTC", absl::FromUnixSeconds(last_step),
                                        absl::UTCTimeZone()))};
  f.evidence = {{"last_step_second", last_step},
                {"quiet_seconds", last - last_step},
                {"chips_reporting", pod.back().chips}};
  return f;
}

// Each chip's step time against the pod's median of the same second, the median of those
// ratios over the recent seconds: a pod-wide change cancels out, and the one second a change
// spreads through the pod (hosts sample it at slightly different moments) does not move a
// median.
std::optional<Firing> Straggler(
    const std::vector<PodPoint>& pod,
    const std::map<std::pair<std::string, int>, std::vector<ChipPoint>>& chips,
    const TriggerOptions& o) {
  std::map<int64_t, double> pod_step;  // second -> the pod's median step time
  for (const PodPoint& p : pod) {
    if (p.steps > 0 && p.step_us > 0) pod_step[p.second] = p.step_us;
  }
  struct Chip {
    double ratio;
    double step_us;
    const std::pair<std::string, int>* key;
  };
  std::vector<Chip> ranked;
  for (const auto& [key, points] : chips) {
    std::vector<double> ratios, steps;
    for (const ChipPoint& p : points) {
      auto it = pod_step.find(p.time_ns / kSecondNs);
      if (p.values.steps() <= 0 || it == pod_step.end()) continue;
      ratios.push_back(p.values.step_mean_us() / it->second);
      steps.push_back(p.values.step_mean_us());
    }
    if (ratios.size() * 2 >= static_cast<size_t>(o.recent_s)) {
      ranked.push_back({Median(ratios), Median(steps), &key});
    }
  }
  if (ranked.size() < 4) return std::nullopt;
  std::vector<double> values, deviations;
  for (const Chip& c : ranked) values.push_back(c.ratio);
  const double median = Median(values);
  for (double v : values) deviations.push_back(std::abs(v - median));
  const double sigma = 1.4826 * Median(deviations);
  const Chip worst = *std::max_element(
      ranked.begin(), ranked.end(), [](const Chip& a, const Chip& b) { return a.ratio < b.ratio; });
  if (!(worst.ratio > median * (1 + o.straggler) && worst.ratio > median + 6 * sigma)) {
    return std::nullopt;
  }
  const auto& [host, chip] = *worst.key;
  Firing f{"straggler", absl::StrFormat("chip %d of %s: step %s over the last %d s, %.2fx the "
                                        "pod's median in the same seconds",
                                        chip, host, Ms(worst.step_us), o.recent_s, worst.ratio)};
  f.evidence = {{"host", host},
                {"chip", chip},
                {"step_us", std::round(worst.step_us)},
                {"ratio_to_pod_median", std::round(worst.ratio * 1000) / 1000},
                {"robust_sigma", std::round(sigma * 1e4) / 1e4},
                {"chips", ranked.size()}};
  return f;
}

// A host whose DCN latency regressed: its recent and baseline p50, us.
struct Regressed {
  std::string host;
  int slice;
  double recent, baseline;
  const std::vector<DcnPoint>* points;
};

// Each host's DCN latency against its own baseline: its last `n` samples' p50 all above
// (1 + dcn_regression) x the median p50 of the baseline seconds before them, and by
// dcn_margin_us. Hosts that stopped reporting (their last sample a few seconds older than the
// newest of any host) are not judged on what they said before. Worst ratio first.
std::vector<Regressed> RegressedHosts(const std::map<std::string, HostDcn>& hosts,
                                      const TriggerOptions& o, size_t n) {
  int64_t newest = INT64_MIN;
  for (const auto& [host, h] : hosts) {
    if (!h.points.empty()) newest = std::max(newest, h.points.back().time_ns);
  }
  std::vector<Regressed> regressed;
  for (const auto& [host, h] : hosts) {
    const std::vector<DcnPoint>& p = h.points;
    if (p.size() <= n || p.back().time_ns < newest - 3 * kSecondNs) continue;
    const int64_t first_recent = p[p.size() - n].time_ns;
    std::vector<double> base, recent;
    for (size_t i = 0; i + n < p.size(); ++i) {
      if (p[i].time_ns >= first_recent - int64_t{o.baseline_s} * kSecondNs) {
        base.push_back(p[i].p50_us);
      }
    }
    if (base.size() * 2 < static_cast<size_t>(o.baseline_s)) continue;
    const double b = Median(base);
    bool all = b > 0;
    for (size_t i = p.size() - n; i < p.size() && all; ++i) {
      all = p[i].p50_us > b * (1 + o.dcn_regression) && p[i].p50_us - b >= o.dcn_margin_us;
      recent.push_back(p[i].p50_us);
    }
    if (all) regressed.push_back({host, h.slice, Median(recent), b, &p});
  }
  std::sort(regressed.begin(), regressed.end(), [](const Regressed& a, const Regressed& b) {
    return a.recent / a.baseline > b.recent / b.baseline;
  });
  return regressed;
}

// The dcn trigger: fires on the regressed hosts, naming the worst with its figures and every
// regressed host and slice.
std::optional<Firing> Dcn(const std::map<std::string, HostDcn>& hosts, const TriggerOptions& o) {
  const auto n = static_cast<size_t>(std::max(1, o.dcn_intervals));
  const std::vector<Regressed> regressed = RegressedHosts(hosts, o, n);
  if (regressed.empty()) return std::nullopt;
  const Regressed& w = regressed.front();
  auto slice_of = [](int slice) {
    return slice >= 0 ? absl::StrCat(" (slice ", slice, ")") : std::string();
  };
  std::string reason = absl::StrFormat(
      "DCN transfer latency into %s%s: p50 %.0f us over its last %d samples, %.2fx its %.0f us "
      "over the %d s before",
      w.host, slice_of(w.slice), w.recent, static_cast<int>(n), w.recent / w.baseline, w.baseline,
      o.baseline_s);
  std::vector<int> slices;
  Json hosts_json = Json::array();
  for (const Regressed& r : regressed) {
    if (r.slice >= 0 && std::find(slices.begin(), slices.end(), r.slice) == slices.end()) {
      slices.push_back(r.slice);
    }
    if (hosts_json.size() < 16) {
      hosts_json.push_back({{"host", r.host},
                            {"slice", r.slice},
                            {"recent_p50_us", std::round(r.recent * 10) / 10},
                            {"baseline_p50_us", std::round(r.baseline * 10) / 10},
                            {"ratio", std::round(r.recent / r.baseline * 1000) / 1000}});
    }
  }
  std::sort(slices.begin(), slices.end());
  if (regressed.size() > 1) {
    absl::StrAppend(
        &reason, "; ", regressed.size(), " hosts regressed",
        slices.empty() ? "" : absl::StrCat(" (slices ", absl::StrJoin(slices, ", "), ")"));
  }
  Json series = Json::array();
  for (size_t i = w.points->size() - n; i < w.points->size(); ++i) {
    const DcnPoint& p = (*w.points)[i];
    series.push_back(Json::array({p.time_ns / kSecondNs, std::round(p.p50_us * 10) / 10}));
  }
  Firing f{"dcn", reason};
  f.evidence = {{"host", w.host},
                {"slice", w.slice},
                {"recent_p50_us", std::round(w.recent * 10) / 10},
                {"baseline_p50_us", std::round(w.baseline * 10) / 10},
                {"ratio", std::round(w.recent / w.baseline * 1000) / 1000},
                {"threshold", 1 + o.dcn_regression},
                {"margin_us", o.dcn_margin_us},
                {"intervals", n},
                {"recent", std::move(series)},
                {"hosts", std::move(hosts_json)},
                {"slices", slices}};
  return f;
}

}  // namespace

std::vector<Firing> Evaluate(
    const std::vector<PodPoint>& pod,
    const std::map<std::pair<std::string, int>, std::vector<ChipPoint>>& chips,
    const TriggerOptions& options, const std::map<std::string, HostDcn>& dcn) {
  std::vector<Firing> out;
  const Windows w = Split(pod, options);
  if (std::optional<Firing> f = Hang(pod, options)) out.push_back(*std::move(f));
  // A slow link slows its receivers' steps (and the pod's): the link is the more specific.
  if (std::optional<Firing> f = Dcn(dcn, options)) out.push_back(*std::move(f));
  if (std::optional<Firing> f = Straggler(pod, chips, options)) out.push_back(*std::move(f));
  if (std::optional<Firing> f = StepTime(w, options)) out.push_back(*std::move(f));
  if (std::optional<Firing> f = DutyCycle(w, options)) out.push_back(*std::move(f));
  return out;
}

std::string TriggerGate::Admit(const std::string& trigger, int64_t now_ns, bool automatic) {
  std::deque<int64_t>& fired = fired_[trigger];
  while (!fired.empty() && fired.front() <= now_ns - kHourNs) fired.pop_front();
  if (!fired.empty() && now_ns - fired.back() < options_.cooldown_ns) {
    return absl::StrCat(trigger, " is cooling down (", options_.cooldown_ns / kSecondNs,
                        " s after its last snapshot, ", (now_ns - fired.back()) / kSecondNs,
                        " s ago)");
  }
  if (static_cast<int>(fired.size()) >= options_.hourly_budget) {
    return absl::StrCat(trigger, " used its budget of ", options_.hourly_budget,
                        " snapshots in the last hour");
  }
  if (automatic && now_ns - last_automatic_ns_ < options_.min_gap_ns) {
    return absl::StrCat("an automatic snapshot was taken ",
                        (now_ns - last_automatic_ns_) / kSecondNs, " s ago (at most one per ",
                        options_.min_gap_ns / kSecondNs, " s)");
  }
  fired.push_back(now_ns);
  if (automatic) last_automatic_ns_ = now_ns;
  return "";
}

TriggerLoop::TriggerLoop(TelemetryHub* hub, Clock& clock, TriggerOptions options, TakeSnapshot take,
                         bool run_thread)
    : hub_(hub), clock_(clock), options_(options), take_(std::move(take)), gate_(options_) {
  if (run_thread) {
    // Each whole second of the clock, from now.
    thread_ = std::make_unique<PeriodicThread>(
        "podprof-trigger", clock_, clock_.NowNs(), [this]() -> std::optional<int64_t> {
          Tick(clock_.NowNs());
          return (clock_.NowNs() / kSecondNs + 1) * kSecondNs;
        });
  }
}

TriggerLoop::~TriggerLoop() {
  if (thread_ != nullptr) thread_->Stop();
  if (absl::Status s = hub_->Flush(clock_.NowNs(), /*all=*/true); !s.ok()) {
    PODPROF_LOG(WARNING) << "telemetry not stored at shutdown: " << s.message();
  }
}

void TriggerLoop::Tick(int64_t now_ns) {
  if (absl::Status s = hub_->Flush(now_ns); !s.ok()) {
    PODPROF_LOG(WARNING) << "telemetry not stored: " << s.message();
  }
  if (!options_.enabled) return;
  std::vector<Firing> firings = Evaluate(
      hub_->PodHistory(), hub_->ChipHistory(now_ns - int64_t{options_.recent_s} * kSecondNs),
      options_,
      hub_->DcnHistory(now_ns -
                       (int64_t{options_.baseline_s} + options_.recent_s + options_.dcn_intervals) *
                           kSecondNs));
  {
    absl::MutexLock lock(&mu_);
    for (auto it = refused_.begin(); it != refused_.end();) {
      const bool holds = std::any_of(firings.begin(), firings.end(),
                                     [&](const Firing& f) { return f.trigger == it->first; });
      it = holds ? std::next(it) : refused_.erase(it);
    }
  }
  if (firings.empty()) return;
  // One snapshot for what holds at this instant: the first (most specific) trigger the gate
  // admits takes it, and its evidence lists the others that held too.
  Json also = Json::array();
  for (const Firing& f : firings) also.push_back(f.trigger);
  for (Firing& f : firings) {
    f.evidence["holding"] = also;
    absl::StatusOr<std::string> id = Fire(f, /*automatic=*/true);
    if (id.ok() || id.status().code() != absl::StatusCode::kResourceExhausted) return;
  }
}

absl::StatusOr<std::string> TriggerLoop::Fire(const Firing& firing, bool automatic) {
  const int64_t now = clock_.NowNs();
  TriggerEvent event{now, firing, "", ""};
  {
    absl::MutexLock lock(&mu_);
    event.outcome = gate_.Admit(firing.trigger, now, automatic);
    if (!event.outcome.empty()) {
      // Logged once while it keeps holding, not every second (Tick forgets a trigger that
      // stopped holding).
      if (refused_.insert({firing.trigger, event.outcome}).second) {
        PODPROF_LOG(INFO) << "trigger " << firing.trigger << " holds (" << firing.reason
                          << ") but no snapshot: " << event.outcome;
        events_.push_back(event);
        while (events_.size() > kEventsKept) events_.pop_front();
      }
      return absl::ResourceExhaustedError(event.outcome);
    }
    refused_.erase(firing.trigger);
  }
  event.firing.at_ns = now;
  absl::StatusOr<std::string> id = take_(event.firing);
  event.outcome = id.ok() ? "snapshot" : std::string(id.status().message());
  if (id.ok()) event.capture_id = *id;
  PODPROF_LOG(INFO) << "trigger " << firing.trigger << ": " << firing.reason << " -> "
                    << (id.ok() ? "snapshot " + *id : event.outcome);
  absl::MutexLock lock(&mu_);
  events_.push_back(event);
  while (events_.size() > kEventsKept) events_.pop_front();
  return id;
}

std::vector<TriggerEvent> TriggerLoop::Events() const {
  absl::MutexLock lock(&mu_);
  return {events_.begin(), events_.end()};
}

namespace {

// An alert's name and summary, or none when it does not fire; `at` names it in errors.
absl::StatusOr<std::optional<std::string>> FiringAlertName(const nlohmann::json& a,
                                                           const std::string& at) {
  ASSIGN_OR_RETURN(const std::string status,
                   http::StringField(a, "status", "firing", absl::StrCat(at, ".status")));
  if (status != "firing") return std::nullopt;
  std::string name = "alert";
  if (const auto labels = a.find("labels"); labels != a.end() && labels->is_object()) {
    ASSIGN_OR_RETURN(
        name, http::StringField(*labels, "alertname", name, absl::StrCat(at, ".labels.alertname")));
  }
  if (const auto notes = a.find("annotations"); notes != a.end() && notes->is_object()) {
    if (const auto summary = notes->find("summary");
        summary != notes->end() && summary->is_string()) {
      absl::StrAppend(&name, ": ", summary->get_ref<const std::string&>());
    }
  }
  return name;
}

}  // namespace

absl::StatusOr<std::optional<Firing>> FiringOfAlertmanager(const nlohmann::json& body) {
  const auto alerts = body.find("alerts");
  if (alerts == body.end() || !alerts->is_array() || alerts->size() > 1000) {
    return absl::InvalidArgumentError("alerts must be an array (of at most 1000 alerts)");
  }
  // Alertmanager sends status, labels and receiver as strings (labels are a map of strings);
  // any other type is a broken or hostile sender, refused with the field named rather than
  // guessed at.
  std::vector<std::string> names;
  for (size_t i = 0; i < alerts->size(); ++i) {
    const nlohmann::json& a = (*alerts)[i];
    if (!a.is_object()) continue;
    ASSIGN_OR_RETURN(std::optional<std::string> name,
                     FiringAlertName(a, absl::StrCat("alerts[", i, "]")));
    if (name) names.push_back(*std::move(name));
  }
  ASSIGN_OR_RETURN(const std::string receiver, http::StringField(body, "receiver", ""));
  if (names.empty()) return std::nullopt;
  Firing f{"webhook", TruncateUtf8(absl::StrJoin(names, "; "), 1024)};
  f.evidence = {{"alerts", names.size()}, {"receiver", receiver}};
  return f;
}

}  // namespace podprof::aggregator
