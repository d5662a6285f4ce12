#include "insight/collectives.h"

#include <algorithm>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "insight/evidence.h"

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

std::vector<ChipSteps> StepsByChip(const trace::HostCapture& capture) {
  std::vector<ChipSteps> steps(capture.host.chips.size());
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
  return steps;
}

int64_t StepAt(const ChipSteps& steps, int64_t ns) {
  auto it = std::upper_bound(steps.begin(), steps.end(), std::make_tuple(ns, INT64_MAX, INT64_MAX));
  if (it != steps.begin() && ns < std::get<1>(*std::prev(it))) return std::get<2>(*std::prev(it));
  return -1;
}

std::vector<CollectiveRun> CollectiveRuns(const trace::HostCapture& capture, int32_t host,
                                          const std::vector<int64_t>& chip_keys,
                                          const std::vector<int64_t>& kernel_keys,
                                          CollectiveNames* names) {
  if (host >= 0) {
    if (names->hosts.size() <= static_cast<size_t>(host)) names->hosts.resize(host + 1);
    names->hosts[host] = capture.host.name;
  }
  const std::vector<ChipSteps> steps = StepsByChip(capture);
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
      r.duration_ns = b.duration_ps[i] / 1000;
      r.end_carry = static_cast<int32_t>(b.base_ns + (b.start_ps[i] + b.duration_ps[i]) / 1000 -
                                         r.start_ns - r.duration_ns);
      r.step = StepAt(steps[b.chip], r.start_ns);
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
  uint32_t last_pair = 0;
  int64_t last_step = -1;
};

}  // namespace

void PodCollectives::ExpectHosts(size_t hosts) {
  absl::MutexLock lock(&mu_);
  expected_hosts_ = hosts;
}

void PodCollectives::Add(const std::vector<CollectiveRun>& runs) {
  absl::MutexLock lock(&mu_);
  if (pod_chips_ == 0 && expected_hosts_ > 0 && !runs.empty()) {
    absl::flat_hash_set<int64_t> chips;
    for (const CollectiveRun& r : runs) chips.insert(r.chip_key);
    pod_chips_ = chips.size() * expected_hosts_;
  }
  for (const CollectiveRun& r : runs) {
    auto [inst, fresh] = instance_of_.try_emplace({r.id, within_host_ ? r.host : -1}, ids_.size());
    if (fresh) {
      ids_.push_back(r.id);
      bases_.push_back(r.start_ns);
      members_.emplace_back();
    }
    auto [chip, new_chip] = chip_of_.try_emplace(r.chip_key, chips_.size());
    if (new_chip) chips_.push_back({r.chip_key, r.host, r.chip_ordinal});
    auto [pair, new_pair] = pair_of_.try_emplace({r.chip_key, r.kernel_key}, pairs_.size());
    if (new_pair) pairs_.push_back({r.kernel_key, chip->second, r.host});
    Pair& p = pairs_[pair->second];
    p.max_duration_ns = std::max(p.max_duration_ns, r.duration_ns);
    std::vector<Member>& members = members_[inst->second];
    if (members.size() == members.capacity() && members.size() < pod_chips_) {
      // Doubled, but straight to the pod's size once that is within a doubling: one
      // reallocation fewer for pod-wide instances, whose arrivals are most of the memory.
      size_t room = std::max<size_t>(2 * members.size(), 1);
      if (2 * room >= pod_chips_) room = pod_chips_;
      members.reserve(room);
    }
    int32_t step = -1;
    if (r.step >= 0) {
      auto [at, new_step] =
          step_index_.try_emplace(r.step, static_cast<int32_t>(step_numbers_.size()));
      if (new_step) step_numbers_.push_back(r.step);
      step = at->second;
    }
    int64_t delta;  // an agent's starts may be anywhere in int64
    int32_t start = kFar;
    if (!__builtin_sub_overflow(r.start_ns, bases_[inst->second], &delta) && delta > kFar &&
        delta <= INT32_MAX) {
      start = static_cast<int32_t>(delta);
    } else {
      far_starts_[{inst->second, static_cast<uint32_t>(members.size())}] = r.start_ns;
    }
    members.push_back({start, pair->second, step});
  }
}

size_t PodCollectives::arrivals() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& m : members_) n += m.size();
  return n;
}

size_t PodCollectives::arrival_bytes() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& m : members_) n += m.capacity() * sizeof(Member);
  n += far_starts_.size() * sizeof(std::pair<std::pair<uint32_t, uint32_t>, int64_t>);
  return n;
}

void PodCollectives::Clear() {
  absl::MutexLock lock(&mu_);
  decltype(instance_of_)().swap(instance_of_);
  decltype(ids_)().swap(ids_);
  decltype(members_)().swap(members_);
  decltype(bases_)().swap(bases_);
  decltype(far_starts_)().swap(far_starts_);
  decltype(pair_of_)().swap(pair_of_);
  decltype(pairs_)().swap(pairs_);
  decltype(chip_of_)().swap(chip_of_);
  decltype(chips_)().swap(chips_);
}

