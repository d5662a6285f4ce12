#include "aggregator/capture/alignment.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace podprof::aggregator {
namespace {

// Device timestamps reach the host clock through the profiler's device-to-host mapping, which
// can be off by up to a few hundred microseconds on its own; probes cannot see that, only
// collectives can, so their refinement may exceed the probes' bounds by this much.
constexpr int64_t kDeviceMappingSlackNs = 1'000'000;

// Of an even count, halfway between the middle two rather than the upper one, which would lean
// every such pin of a host to the reference by half a step.
int64_t Median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : v[m - 1] + (v[m] - v[m - 1]) / 2;
}

// The value with half the weight on either side, each value standing at the middle of its
// weight and read between two by straight line: two estimates meet nearer the more precise
// one, as a weighted mean would; many ignore a few far ones, as a median does.
int64_t WeightedMedian(std::vector<std::pair<int64_t, double>> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double total = 0;
  for (const auto& [x, w] : v) total += w;
  double below = 0, prev_at = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double at = (below + v[i].second / 2) / total;  // where v[i] stands, 0..1
    if (at >= 0.5) {
      if (i == 0) return v[0].first;
      const double f = (0.5 - prev_at) / (at - prev_at);
      return v[i - 1].first + std::llround(f * static_cast<double>(v[i].first - v[i - 1].first));
    }
    below += v[i].second;
    prev_at = at;
  }
  return v.back().first;
}

// The reference of one group of hosts tied by collectives: the host sharing the most
// collectives with the others. `hosts_with` holds how many hosts hold each collective id,
// counted per id, so this stays linear in the pod's size.
std::string ChooseReference(const std::map<std::string, CollectiveEndList>& ends,
                            const std::vector<std::string>& group,
                            const std::unordered_map<uint64_t, size_t>& hosts_with) {
  std::string ref;
  size_t best = 0;
  for (const std::string& host : group) {
    size_t shared = 0;
    for (const auto& [id, t] : ends.at(host)) shared += hosts_with.at(id) - 1;
    if (shared > best || ref.empty()) {
      best = shared;
      ref = host;
    }
  }
  return ref;
}

