#include "insight/collectives.h"

#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace podprof::insight {

std::string CollectiveNames::Host(int32_t host) const {
  return host >= 0 && static_cast<size_t>(host) < hosts.size() ? hosts[host] : std::string();
}

std::string CollectiveNames::Kernel(int64_t key) const {
  auto it = kernels.find(key);
  return it == kernels.end() ? std::string() : it->second;
}

void CollectiveNames::Merge(const CollectiveNames& other) {
  if (hosts.size() < other.hosts.size()) hosts.resize(other.hosts.size());
  for (size_t i = 0; i < other.hosts.size(); ++i) {
    if (!other.hosts[i].empty()) hosts[i] = other.hosts[i];
  }
  for (const auto& [key, name] : other.kernels) kernels.try_emplace(key, name);
}

std::vector<CollectiveRun> CollectiveRuns(const trace::HostCapture& capture, int32_t host,
                                          const std::vector<int64_t>& chip_keys,
                                          const std::vector<int64_t>& kernel_keys,
                                          CollectiveNames* names) {
  if (host >= 0) {
    if (names->hosts.size() <= static_cast<size_t>(host)) names->hosts.resize(host + 1);
    names->hosts[host] = capture.host.name;
  }
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
  size_t n = 0;
  for (const trace::EventBlock& b : capture.blocks) {
    if (!trace::IsKernelLine(b.kind)) continue;
    for (uint64_t id : b.collective) n += id != 0;
  }
  out.reserve(n);
  for (const trace::EventBlock& b : capture.blocks) {
    if (!trace::IsKernelLine(b.kind)) continue;
    for (size_t i = 0; i < b.size(); ++i) {
      if (b.collective[i] == 0) continue;
      CollectiveRun r;
      r.host = host;
      r.chip_ordinal = capture.host.chips[b.chip].ordinal;
      r.chip_key = static_cast<size_t>(b.chip) < chip_keys.size() ? chip_keys[b.chip] : b.chip;
      r.kernel_key =
          b.kernel[i] < kernel_keys.size() ? kernel_keys[b.kernel[i]] : int64_t{b.kernel[i]};
      if (b.kernel[i] < capture.kernels.size() && !names->kernels.contains(r.kernel_key)) {
        names->kernels.emplace(r.kernel_key, capture.kernels[b.kernel[i]].name);
      }
      r.id = b.collective[i];
      r.start_ns = b.base_ns + b.start_ps[i] / 1000;
      r.end_ns = r.start_ns + b.duration_ps[i] / 1000;
      const auto& s = steps[b.chip];
      auto it =
          std::upper_bound(s.begin(), s.end(), std::make_tuple(r.start_ns, INT64_MAX, INT64_MAX));
      if (it != s.begin() && r.start_ns < std::get<1>(*std::prev(it))) {
        r.step = std::get<2>(*std::prev(it));
      }
      out.push_back(r);
    }
  }
  return out;
}

namespace {

// One instance while the pod's instances are walked: enough to rank it, its row built only if
// it is among the worst.
struct InstanceSummary {
  int64_t caused_ps = 0;
  int64_t spread_ps = 0;
  int64_t lateness_ps = 0;
  uint64_t id = 0;
  int chips = 0;
  const CollectiveRun* last = nullptr;
};

// Hash of a (chip key, kernel key) pair.
struct PairKey {
  int64_t chip, kernel;
  bool operator==(const PairKey& o) const { return chip == o.chip && kernel == o.kernel; }
  template <typename H>
  friend H AbslHashValue(H h, const PairKey& k) {
    return H::combine(std::move(h), k.chip, k.kernel);
  }
};

// The members of every instance: by id alone on one clock, by (id, host) when hosts are not
// compared.
std::vector<std::vector<const CollectiveRun*>> GroupInstances(
    const std::vector<CollectiveRun>& runs, bool within_host) {
  std::vector<std::vector<const CollectiveRun*>> groups;
  if (within_host) {
    absl::flat_hash_map<std::pair<uint64_t, int32_t>, size_t> index;
    for (const CollectiveRun& r : runs) {
      auto [it, fresh] = index.try_emplace({r.id, r.host}, groups.size());
      if (fresh) groups.emplace_back();
      groups[it->second].push_back(&r);
    }
  } else {
    absl::flat_hash_map<uint64_t, size_t> index;
    for (const CollectiveRun& r : runs) {
      auto [it, fresh] = index.try_emplace(r.id, groups.size());
      if (fresh) groups.emplace_back();
      groups[it->second].push_back(&r);
    }
  }
  return groups;
}

std::string ChipName(const CollectiveRun& r, const CollectiveNames& names) {
  return absl::StrCat(names.Host(r.host), " chip ", r.chip_ordinal);
}

}  // namespace

