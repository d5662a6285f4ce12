// Who made the receivers wait, by the stragglers' evidence rule (insight/evidence.h): per
// instance (a rendezvous' step), the slice whose producers were late on their own the longest
// is "last" among the slices that sent in it, and the link whose network excess was largest is
// "last" among the links used; JudgeStragglers then names a slice or link only when it was last
// significantly more often than chance and caused a material share of that waiting.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "insight/dcn_internal.h"
#include "insight/evidence.h"

namespace podprof::insight::dcn_internal {
namespace {

// A slice (dst -1) or a link.
using Key = std::pair<int, int>;

struct Tally {
  int64_t times_last = 0, instances = 0, caused_ns = 0;
  double expected_last = 0;
};

// One instance's waiting per candidate.
using Instance = std::map<Key, int64_t>;

class Tallies {
 public:
  // An instance whose largest waiting is `floor` or less has no last: within the noise.
  void Add(const Instance& in, int64_t floor = 0) {
    int64_t most = floor;
    const Key* last = nullptr;
    for (const auto& [key, ns] : in) {
      if (ns > most) {
        most = ns;
        last = &key;
      }
    }
    if (last == nullptr) return;  // nobody made anybody wait: no one was last
    const double chance = 1.0 / static_cast<double>(in.size());
    for (const auto& [key, ns] : in) {
      Tally& t = tallies_[key];
      ++t.instances;
      t.expected_last += chance;
      t.caused_ns += ns;
    }
    ++tallies_[*last].times_last;
  }

  // The rows JudgeStragglers reads, most caused first, with their keys.
  std::vector<std::pair<Key, trace::StragglerRow>> Rows() const {
    std::vector<std::pair<Key, trace::StragglerRow>> rows;
    for (const auto& [key, t] : tallies_) {
      trace::StragglerRow r;
      r.host = key.second < 0 ? absl::StrCat("slice ", key.first)
                              : absl::StrCat("slice ", key.first, " -> slice ", key.second);
      r.times_last = t.times_last;
      r.instances = t.instances;
      r.caused_ps = t.caused_ns;  // a share is all the rule reads of it
      r.expected_last = t.expected_last;
      rows.emplace_back(key, r);
    }
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
      return a.second.caused_ps > b.second.caused_ps;
    });
    return rows;
  }

 private:
  std::map<Key, Tally> tallies_;
};

struct Judged {
  std::vector<std::pair<Key, trace::StragglerRow>> rows;
  StragglerVerdict verdict;
};

Judged Judge(const Tallies& t) {
  Judged j;
  j.rows = t.Rows();
  std::vector<trace::StragglerRow> rows;
  for (const auto& [key, r] : j.rows) rows.push_back(r);
  j.verdict = JudgeStragglers(rows);
  return j;
}

bool Named(const Judged& j, const Key& key) {
  for (size_t i = 0; i < j.rows.size(); ++i) {
    if (j.rows[i].first == key) return j.verdict.significant[i];
  }
  return false;
}

std::string PValue(double p) {
  return p < 1e-300 ? std::string("< 1e-300") : absl::StrFormat("= %.1e", p);
}

std::string Evidence(const trace::StragglerRow& r, double p, const StragglerVerdict& v,
                     const char* what) {
  return absl::StrFormat(
      "last in %d of %d instances where chance gives %.1f (p %s), causing %.1f%% of %s where "
      "chance gives %.1f%%",
      r.times_last, r.instances, r.expected_last, PValue(p), 100 * v.caused_share, what,
      100 * v.chance_share);
}

std::vector<DcnCulprit> Culprits(const Judged& j, const std::map<Key, int64_t>& excess) {
  std::vector<DcnCulprit> out;
  for (size_t i = 0; i < j.rows.size(); ++i) {
    const auto& [key, r] = j.rows[i];
    DcnCulprit& c = out.emplace_back();
    c.src_slice = key.first;
    c.dst_slice = key.second;
    c.times_last = r.times_last;
    c.instances = r.instances;
    c.expected_last = r.expected_last;
    c.caused_ns = r.caused_ps;
    c.p_value = j.verdict.p_values[i];
    c.named = j.verdict.significant[i];
    if (auto it = excess.find(key); it != excess.end()) c.excess_ns = it->second;
  }
  return out;
}

}  // namespace

// The element at rank floor(q x (n - 1)); 0 for none.
int64_t Quantile(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  const size_t at = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(at), v.end());
  return v[at];
}

int64_t Median(std::vector<int64_t> v) { return Quantile(std::move(v), 0.5); }

