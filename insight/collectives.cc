#include "insight/collectives.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace podprof::insight {

std::vector<CollectiveRun> CollectiveRuns(const trace::HostCapture& capture,
                                          const std::vector<int64_t>& chip_keys,
                                          const std::vector<int64_t>& kernel_keys) {
  // Per chip: the steps' (start ns, end ns, number), in time order.
  std::vector<std::vector<std::tuple<int64_t, int64_t, int64_t>>> steps(capture.host.chips.size());
  for (const trace::EventBlock& b : capture.blocks) {
    if (b.kind != trace::LineKind::kSteps || b.chip < 0 ||
        static_cast<size_t>(b.chip) >= steps.size()) {
      continue;
    }
    for (size_t i = 0; i < b.size(); ++i) {
      const int64_t start = b.base_ns + b.start_ps[i] / 1000;
      int64_t number = static_cast<int64_t>(steps[b.chip].size());
      int64_t parsed;
      if (b.kernel[i] < capture.kernels.size() &&
          absl::SimpleAtoi(capture.kernels[b.kernel[i]].name, &parsed)) {
        number = parsed;
      }
      steps[b.chip].emplace_back(start, start + b.duration_ps[i] / 1000, number);
    }
    std::sort(steps[b.chip].begin(), steps[b.chip].end());
  }
  std::vector<CollectiveRun> out;
  for (const trace::EventBlock& b : capture.blocks) {
    if (!trace::IsKernelLine(b.kind)) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      if (b.collective[i] == 0) continue;
      CollectiveRun r;
      r.host = capture.host.name;
      r.chip_ordinal = capture.host.chips[b.chip].ordinal;
      r.chip_key = static_cast<size_t>(b.chip) < chip_keys.size() ? chip_keys[b.chip] : b.chip;
      r.kernel_key =
          b.kernel[i] < kernel_keys.size() ? kernel_keys[b.kernel[i]] : int64_t{b.kernel[i]};
      if (b.kernel[i] < capture.kernels.size()) r.kernel_name = capture.kernels[b.kernel[i]].name;
      r.id = b.collective[i];
      r.start_ns = b.base_ns + b.start_ps[i] / 1000;
      r.end_ns = r.start_ns + b.duration_ps[i] / 1000;
      const auto& s = steps[b.chip];
      auto it =
          std::upper_bound(s.begin(), s.end(), std::make_tuple(r.start_ns, INT64_MAX, INT64_MAX));
      if (it != s.begin() && r.start_ns < std::get<1>(*std::prev(it))) {
        r.step = std::get<2>(*std::prev(it));
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

CollectiveReport AnalyzeCollectives(const std::vector<CollectiveRun>& runs, size_t max_instances,
                                    bool within_host) {
  CollectiveReport report;
  std::map<std::pair<uint64_t, std::string>, std::vector<const CollectiveRun*>> by_id;
  for (const CollectiveRun& r : runs) by_id[{r.id, within_host ? r.host : ""}].push_back(&r);
  std::map<std::pair<std::string, int>, StragglerRow> rows;
  // (chip key, kernel key) -> straggler name -> times
  std::map<std::pair<int64_t, int64_t>, std::map<std::string, int64_t>> last_of;
  for (auto& [key, members] : by_id) {
    const uint64_t id = key.first;
    if (members.size() < 2) continue;
    ++report.instances;
    std::sort(members.begin(), members.end(), [](const CollectiveRun* a, const CollectiveRun* b) {
      return a->start_ns < b->start_ns;
    });
    const CollectiveRun& last = *members.back();
    const int64_t last_ns = last.start_ns;
    const std::string last_name = absl::StrCat(last.host, " chip ", last.chip_ordinal);
    InstanceRow inst;
    inst.id = id;
    inst.kernel_name = last.kernel_name;
    inst.step = last.step;
    inst.straggler_host = last.host;
    inst.straggler_chip = last.chip_ordinal;
    inst.chips = static_cast<int>(members.size());
    inst.spread_ps = (last_ns - members.front()->start_ns) * 1000;
    inst.lateness_ps = (last_ns - members[members.size() - 2]->start_ns) * 1000;
    for (const CollectiveRun* m : members) {
      const int64_t wait_ps = (last_ns - m->start_ns) * 1000;
      inst.caused_ps += wait_ps;
      Wait& w = report.waits[{m->chip_key, m->kernel_key}];
      w.wait_ps += wait_ps;
      ++w.instances;
      ++last_of[{m->chip_key, m->kernel_key}][last_name];
      StragglerRow& row = rows[{m->host, m->chip_ordinal}];
      row.host = m->host;
      row.chip_ordinal = m->chip_ordinal;
      ++row.instances;
    }
    StragglerRow& s = rows[{last.host, last.chip_ordinal}];
    ++s.times_last;
    s.caused_ps += inst.caused_ps;
    s.lateness_ps += inst.lateness_ps;
    if (last.step >= 0 && s.steps.size() < 64 &&
        std::find(s.steps.begin(), s.steps.end(), last.step) == s.steps.end()) {
      s.steps.push_back(last.step);
    }
    report.worst.push_back(std::move(inst));
  }
  for (auto& [key, names] : last_of) {
    Wait& w = report.waits[key];
    for (const auto& [name, times] : names) {
      if (times > w.straggler_times) {
        w.straggler = name;
        w.straggler_times = times;
      }
    }
  }
  for (auto& [key, row] : rows) {
    if (row.times_last == 0) continue;
    std::sort(row.steps.begin(), row.steps.end());
    report.stragglers.push_back(std::move(row));
  }
  std::sort(report.stragglers.begin(), report.stragglers.end(),
            [](const StragglerRow& a, const StragglerRow& b) { return a.caused_ps > b.caused_ps; });
  std::sort(report.worst.begin(), report.worst.end(),
            [](const InstanceRow& a, const InstanceRow& b) { return a.caused_ps > b.caused_ps; });
  if (report.worst.size() > max_instances) report.worst.resize(max_instances);
  return report;
}

}  // namespace podprof::insight
