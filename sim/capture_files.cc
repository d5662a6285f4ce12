#include "sim/capture_files.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/skewed_clock.h"
#include "sim/xspace_builder.h"

namespace podprof::sim {
namespace {

// The occurrences XProf's megascale_stats counts for a host (docs/MEGASCALE.md 1.3-1.5): on
// chip 0 only, an instance whose step's module event is in the capture (the step starts in
// the window) and whose send and recv-done both start in it.
std::map<std::string, int64_t> ExpectedOccurrences(const PodModel& model,
                                                   const std::vector<std::vector<ChipStep>>& steps,
                                                   int64_t start_ps, int64_t end_ps) {
  const auto inside = [&](int64_t ps) { return ps >= start_ps && ps < end_ps; };
  std::map<std::string, int64_t> out;
  for (const std::vector<ChipStep>& step : steps) {
    const ChipStep& cs = step[0];
    const int64_t step_ps = cs.start_ns * 1000;
    if (cs.runs.empty() || !inside(step_ps)) continue;
    for (size_t i = 0; i < cs.runs.size(); ++i) {
      const OpTemplate& op = model.ops()[cs.runs[i].op];
      if (op.dcn != DcnRole::kSend) continue;
      size_t done = i + 1;  // the rendezvous' recv-done, after any kernel overlapped with it
      while (done < cs.runs.size() && model.ops()[cs.runs[done].op].dcn != DcnRole::kRecvDone) {
        ++done;
      }
      if (done < cs.runs.size() && inside(step_ps + cs.runs[i].start_ps) &&
          inside(step_ps + cs.runs[done].start_ps)) {
        ++out[op.rendezvous_name];
      }
    }
  }
  return out;
}

}  // namespace

nlohmann::json DcnTruth(const PodModel& model) {
  nlohmann::json j;
  j["slices"] = model.slices();
  j["hosts_per_slice"] = model.hosts_per_slice();
  j["slice"] = model.slice();
  j["dcn_delays"] = nlohmann::json::array();
  for (const DcnDelay& d : model.config().dcn_delays) {
    j["dcn_delays"].push_back(
        {{"slice", d.slice}, {"extra_ns", d.extra_ns}, {"from_ns", d.from_ns}});
  }
  j["slow_slices"] = nlohmann::json::array();
  for (const SlowSlice& s : model.config().slow_slices) {
    j["slow_slices"].push_back({{"slice", s.slice}, {"factor", s.factor}, {"from_ns", s.from_ns}});
  }
  return j;
}

absl::StatusOr<std::vector<std::string>> WritePodCaptures(const PodConfig& pod,
                                                          const CaptureFilesOptions& options) {
  if (options.duration_ns <= 0) {
    return absl::InvalidArgumentError("the capture window must be longer than 0");
  }
  PodConfig host0 = pod;
  host0.host_index = 0;
  absl::StatusOr<PodModel> shared = PodModel::Create(host0);
  if (!shared.ok()) return shared.status();
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create ", options.dir, ": ", ec.message()));

  SessionWindow window;
  window.true_start_ns = options.true_start_ns;
  window.true_end_ns = options.true_start_ns + options.duration_ns;
  window.counters = options.counters;
  // The pod-wide part of every step of the window, once for all hosts.
  std::map<int64_t, StepSchedule> schedules;
  for (int64_t s = shared->StepAt(window.true_start_ns); s <= shared->StepAt(window.true_end_ns);
       ++s) {
    schedules.emplace(s, shared->Schedule(s));
  }
  FakeClock truth(window.true_start_ns);
  SkewedClock clock(truth, 0, 0);
  nlohmann::json j = DcnTruth(*shared);
  j.erase("slice");  // host 0's; each file's is below
  j["hosts"] = pod.hosts;
  j["chips"] = shared->chips();
  j["generation"] = pod.generation;
  j["pod_seed"] = pod.pod_seed;
  j["step_period_ns"] = shared->step_period_ns();
  j["program_id"] = shared->program_id();
  j["module"] = absl::StrCat(shared->module_name(), "(", shared->program_id(), ")");
  j["true_start_ns"] = window.true_start_ns;
  j["true_end_ns"] = window.true_end_ns;
  j["files"] = nlohmann::json::array();
  std::vector<std::string> paths;
  for (int h = 0; h < pod.hosts; ++h) {
    PodConfig config = pod;
    config.host_index = h;
    absl::StatusOr<PodModel> model = PodModel::Create(config);
    if (!model.ok()) return model.status();
    window.host_name = absl::StrCat(options.host_prefix, h);
    const std::string path = absl::StrCat(options.dir, "/", window.host_name, ".xplane.pb");
    std::vector<std::vector<ChipStep>> steps;
    const auto step_of = [&](int64_t s) {
      steps.push_back(model->Step(s, schedules.at(s)));
      return steps.back();
    };
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InternalError(absl::StrCat("cannot open ", path));
    absl::StatusOr<WriteResult> written = WriteXSpace(*model, clock, window, out, nullptr, step_of);
    if (!written.ok()) return written.status();
    out.close();
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
    nlohmann::json occurrences = nlohmann::json::object();
    for (const auto& [name, n] : ExpectedOccurrences(*model, steps, window.true_start_ns * 1000,
                                                     window.true_end_ns * 1000)) {
      occurrences[name] = n;
    }
    j["files"].push_back({{"host", window.host_name},
                          {"host_index", h},
                          {"slice", model->slice()},
                          {"path", path},
                          {"kernel_events", written->kernel_events},
                          {"xprof_occurrences", occurrences}});
    paths.push_back(path);
  }
  const std::string truth_path = options.dir + "/truth.json";
  std::ofstream truth_out(truth_path, std::ios::trunc);
  truth_out << j.dump(2) << "\n";
  truth_out.close();
  if (!truth_out) return absl::InternalError(absl::StrCat("cannot write ", truth_path));
  return paths;
}

}  // namespace podprof::sim