// The hosts that end collectives together, in groups: a pod is one group, a multi-slice job
// one per slice (its ICI collectives never span slices), a host that shares none is in none.
// Union-find over the hosts, joined through each collective id's first host.
std::vector<std::vector<std::string>> TiedGroups(
    const std::map<std::string, CollectiveEndList>& ends,
    const std::map<std::string, HostCorrection*>& by_host,
    const std::unordered_map<uint64_t, size_t>& hosts_with) {
  std::vector<std::string> names;
  for (const auto& [host, mine] : ends) {
    if (by_host.count(host)) names.push_back(host);
  }
  std::vector<size_t> parent(names.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto root = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  std::unordered_map<uint64_t, size_t> first;  // collective id -> the first host ending it
  for (size_t i = 0; i < names.size(); ++i) {
    for (const auto& [id, t] : ends.at(names[i])) {
      if (hosts_with.at(id) < 2) continue;
      auto [it, inserted] = first.emplace(id, i);
      if (!inserted) parent[root(i)] = root(it->second);
    }
  }
  std::map<size_t, std::vector<std::string>> groups;
  for (size_t i = 0; i < names.size(); ++i) groups[root(i)].push_back(names[i]);
  std::vector<std::vector<std::string>> out;
  for (auto& [r, hosts] : groups) {
    if (hosts.size() > 1) out.push_back(std::move(hosts));
  }
  return out;
}

// Pins host `h` to the reference `r` through the collectives both ended. On the aggregator's
// clock every chip ends a collective at the same instant, so each shared collective measures
// this host's error against the reference at that instant; a line through them gives the
// offset at the window's middle and the drift across it.
void PinToReference(const CollectiveEndList& mine, const CollectiveEndList& ref_ends,
                    const HostCorrection& r, int64_t mid_ns, HostCorrection* h) {
  std::vector<std::pair<double, double>> points;  // (t - mid, difference), ns
  auto it = ref_ends.begin();  // both lists are in order of id: walk them side by side
  for (const auto& [id, t] : mine) {
    while (it != ref_ends.end() && it->first < id) ++it;
    if (it == ref_ends.end()) break;
    if (it->first != id) continue;
    points.emplace_back(
        static_cast<double>(it->second - r.probe_offset_ns - mid_ns),
        static_cast<double>((t - h->probe_offset_ns) - (it->second - r.probe_offset_ns)));
  }
  if (points.empty()) return;
  std::vector<int64_t> diffs;
  for (const auto& p : points) diffs.push_back(std::llround(p.second));
  double offset = static_cast<double>(Median(diffs)), slope = 0;
  if (points.size() >= 8) {
    double st = 0, sd = 0, stt = 0, std_ = 0;
    for (const auto& [t, d] : points) {
      st += t;
      sd += d;
      stt += t * t;
      std_ += t * d;
    }
    const double n = static_cast<double>(points.size());
    const double denom = n * stt - st * st;
    if (denom > 0) {
      slope = (n * std_ - st * sd) / denom;
      offset = (sd - slope * st) / n;
    }
  }
  h->collectives = static_cast<int>(points.size());
  // Collectives are far more precise than probes, but a refinement outside what the probes
  // (and the device mapping) allow means the ids did not match the same instants.
  if (std::llabs(std::llround(offset)) >
      h->uncertainty_ns + r.uncertainty_ns + kDeviceMappingSlackNs) {
    return;
  }
  h->offset_ns = h->probe_offset_ns + std::llround(offset);
  h->drift_ppb = r.drift_ppb + slope * 1e9;
  h->refined = true;
  double spread = 0;
  for (const auto& [t, d] : points) spread = std::max(spread, std::abs(d - offset - slope * t));
  h->uncertainty_ns =
      std::min<int64_t>(h->uncertainty_ns, std::max<int64_t>(std::llround(spread), 1000));
}

// The hosts now agree with each other, all carrying the reference's probe error. Each host's
// probes give an independent estimate of that common error, within its probe uncertainty,
// except on hosts whose device mapping is off (the probes cannot see that). So find the value
// most hosts' intervals agree on (Marzullo's intersection, as NTP selects its sources) and
// take the median of the hosts that agree with it, each weighted by its precision: a precise
// host outweighs a far one, and many agreeing hosts outweigh one whose device mapping is a
// few microseconds off but whose interval still touches theirs. (The intersection itself is
// no place to clamp the result into: that one host narrows it to where it overlaps the
// others, away from the truth.) Returns the shift and how far off it can be.
std::pair<int64_t, int64_t> CommonShift(const std::vector<HostCorrection*>& group,
                                        const std::string& ref,
                                        const std::map<std::string, int64_t>& probe_bound) {
  struct Edge {
    int64_t at;
    int delta;
  };
  std::vector<Edge> edges;
  std::vector<std::pair<int64_t, int64_t>> estimates;  // (value, half width)
  for (const HostCorrection* hp : group) {
    const HostCorrection& h = *hp;
    if (!h.refined) continue;
    const int64_t x = h.probe_offset_ns - h.offset_ns;
    // The host's estimate of the common error is as good as its own probes, plus how well it
    // is pinned to the reference (nothing for the reference itself).
    const int64_t pinned = h.host == ref ? 0 : h.uncertainty_ns;
    const int64_t w = std::max<int64_t>(probe_bound.at(h.host) + pinned, 1000);
    estimates.emplace_back(x, w);
    edges.push_back({x - w, +1});
    edges.push_back({x + w, -1});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.at != b.at ? a.at < b.at : a.delta > b.delta;  // opens before closes at a tie
  });
  int depth = 0, best_depth = 0;
  int64_t lo = 0, hi = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    depth += edges[i].delta;
    if (edges[i].delta > 0 && depth > best_depth) {
      best_depth = depth;
      lo = edges[i].at;
      hi = i + 1 < edges.size() ? edges[i + 1].at : edges[i].at;
    }
  }
  std::vector<std::pair<int64_t, double>> agreeing;  // (value, 1 / half width^2)
  for (const auto& [x, w] : estimates) {
    if (x - w <= hi && x + w >= lo) agreeing.emplace_back(x, 1.0 / (double(w) * double(w)));
  }
  const size_t agree = agreeing.size();
  const int64_t shift = WeightedMedian(std::move(agreeing));
  int64_t bound = std::max<int64_t>(0, std::max(shift - lo, hi - shift));
  // When no two hosts agree (a slice of two, one of them with a device mapping that is off,
  // and nothing tells which), the shift may be any of theirs: it is as uncertain as they are
  // far apart. Said so, rather than the chosen one's precision.
  if (agree < 2 && estimates.size() > 1) {
    for (const auto& [x, w] : estimates)
      bound = std::max<int64_t>(bound, std::llabs(x - shift) + w);
  }
  return {shift, bound};
}