// Analyze's running totals, by pair and chip index.
//
// Who was last is counted per group of instances with the same members (pairs), not per pair:
// all of an instance's members share its last chip, and the instances of one collective op
// have the same members, so a pod has a few groups where it has tens of thousands of pairs.
// Counting per pair kept a list of last chips for each (one entry per chip ever last), grew
// with the pod squared and was scanned for every arrival.
struct PodCollectives::Walk {
  // Per pair, touched for every arrival: kept small and flat (names come at the end).
  struct PairSum {
    int64_t wait_ps = 0;
    int64_t instances = 0;
  };
  // Instances with one set of members: the members (a pair once per arrival) and, by chip
  // index, how often each chip was the last of them.
  struct Group {
    std::vector<uint32_t> pairs;
    absl::flat_hash_map<uint32_t, int64_t> last_of;
  };
  // A member set's key, the same whatever order the members came in: sums of a mix of each
  // pair, two ways, and the count.
  struct GroupKey {
    uint64_t sum = 0, xored = 0, count = 0;
    bool operator==(const GroupKey& o) const {
      return sum == o.sum && xored == o.xored && count == o.count;
    }
    template <typename H>
    friend H AbslHashValue(H h, const GroupKey& k) {
      return H::combine(std::move(h), k.sum, k.xored, k.count);
    }
  };
  std::vector<PairSum> pairs;
  std::vector<StragglerRow> rows;
  std::vector<InstanceSummary> instances;
  int64_t left_out = 0;
  size_t first_left_out = SIZE_MAX;    // its index
  std::vector<int64_t> at;             // the instance's arrivals on the pod's clock
  std::vector<uint32_t> member_pairs;  // a new group's members
  std::vector<Group> groups;
  absl::flat_hash_map<GroupKey, uint32_t> group_of;