namespace {

// One instance (a rendezvous' step): when it began (its first recv-done start) and its
// waiting per candidate.
struct Timed {
  int64_t at = 0;
  Instance producers, links;
};

// The transfers of known slices grouped by instance, the instances in time order, and each
// link's transits (the runtime's latencies, when DcnReport::runtime_network).
struct Grouped {
  std::map<std::pair<std::string, int64_t>, Timed> by_instance;
  std::vector<const Timed*> order;
  std::map<Key, std::vector<int64_t>> link_transits;
  std::map<Key, std::vector<int64_t>> link_uncertainties;  // each transfer's clock uncertainty
  std::vector<int64_t> uncertainties;  // every transfer's, whatever the links use
  bool unknown = false;                // some transfer had a slice of -1 at an end
};

void Group(const std::vector<DcnTransfer>& transfers, bool runtime, Grouped* g) {
  for (const DcnTransfer& t : transfers) {
    if (t.src_slice < 0 || t.dst_slice < 0) {
      g->unknown = true;
      continue;
    }
    auto [it, inserted] = g->by_instance.try_emplace({t.rendezvous, t.step});
    Timed& in = it->second;
    if (inserted || t.recv_done_start_ns < in.at) in.at = t.recv_done_start_ns;
    in.producers[{t.src_slice, -1}] += t.producer_own_ns;
    in.links[{t.src_slice, t.dst_slice}] += t.network_ns;
    g->uncertainties.push_back(t.clock_uncertainty_ns);  // the producers' parts still need them
    // The runtime's latency is measured on one clock: nothing of it is the clocks'. A transfer
    // that missed its sample (at the capture's edge) says nothing of its link then.
    if (runtime && t.runtime_latency_ns < 0) continue;
    const int64_t u = runtime ? 0 : t.clock_uncertainty_ns;
    g->link_transits[{t.src_slice, t.dst_slice}].push_back(runtime ? t.runtime_latency_ns
                                                                   : t.transit_ns);
    g->link_uncertainties[{t.src_slice, t.dst_slice}].push_back(u);
  }
  for (const auto& [key, in] : g->by_instance) g->order.push_back(&in);
  std::stable_sort(g->order.begin(), g->order.end(),
                   [](const Timed* a, const Timed* b) { return a->at < b->at; });
}

// The network's noise: the spread (interquartile) of the healthiest link's transits. An
// instance whose largest network excess is within it names no link last: with two slices, a
// slow link's receiver is often late itself in the next rendezvous, its excess 0, and the other
// link's noise would otherwise count as that link being last.
int64_t NetworkFloor(const std::map<Key, std::vector<int64_t>>& link_transits) {
  const std::vector<int64_t>* healthiest = nullptr;
  int64_t smallest = 0;
  for (const auto& [key, v] : link_transits) {
    const int64_t m = Median(v);
    if (healthiest == nullptr || m < smallest) {
      healthiest = &v;
      smallest = m;
    }
  }
  if (healthiest == nullptr) return 0;
  return Quantile(*healthiest, 0.75) - Quantile(*healthiest, 0.25);
}

// A link is slow only when its typical transit is beyond the network's noise as well: over a
// long capture a link whose transits run a steady few hundred ns over the healthiest link's is
// "last" far more often than chance, and its share of a tiny total excess is material, yet
// nothing about it is slow (seen next to a slow slice, whose late receivers leave the other
// links' excess to noise). Nor is a link slow by what its ends' clocks cannot vouch for: a
// slice's device-to-host error reads as a steady transit on its links (docs/MEGASCALE.md,
// "Clocks across slices"). Rows failing this are not significant, and a verdict that named one
// names nothing.
void RequireExcessBeyondFloor(const std::map<Key, int64_t>& excess, int64_t floor,
                              const std::map<Key, std::vector<int64_t>>& uncertainties,
                              int64_t expected_uncertainty, Judged* j) {
  for (size_t i = 0; i < j->rows.size(); ++i) {
    const Key& key = j->rows[i].first;
    auto it = excess.find(key);
    auto u = uncertainties.find(key);
    const int64_t clocks =
        expected_uncertainty + (u == uncertainties.end() ? 0 : Median(u->second));
    if (it == excess.end() || it->second <= floor + clocks) j->verdict.significant[i] = false;
  }
  if (j->verdict.named && !j->verdict.significant[j->verdict.row]) j->verdict.named = false;
}

// How soon: the shortest prefix of the instances at which a named culprit (is a link, key)
// already was. A long capture is probed at up to kProbes prefixes (the answer then within a
// stride); -1 when none is named.
int64_t NamedAfter(const std::vector<const Timed*>& order,
                   const std::vector<std::pair<bool, Key>>& culprits, int64_t floor) {
  if (culprits.empty()) return -1;
  constexpr size_t kProbes = 2000;
  const size_t stride = std::max<size_t>(1, (order.size() + kProbes - 1) / kProbes);
  Tallies prefix_producers, prefix_links;
  for (size_t n = 0; n < order.size(); ++n) {
    prefix_producers.Add(order[n]->producers);
    prefix_links.Add(order[n]->links, floor);
    if ((n + 1) % stride != 0 && n + 1 != order.size()) continue;
    bool judged_producers = false, judged_links = false;
    Judged jp, jl;
    for (const auto& [is_link, key] : culprits) {
      Judged& j = is_link ? jl : jp;
      bool& judged = is_link ? judged_links : judged_producers;
      if (!judged) j = Judge(is_link ? prefix_links : prefix_producers);
      judged = true;
      if (Named(j, key)) return static_cast<int64_t>(n + 1);
    }
  }
  return -1;
}

}  // namespace

