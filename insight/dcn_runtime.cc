// What the Megascale runtime measured of each transfer, from the counter series the reader keeps
// of a capture's `/device:CUSTOM:Megascale Trace` plane (docs/MEGASCALE.md, "The runtime's
// action graph"): `megascale/<rendezvous>/network_transport_latency_us`, sampled at each
// arrival, and the budgets `.../transmission_budget_us` and `.../delay_budget_us` sampled at
// the same instants.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "insight/dcn.h"
#include "insight/dcn_internal.h"
#include "trace/megascale_trace.h"

namespace podprof::insight {
namespace {

// The rendezvous of a series named `megascale/<rendezvous>/<metric>`; false for another name.
bool RendezvousOf(absl::string_view name, absl::string_view metric, std::string* rendezvous) {
  if (!absl::StartsWith(name, trace::kMegascaleSeriesPrefix)) return false;
  name.remove_prefix(trace::kMegascaleSeriesPrefix.size());
  if (name.size() <= metric.size() + 1 || !absl::EndsWith(name, metric) ||
      name[name.size() - metric.size() - 1] != '/') {
    return false;
  }
  *rendezvous = std::string(name.substr(0, name.size() - metric.size() - 1));
  return true;
}

// Microseconds as the runtime gives them, in ns; -1 for what cannot be one (negative, not a
// number, past a day).
int64_t Ns(double us) {
  if (!(us >= 0) || us > 86'400e6) return -1;
  return std::llround(us * 1000);
}

}  // namespace

DcnRuntimeSamples DcnRuntimeFromCapture(const trace::HostCapture& capture) {
  DcnRuntimeSamples out;
  // Budgets by (chip, rendezvous), then by instant: they are sampled where the latencies are.
  std::map<std::pair<int, std::string>, std::map<int64_t, double>> transmission, delay;
  for (const trace::CounterSeries& s : capture.counters) {
    if (s.chip < 0 || static_cast<size_t>(s.chip) >= capture.host.chips.size()) continue;
    if (!absl::StartsWith(s.name, trace::kMegascaleSeriesPrefix)) continue;
    const size_t n = std::min(s.time_ns.size(), s.value.size());
    std::string rendezvous;
    if (RendezvousOf(s.name, trace::kMegascaleLatencyUs, &rendezvous)) {
      if (out.empty()) out.resize(capture.host.chips.size());
      std::vector<DcnRuntimeSample>& v = out[static_cast<size_t>(s.chip)][rendezvous];
      for (size_t i = 0; i < n; ++i) {
        DcnRuntimeSample& x = v.emplace_back();
        x.at_ns = s.time_ns[i];
        x.latency_ns = Ns(s.value[i]);
      }
      continue;
    }
    std::map<int64_t, double>* by_instant = nullptr;
    if (RendezvousOf(s.name, trace::kMegascaleTransmissionBudgetUs, &rendezvous)) {
      by_instant = &transmission[{s.chip, rendezvous}];
    } else if (RendezvousOf(s.name, trace::kMegascaleDelayBudgetUs, &rendezvous)) {
      by_instant = &delay[{s.chip, rendezvous}];
    } else {
      continue;
    }
    for (size_t i = 0; i < n; ++i) (*by_instant)[s.time_ns[i]] = s.value[i];
  }
  for (size_t c = 0; c < out.size(); ++c) {
    for (auto& [rendezvous, v] : out[c]) {
      std::stable_sort(
          v.begin(), v.end(),
          [](const DcnRuntimeSample& a, const DcnRuntimeSample& b) { return a.at_ns < b.at_ns; });
      const auto* t = transmission.count({static_cast<int>(c), rendezvous})
                          ? &transmission.at({static_cast<int>(c), rendezvous})
                          : nullptr;
      const auto* d = delay.count({static_cast<int>(c), rendezvous})
                          ? &delay.at({static_cast<int>(c), rendezvous})
                          : nullptr;
      for (DcnRuntimeSample& x : v) {
        if (t != nullptr) {
          if (auto it = t->find(x.at_ns); it != t->end()) x.transmission_budget_ns = Ns(it->second);
        }
        if (d != nullptr) {
          if (auto it = d->find(x.at_ns); it != d->end()) x.delay_budget_ns = Ns(it->second);
        }
      }
    }
  }
  return out;
}

namespace dcn_internal {

const DcnRuntimeSample* RuntimeSampleFor(const DcnHost& h, size_t chip,
                                         const std::string& rendezvous, int64_t after_ns,
                                         int64_t until_ns) {
  if (chip >= h.runtime.size()) return nullptr;
  auto it = h.runtime[chip].find(rendezvous);
  if (it == h.runtime[chip].end()) return nullptr;
  // The arrival is before the recv-done's end (the copy comes after it), but both are rounded
  // to the ns on their way: a microsecond's grace.
  constexpr int64_t kGraceNs = 1000;
  const std::vector<DcnRuntimeSample>& v = it->second;
  // The correction keeps order (its drift is parts per million), so the samples stay sorted.
  auto end = std::upper_bound(
      v.begin(), v.end(), until_ns + kGraceNs,
      [&](int64_t t, const DcnRuntimeSample& x) { return t < h.correction.ApplyNs(x.at_ns); });
  while (end != v.begin()) {
    --end;
    if (h.correction.ApplyNs(end->at_ns) <= after_ns) break;
    if (end->latency_ns >= 0) return &*end;
  }
  return nullptr;
}

}  // namespace dcn_internal
}  // namespace podprof::insight