  static uint64_t Mix(uint64_t x) {  // splitmix64's finalizer
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  // The group of `key`, made with `members` when new.
  template <typename Pairs>
  Group& GroupOf(const GroupKey& key, const Pairs& members) {
    auto [it, fresh] = group_of.try_emplace(key, static_cast<uint32_t>(groups.size()));
    if (fresh) {
      groups.emplace_back();
      groups.back().pairs.assign(members.begin(), members.end());
    }
    return groups[it->second];
  }
  // Adds `other`, a walk of later instances.
  void Merge(const Walk& other) {
    for (size_t p = 0; p < pairs.size(); ++p) {
      pairs[p].wait_ps += other.pairs[p].wait_ps;
      pairs[p].instances += other.pairs[p].instances;
    }
    for (const auto& [key, g] : other.group_of) {
      Group& mine = GroupOf(key, other.groups[g].pairs);
      for (const auto& [chip, n] : other.groups[g].last_of) mine.last_of[chip] += n;
    }
    for (size_t c = 0; c < rows.size(); ++c) {
      StragglerRow& r = rows[c];
      const StragglerRow& o = other.rows[c];
      r.times_last += o.times_last;
      r.instances += o.instances;
      r.caused_ps += o.caused_ps;
      r.lateness_ps += o.lateness_ps;
      r.expected_last += o.expected_last;
      for (int64_t step : o.steps) AddStep(&r, step);
    }
    instances.insert(instances.end(), other.instances.begin(), other.instances.end());
    left_out += other.left_out;
    first_left_out = std::min(first_left_out, other.first_left_out);
  }
  // The chip most often last in instances of `of` (groups, each counted as often as listed);
  // on a tie, the first by name, as a reader would list them. ("", 0) when none, or when it
  // was not last significantly more often than chance (insight/evidence.h; its chance counted
  // over all of `of`'s instances, which can only make the test stricter).
  template <typename Name>
  std::pair<std::string, int64_t> Straggler(const absl::InlinedVector<uint32_t, 1>& of,
                                            const Name& name) const {
    absl::flat_hash_map<uint32_t, int64_t> merged;
    const absl::flat_hash_map<uint32_t, int64_t>* times = &merged;
    if (of.size() == 1) {
      times = &groups[of[0]].last_of;
    } else {
      for (uint32_t g : of) {
        for (const auto& [chip, n] : groups[g].last_of) merged[chip] += n;
      }
    }
    std::pair<std::string, int64_t> best("", 0);
    for (const auto& [chip, n] : *times) {
      if (n < best.second) continue;
      std::string chip_name = name(chip);
      if (n > best.second || chip_name < best.first) best = {std::move(chip_name), n};
    }
    int64_t instances = 0;
    double expected = 0;
    size_t widest = 0;
    for (uint32_t g : of) {
      int64_t n = 0;
      for (const auto& [chip, times_last] : groups[g].last_of) n += times_last;
      instances += n;
      expected += static_cast<double>(n) / static_cast<double>(groups[g].pairs.size());
      widest = std::max(widest, groups[g].pairs.size());
    }
    if (!SignificantlyLast(best.second, instances, expected, widest)) return {"", 0};
    return best;
  }
  // A step a chip was last in: the first 64 distinct ones, in instance order.
  static void AddStep(StragglerRow* row, int64_t step) {
    if (step >= 0 && row->steps.size() < 64 &&
        std::find(row->steps.begin(), row->steps.end(), step) == row->steps.end()) {
      row->steps.push_back(step);
    }
  }
};

CollectiveReport PodCollectives::Analyze(const CollectiveNames& names, const Correct& correct,
                                         size_t max_instances) const {
  absl::MutexLock lock(&mu_);
  // Instances are independent: each thread walks a range of them into sums of its own, and
  // the sums are merged in range order, which gives what one walk would.
  const size_t threads = CoresUpTo(8);
  std::vector<Walk> walks(std::min(threads, std::max<size_t>(1, members_.size())));
  for (Walk& w : walks) {
    w.pairs.resize(pairs_.size());
    w.rows.resize(chips_.size());
    for (StragglerRow& r : w.rows) r.expected_last = 0;
  }
  ParallelFor(walks.size(), walks.size(), [&](size_t t) {
    // Analyze's thread holds mu_ until every walk has returned, and the walks only read; the
    // assertion says so to the analysis, which checks this lambda as a function of its own.
    mu_.AssertReaderHeld();
    WalkInstances(members_.size() * t / walks.size(), members_.size() * (t + 1) / walks.size(),
                  correct, &walks[t]);
  });
  for (size_t t = 1; t < walks.size(); ++t) walks[0].Merge(walks[t]);
  return Report(names, max_instances, &walks[0]);
}

void PodCollectives::WalkInstances(size_t begin, size_t end, const Correct& correct,
                                   Walk* w) const {
  for (size_t i = begin; i < end; ++i) {
    const std::vector<Member>& members = members_[i];
    if (members.size() < 2) continue;
    // The last arrival, the one before it and the first. Of equal arrivals the chip with the
    // greater key counts as last (a later host, a later chip), whatever order hosts came in.
    w->at.resize(members.size());
    size_t last = 0;
    for (size_t m = 0; m < members.size(); ++m) {
      w->at[m] = correct(pairs_[members[m].pair].host, StartNs(i, m));
      if (w->at[m] > w->at[last] ||
          (w->at[m] == w->at[last] && ChipKey(members[m]) > ChipKey(members[last]))) {
        last = m;
      }
    }
    const int64_t last_ns = w->at[last];
    if (!OneExecution(members, w->at, last_ns)) {
      ++w->left_out;
      w->first_left_out = std::min(w->first_left_out, i);
      continue;
    }
    int64_t first_ns = last_ns, second_ns = INT64_MIN;
    for (size_t m = 0; m < members.size(); ++m) {
      first_ns = std::min(first_ns, w->at[m]);
      if (m != last) second_ns = std::max(second_ns, w->at[m]);
    }
    const uint32_t last_chip = pairs_[members[last].pair].chip;
    InstanceSummary inst;
    inst.id = ids_[i];
    inst.last_pair = members[last].pair;
    inst.last_step = members[last].step >= 0 ? step_numbers_[members[last].step] : -1;
    inst.chips = static_cast<int>(members.size());
    inst.spread_ps = (last_ns - first_ns) * 1000;
    inst.lateness_ps = (last_ns - second_ns) * 1000;
    Walk::GroupKey key;
    for (size_t m = 0; m < members.size(); ++m) {
      const int64_t wait_ps = (last_ns - w->at[m]) * 1000;
      inst.caused_ps += wait_ps;
      Walk::PairSum& pair = w->pairs[members[m].pair];
      pair.wait_ps += wait_ps;
      ++pair.instances;
      StragglerRow& row = w->rows[pairs_[members[m].pair].chip];
      ++row.instances;
      row.expected_last += 1.0 / static_cast<double>(members.size());
      const uint64_t mixed = Walk::Mix(members[m].pair);
      key.sum += mixed;
      key.xored ^= Walk::Mix(mixed);
      ++key.count;
    }
    if (w->group_of.find(key) == w->group_of.end()) {
      w->member_pairs.clear();
      for (const Member& m : members) w->member_pairs.push_back(m.pair);
    }
    ++w->GroupOf(key, w->member_pairs).last_of[last_chip];
    StragglerRow& s = w->rows[last_chip];
    ++s.times_last;
    s.caused_ps += inst.caused_ps;
    s.lateness_ps += inst.lateness_ps;
    Walk::AddStep(&s, inst.last_step);
    w->instances.push_back(inst);
  }
}

bool PodCollectives::OneExecution(const std::vector<Member>& members,
                                  const std::vector<int64_t>& at, int64_t last_ns) const {
  constexpr int64_t kClockSlackNs = 1000;
  for (size_t m = 0; m < members.size(); ++m) {
    if (last_ns - at[m] > pairs_[members[m].pair].max_duration_ns + kClockSlackNs) return false;
  }
  return true;
}

int64_t PodCollectives::ChipKey(const Member& m) const { return chips_[pairs_[m.pair].chip].key; }

int64_t PodCollectives::StartNs(size_t i, size_t m) const {
  const int32_t start = members_[i][m].start;
  if (start != kFar) return bases_[i] + start;
  return far_starts_.at({static_cast<uint32_t>(i), static_cast<uint32_t>(m)});
}

CollectiveReport PodCollectives::Report(const CollectiveNames& names, size_t max_instances,
                                        Walk* w) const {
  auto chip_name = [&](uint32_t chip) {
    // Called only below, while Report's caller holds mu_; the analysis checks a lambda as a
    // function of its own, so the assertion tells it.
    mu_.AssertReaderHeld();
    return absl::StrCat(names.Host(chips_[chip].host), " chip ", chips_[chip].ordinal);
  };
  CollectiveReport report;
  report.instances = static_cast<int64_t>(w->instances.size());
  report.left_out = w->left_out;
  if (w->left_out > 0) {
    const std::vector<Member>& members = members_[w->first_left_out];
    report.left_out_example = absl::StrCat(names.Kernel(pairs_[members.front().pair].kernel_key),
                                           " (all_reduce_unique_id ", ids_[w->first_left_out], ", ",
                                           members.size(), " arrivals)");
  }
  // Each pair's groups (once per arrival in them); pairs in the same groups share a straggler.
  std::vector<absl::InlinedVector<uint32_t, 1>> groups_of(pairs_.size());
  for (size_t g = 0; g < w->groups.size(); ++g) {
    for (uint32_t p : w->groups[g].pairs) groups_of[p].push_back(static_cast<uint32_t>(g));
  }
  absl::flat_hash_map<absl::InlinedVector<uint32_t, 1>, std::pair<std::string, int64_t>> decided;
  for (size_t p = 0; p < pairs_.size(); ++p) {
    const Walk::PairSum& sum = w->pairs[p];
    if (sum.instances == 0) continue;
    Wait wait;
    wait.wait_ps = sum.wait_ps;
    wait.instances = sum.instances;
    auto [it, fresh] = decided.try_emplace(groups_of[p]);
    if (fresh) it->second = w->Straggler(groups_of[p], chip_name);
    std::tie(wait.straggler, wait.straggler_times) = it->second;
    report.waits[{chips_[pairs_[p].chip].key, pairs_[p].kernel_key}] = std::move(wait);
  }
  for (size_t c = 0; c < chips_.size(); ++c) {
    StragglerRow& row = w->rows[c];
    if (row.times_last == 0) continue;
    row.host = names.Host(chips_[c].host);
    row.chip_ordinal = chips_[c].ordinal;
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
  std::vector<InstanceSummary>& all = w->instances;
  const size_t keep = std::min(max_instances, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<long>(keep), all.end(), worse);
  for (size_t i = 0; i < keep; ++i) {
    const InstanceSummary& s = all[i];
    const Chip& chip = chips_[pairs_[s.last_pair].chip];
    InstanceRow row;
    row.id = s.id;
    row.kernel_name = names.Kernel(pairs_[s.last_pair].kernel_key);
    row.step = s.last_step;
    row.straggler_host = names.Host(chip.host);
    row.straggler_chip = chip.ordinal;
    row.chips = s.chips;
    row.spread_ps = s.spread_ps;
    row.lateness_ps = s.lateness_ps;
    row.caused_ps = s.caused_ps;
    report.worst.push_back(std::move(row));
  }
  return report;
}

std::string LeftOutWarning(int64_t left_out, const std::string& example) {
  return absl::StrCat(left_out, left_out == 1 ? " collective instance" : " collective instances",
                      " left out of waits and stragglers: their arrivals cannot be one execution "
                      "(a chip arrived after another had finished it), e.g. ",
                      example, "; this capture's collective ids are not unique per execution");
}

CollectiveReport AnalyzeCollectives(const std::vector<CollectiveRun>& runs,
                                    const CollectiveNames& names, size_t max_instances,
                                    bool within_host) {
  PodCollectives pod(within_host);
  pod.Add(runs);
  return pod.Analyze(
      names, [](int32_t, int64_t ns) { return ns; }, max_instances);
}

}  // namespace podprof::insight