void JudgeDcn(const std::vector<DcnTransfer>& transfers, DcnReport* report) {
  Grouped g;
  const bool runtime = report->runtime_network;
  Group(transfers, runtime, &g);
  report->instances = static_cast<int64_t>(g.order.size());
  report->network_floor_ns = NetworkFloor(g.link_transits);
  const int64_t floor = report->network_floor_ns;

  Tallies producers, links;
  for (const Timed* in : g.order) {
    producers.Add(in->producers);
    links.Add(in->links, floor);
  }
  const Judged p = Judge(producers);
  Judged l = Judge(links);
  const int64_t expected =
      runtime ? report->expected_runtime_latency_ns : report->expected_transit_ns;
  std::map<Key, int64_t> excess;
  for (const auto& [key, v] : g.link_transits) excess[key] = Median(v) - expected;
  RequireExcessBeyondFloor(excess, floor, g.link_uncertainties,
                           runtime ? 0 : report->expected_transit_uncertainty_ns, &l);
  report->clock_uncertainty_ns = Median(g.uncertainties);
  report->producers = Culprits(p, {});
  report->links = Culprits(l, excess);

  std::vector<std::string> named;
  std::vector<std::pair<bool, Key>> culprits;  // (is a link, key)
  if (p.verdict.named) {
    const auto& [key, r] = p.rows[p.verdict.row];
    culprits.emplace_back(false, key);
    named.push_back(absl::StrCat(
        "slice ", key.first, " is the late producer: ",
        Evidence(r, p.verdict.p_values[p.verdict.row], p.verdict, "the producers' own lateness")));
  }
  if (l.verdict.named) {
    const auto& [key, r] = l.rows[l.verdict.row];
    culprits.emplace_back(true, key);
    const double x = static_cast<double>(excess[key]) / 1e3;
    const double e = static_cast<double>(expected) / 1e3;
    const std::string figure =
        !runtime ? absl::StrFormat("transit %.0f us beyond the expected %.0f us", x, e)
        : report->runtime_budget
            ? absl::StrFormat("the runtime's network latency %.0f us beyond its budget of %.0f us",
                              x, e)
            : absl::StrFormat(
                  "the runtime's network latency %.0f us beyond the healthiest link's %.0f us", x,
                  e);
    named.push_back(absl::StrCat(
        absl::StrFormat("the link slice %d -> slice %d is slow: ", key.first, key.second), figure,
        ", ", Evidence(r, l.verdict.p_values[l.verdict.row], l.verdict, "the network's excess")));
  }
  if (!named.empty()) {
    report->verdict = named.front();
    for (size_t i = 1; i < named.size(); ++i) absl::StrAppend(&report->verdict, "; ", named[i]);
  } else if (transfers.empty()) {
    report->verdict = "no DCN culprit: no receive was paired with its send";
  } else if (g.order.empty() && g.unknown) {
    report->verdict = "no DCN culprit: the hosts' slices are unknown";
  } else {
    report->verdict =
        "no DCN culprit: no slice was late on its own, nor any link slow, more often than chance "
        "gives and by enough to matter";
    // Said when the clocks, not the job, are why: beyond a microsecond they can hide a culprit.
    if (report->clock_uncertainty_ns >= 1000) {
      absl::StrAppendFormat(&report->verdict,
                            " (the slices' clocks agree to within %.0f us, and what they cannot "
                            "vouch for is blamed on no one)",
                            static_cast<double>(report->clock_uncertainty_ns) / 1e3);
    }
  }
  report->named_after_instances = NamedAfter(g.order, culprits, floor);
}

}  // namespace podprof::insight::dcn_internal