CollectiveReport AnalyzeCollectives(const std::vector<CollectiveRun>& runs,
                                    const CollectiveNames& names, size_t max_instances,
                                    bool within_host) {
  // A pod's capture holds hundreds of thousands of collective runs: everything per run is
  // keyed by the caller's integer chip and kernel keys in hash maps, and names are made only
  // for the rows that are kept.
  CollectiveReport report;
  absl::flat_hash_map<PairKey, Wait> waits;
  // (chip, kernel) -> the chip that arrived last (its key) -> how often.
  absl::flat_hash_map<PairKey, absl::flat_hash_map<int64_t, int64_t>> last_of;
  absl::flat_hash_map<int64_t, StragglerRow> rows;              // by chip key
  absl::flat_hash_map<int64_t, const CollectiveRun*> chip_run;  // a run of each chip, to name it
  std::vector<InstanceSummary> instances;
  for (std::vector<const CollectiveRun*>& members : GroupInstances(runs, within_host)) {
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end(), [](const CollectiveRun* a, const CollectiveRun* b) {
      return a->start_ns < b->start_ns;
    });
    const CollectiveRun& last = *members.back();
    const int64_t last_ns = last.start_ns;
    InstanceSummary inst;
    inst.id = last.id;
    inst.last = &last;
    inst.chips = static_cast<int>(members.size());
    inst.spread_ps = (last_ns - members.front()->start_ns) * 1000;
    inst.lateness_ps = (last_ns - members[members.size() - 2]->start_ns) * 1000;
    for (const CollectiveRun* m : members) {
      const int64_t wait_ps = (last_ns - m->start_ns) * 1000;
      inst.caused_ps += wait_ps;
      const PairKey key{m->chip_key, m->kernel_key};
      Wait& w = waits[key];
      w.wait_ps += wait_ps;
      ++w.instances;
      ++last_of[key][last.chip_key];
      ++rows[m->chip_key].instances;
      chip_run.try_emplace(m->chip_key, m);
    }
    StragglerRow& s = rows[last.chip_key];
    ++s.times_last;
    s.caused_ps += inst.caused_ps;
    s.lateness_ps += inst.lateness_ps;
    if (last.step >= 0 && s.steps.size() < 64 &&
        std::find(s.steps.begin(), s.steps.end(), last.step) == s.steps.end()) {
      s.steps.push_back(last.step);
    }
    instances.push_back(inst);
  }
  report.instances = static_cast<int64_t>(instances.size());
  for (auto& [key, w] : waits) {
    // The straggler most often last; on a tie, the first by name, as a reader would list them.
    for (const auto& [chip, times] : last_of[key]) {
      const std::string name = ChipName(*chip_run.at(chip), names);
      if (times > w.straggler_times || (times == w.straggler_times && name < w.straggler)) {
        w.straggler = name;
        w.straggler_times = times;
      }
    }
    report.waits[{key.chip, key.kernel}] = std::move(w);
  }
  for (auto& [chip, row] : rows) {
    if (row.times_last == 0) continue;
    row.host = names.Host(chip_run.at(chip)->host);
    row.chip_ordinal = chip_run.at(chip)->chip_ordinal;
    std::sort(row.steps.begin(), row.steps.end());
    report.stragglers.push_back(std::move(row));
  }
  std::sort(report.stragglers.begin(), report.stragglers.end(),
            [](const StragglerRow& a, const StragglerRow& b) {
              return std::tie(b.caused_ps, a.host, a.chip_ordinal) <
                     std::tie(a.caused_ps, b.host, b.chip_ordinal);
            });
  // The worst instances: only they become rows.
  auto worse = [](const InstanceSummary& a, const InstanceSummary& b) {
    return std::tie(b.caused_ps, a.id) < std::tie(a.caused_ps, b.id);
  };
  const size_t keep = std::min(max_instances, instances.size());
  std::partial_sort(instances.begin(), instances.begin() + static_cast<long>(keep), instances.end(),
                    worse);
  for (size_t i = 0; i < keep; ++i) {
    const InstanceSummary& s = instances[i];
    InstanceRow row;
    row.id = s.id;
    row.kernel_name = names.Kernel(s.last->kernel_key);
    row.step = s.last->step;
    row.straggler_host = names.Host(s.last->host);
    row.straggler_chip = s.last->chip_ordinal;
    row.chips = s.chips;
    row.spread_ps = s.spread_ps;
    row.lateness_ps = s.lateness_ps;
    row.caused_ps = s.caused_ps;
    report.worst.push_back(std::move(row));
  }
  return report;
}

}  // namespace podprof::insight