// Refines one group: pins its hosts to its reference, then removes the error they all inherit
// from the reference's probes.
void RefineGroup(const std::map<std::string, CollectiveEndList>& ends,
                 const std::vector<std::string>& group,
                 const std::unordered_map<uint64_t, size_t>& hosts_with,
                 const std::map<std::string, int64_t>& probe_bound, int64_t mid_ns,
                 const std::map<std::string, HostCorrection*>& by_host) {
  const std::string ref = ChooseReference(ends, group, hosts_with);
  HostCorrection& reference = *by_host.at(ref);
  const CollectiveEndList& ref_ends = ends.at(ref);
  std::vector<HostCorrection*> members;
  for (const std::string& host : group) {
    members.push_back(by_host.at(host));
    if (host != ref) PinToReference(ends.at(host), ref_ends, reference, mid_ns, by_host.at(host));
  }
  reference.refined = true;
  // The reference is pinned by the same collectives as the others: those it shares with any.
  int ref_shared = 0;
  for (const auto& [id, t] : ref_ends) ref_shared += hosts_with.at(id) > 1;
  reference.collectives = ref_shared;
  // Each refined host's bound is its precision against the reference plus how far off the
  // shift can be.
  const auto [shift, shift_uncertainty] = CommonShift(members, ref, probe_bound);
  for (HostCorrection* h : members) {
    if (!h->refined) continue;
    h->offset_ns += shift;
    h->uncertainty_ns += shift_uncertainty;
  }
}

}  // namespace

std::vector<HostCorrection> RefineWithCollectives(
    const std::map<std::string, CollectiveEndList>& ends, std::vector<HostCorrection> probe,
    int64_t mid_ns) {
  if (probe.size() < 2) return probe;
  std::map<std::string, HostCorrection*> by_host;
  // Each host's probe bound on its own offset, before the refinement narrows it to the bound
  // against the reference.
  std::map<std::string, int64_t> probe_bound;
  for (HostCorrection& h : probe) {
    by_host[h.host] = &h;
    probe_bound[h.host] = h.uncertainty_ns;
  }
  std::unordered_map<uint64_t, size_t> hosts_with;
  for (const auto& [host, mine] : ends) {
    for (const auto& [id, t] : mine) ++hosts_with[id];
  }
  // Each group of hosts tied by collectives is refined on its own: hosts of different slices
  // share no collective, so one reference for all would leave every other slice's hosts on
  // their probes alone, each with its device mapping's error.
  for (const std::vector<std::string>& group : TiedGroups(ends, by_host, hosts_with)) {
    RefineGroup(ends, group, hosts_with, probe_bound, mid_ns, by_host);
  }
  return probe;
}

}  // namespace podprof::aggregator
