// A host's DCN ops from its capture, and every receive paired with the send that fed it on the
// aggregator's clock (insight/dcn.h). The judging is in dcn_judge.cc, XProf's figures in
// dcn_xprof.cc, the HLO text's reading in dcn_parse.cc.
#include "insight/dcn.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "insight/dcn_internal.h"
#include "trace/xspace_schema.h"

namespace podprof::insight {
namespace {

using dcn_internal::Median;
using dcn_internal::Quantile;

// XProf's Timespan of an event, in its uint64 ps (XEventVisitor::GetTimespan: the line's ns
// times 1000 plus the offset, wrapping as XProf's unsigned arithmetic does).
struct Span {
  uint64_t begin = 0, end = 0;
};

Span XprofSpan(int64_t line_ns, int64_t offset_ps, int64_t duration_ps) {
  Span s;
  s.begin = static_cast<uint64_t>(line_ns) * 1000u + static_cast<uint64_t>(offset_ps);
  s.end = s.begin + static_cast<uint64_t>(duration_ps);
  return s;
}

// XEventContextTracker::GetContainingEvent over one `XLA Modules` line, asked for every op of
// the `XLA Ops` line in order (a forward cursor: it assumes ascending queries).
class ModuleTracker {
 public:
  explicit ModuleTracker(std::vector<Span> modules, bool has_line)
      : modules_(std::move(modules)), has_line_(has_line) {}

  bool Contains(const Span& e) {
    if (!has_line_) return false;
    auto includes = [](const Span& m, const Span& o) {
      return m.begin <= o.begin && o.end <= m.end;
    };
    if (current_ != -1 && includes(modules_[static_cast<size_t>(current_)], e)) return true;
    for (size_t i = static_cast<size_t>(current_ + 1); i < modules_.size(); ++i) {
      const Span& m = modules_[i];
      if (m.begin > e.end) break;
      if (m.end < e.begin) continue;
      current_ = static_cast<int64_t>(i);
      return includes(m, e);
    }
    return false;
  }

 private:
  std::vector<Span> modules_;
  bool has_line_;
  int64_t current_ = -1;
};

}  // namespace

DcnHost DcnHostFromCapture(const trace::HostCapture& capture, int slice,
                           const trace::ClockCorrection& correction) {
  DcnHost h;
  h.host = capture.host.name;
  h.slice = slice;
  h.correction = correction;
  h.chips = capture.host.chips;
  // The reader made relative line times absolute (ReaderState::Absolute): XProf reads them as
  // stored. A capture with a profile start is taken to have stored them relative to it.
  const int64_t start = capture.host.profile_start_ns;
  auto xprof_line_ns = [start](int64_t base_ns) {
    if (start > 0 && base_ns >= start &&
        base_ns - start < trace::xspace::kAbsoluteLineTimestampNs) {
      return base_ns - start;
    }
    return base_ns;
  };
  std::vector<int32_t> instruction_of(capture.kernels.size(), -2);  // -2 unread, -1 not DCN
  for (size_t c = 0; c < h.chips.size(); ++c) {
    if (h.chips[c].kind != trace::DeviceKind::kTpu) continue;
    std::vector<Span> modules;
    bool has_modules = false;
    for (const trace::EventBlock& b : capture.blocks) {
      if (b.chip != static_cast<int>(c) || b.kind != trace::LineKind::kModules ||
          b.line != trace::xspace::kXlaModulesLine) {
        continue;
      }
      has_modules = true;
      const int64_t line_ns = xprof_line_ns(b.base_ns);
      for (size_t e = 0; e < b.size(); ++e) {
        modules.push_back(XprofSpan(line_ns, b.start_ps[e], b.duration_ps[e]));
      }
    }
    ModuleTracker tracker(std::move(modules), has_modules);
    for (const trace::EventBlock& b : capture.blocks) {
      if (b.chip != static_cast<int>(c) || b.kind != trace::LineKind::kOps ||
          b.line != trace::xspace::kXlaOpsLine) {
        continue;
      }
      const int64_t line_ns = xprof_line_ns(b.base_ns);
      for (size_t e = 0; e < b.size(); ++e) {
        const bool in_module =
            tracker.Contains(XprofSpan(line_ns, b.start_ps[e], b.duration_ps[e]));
        const uint32_t k = b.kernel[e];
        if (k >= capture.kernels.size()) continue;
        if (instruction_of[k] == -2) {
          DcnInstruction d;
          if (ParseDcnInstruction(capture.kernels[k], &d)) {
            instruction_of[k] = static_cast<int32_t>(h.instructions.size());
            h.instructions.push_back(std::move(d));
          } else {
            instruction_of[k] = -1;
          }
        }
        if (instruction_of[k] < 0) continue;
        DcnOpRun& r = h.runs.emplace_back();
        r.instruction = instruction_of[k];
        r.chip = static_cast<int32_t>(c);
        r.base_ns = b.base_ns;
        r.offset_ps = b.start_ps[e];
        r.duration_ps = b.duration_ps[e];
        r.xprof_line_ns = line_ns;
        r.xprof_in_module = in_module;
      }
    }
  }
  // In ps the start needs more than 64 bits.
  auto start_ps = [](const DcnOpRun& r) {
    return static_cast<__int128>(r.base_ns) * 1000 + r.offset_ps;
  };
  std::stable_sort(h.runs.begin(), h.runs.end(), [&](const DcnOpRun& a, const DcnOpRun& b) {
    if (a.chip != b.chip) return a.chip < b.chip;
    return start_ps(a) < start_ps(b);
  });
  h.runtime = DcnRuntimeFromCapture(capture);
  return h;
}

namespace {

// One chip's ops of one rendezvous instance (send, send-done, recv-done), aggregator clock.
struct ChipInstance {
  bool has_send = false, has_send_done = false, has_recv_done = false;
  int64_t send_start = std::numeric_limits<int64_t>::min();  // kept ascending (see AddRun)
  int64_t send_done_end = 0;
  int64_t recv_done_start = 0, recv_done_end = 0;
  // Time the chip waited in recv-dones since its previous send of this rendezvous.
  int64_t held_ns = 0;
};

struct ChipKey {
  size_t host = 0, chip = 0;
};

// Per chip, per rendezvous id, its instances in time order.
using ChipInstances = std::map<int, std::vector<ChipInstance>>;

// A receive paired with its send, before its wait is split.
struct Pending {
  DcnTransfer t;
  int rendezvous = 0;
  int64_t local = 0;        // the receiver's count of its recv-dones of the rendezvous
  int64_t sender_held = 0;  // the sender's held_ns at that send
  std::pair<size_t, size_t> receiver;
};

// The pod-wide pairing, in the order AnalyseDcn runs its phases: index the hosts (rendezvous
// ids, chips by global id, who sends to whom), gather each chip's instances, pair every
// receive with its sender, number the instances as steps, then split each wait.
class Pairing {
 public:
  explicit Pairing(const std::vector<DcnHost>& hosts) : hosts_(hosts) {}

  // Rendezvous ids, chips by global id and the source-target pairs of every host; the number
  // of distinct known slices that ran DCN ops.
  int Index() {
    std::map<int, int> slices;
    host_rendezvous_.resize(hosts_.size());
    for (size_t hi = 0; hi < hosts_.size(); ++hi) {
      const DcnHost& h = hosts_[hi];
      for (size_t c = 0; c < h.chips.size(); ++c) {
        if (h.chips[c].global_id >= 0)
          chip_by_global_.emplace(h.chips[c].global_id, ChipKey{hi, c});
      }
      if (h.slice >= 0 && !h.runs.empty()) slices[h.slice] = 1;
      IndexInstructions(hi);
    }
    return static_cast<int>(slices.size());
  }

  // Every chip's instances, on the aggregator's clock.
  void GatherInstances() {
    instances_.resize(hosts_.size());
    for (size_t hi = 0; hi < hosts_.size(); ++hi) {
      const DcnHost& h = hosts_[hi];
      instances_[hi].resize(h.chips.size());
      held_total_.assign(h.chips.size(), 0);
      held_at_send_.assign(h.chips.size(), {});
      for (const DcnOpRun& r : h.runs) AddRun(hi, r);
    }
  }

  // Every receive paired with its sender's latest send before the receive's end; counts the
  // receives left unpaired.
  std::vector<Pending> Pair(int64_t* unpaired) const {
    std::vector<Pending> pending;
    for (size_t hi = 0; hi < hosts_.size(); ++hi) {
      for (size_t c = 0; c < hosts_[hi].chips.size(); ++c) {
        for (const auto& [id, list] : instances_[hi][c]) {
          int64_t local = -1;
          int64_t previous_end = std::numeric_limits<int64_t>::min();
          for (const ChipInstance& in : list) {
            if (!in.has_recv_done) continue;
            ++local;
            if (!in.has_send || !PairReceive(hi, c, id, local, previous_end, in, &pending)) {
              ++*unpaired;
            }
            previous_end = in.recv_done_end;
          }
        }
      }
    }
    return pending;
  }

 private:
  int RendezvousId(const std::string& name) {
    auto [it, inserted] = rendezvous_ids_.emplace(name, static_cast<int>(names_.size()));
    if (inserted) names_.push_back(name);
    return it->second;
  }

  void IndexInstructions(size_t hi) {
    const DcnHost& h = hosts_[hi];
    // An op without the attribute takes the rendezvous its channel has elsewhere on the host.
    std::map<int64_t, int> by_channel;
    for (const DcnInstruction& d : h.instructions) {
      if (d.has_rendezvous) by_channel.emplace(d.channel_id, RendezvousId(d.rendezvous));
    }
    std::vector<int>& ids = host_rendezvous_[hi];
    for (const DcnInstruction& d : h.instructions) {
      int id = -1;
      if (d.has_rendezvous) {
        id = RendezvousId(d.rendezvous);
      } else if (auto it = by_channel.find(d.channel_id); it != by_channel.end()) {
        id = it->second;
      }
      ids.push_back(id);
      if (id < 0) continue;
      for (const auto& [src, dst] : d.source_target_pairs) {
        std::vector<int64_t>& v = sources_[{id, dst}];
        if (std::find(v.begin(), v.end(), src) == v.end()) v.push_back(src);
      }
    }
  }

  void AddRun(size_t hi, const DcnOpRun& r) {
    const DcnHost& h = hosts_[hi];
    if (r.chip < 0 || static_cast<size_t>(r.chip) >= h.chips.size()) return;
    if (r.instruction < 0 || static_cast<size_t>(r.instruction) >= h.instructions.size()) return;
    const size_t chip = static_cast<size_t>(r.chip);
    const int id = host_rendezvous_[hi][static_cast<size_t>(r.instruction)];
    if (id < 0) return;
    const int64_t start = h.correction.ApplyNs(r.StartNs());
    const int64_t end = h.correction.ApplyNs(r.EndNs());
    std::vector<ChipInstance>& list = instances_[hi][chip][id];
    const DcnOpKind kind = h.instructions[static_cast<size_t>(r.instruction)].kind;
    if (kind == DcnOpKind::kRecv) return;
    if (kind == DcnOpKind::kSend) {
      ChipInstance& in = list.emplace_back();
      in.has_send = true;
      in.send_start = start;
      int64_t& since = held_at_send_[chip][id];
      in.held_ns = held_total_[chip] - since;
      since = held_total_[chip];
      return;
    }
    const bool send_done = kind == DcnOpKind::kSendDone;
    if (list.empty() || (send_done ? list.back().has_send_done : list.back().has_recv_done)) {
      // An instance whose send the capture missed: it keeps the order of send starts.
      ChipInstance in;
      if (!list.empty()) in.send_start = list.back().send_start;
      list.push_back(in);
    }
    ChipInstance& in = list.back();
    if (send_done) {
      in.has_send_done = true;
      in.send_done_end = end;
    } else {
      in.has_recv_done = true;
      in.recv_done_start = start;
      in.recv_done_end = end;
      held_total_[chip] += end - start;
    }
  }

  // Pairs receive `in` (the `local`-th of rendezvous `id` on chip `c` of host `hi`, whose
  // previous one ended at `previous_end`) with each of its sources' latest send before it
  // ended; false when none is in the capture.
  bool PairReceive(size_t hi, size_t c, int id, int64_t local, int64_t previous_end,
                   const ChipInstance& in, std::vector<Pending>* pending) const {
    const DcnHost& h = hosts_[hi];
    const DcnRuntimeSample* runtime = dcn_internal::RuntimeSampleFor(
        h, c, names_[static_cast<size_t>(id)], previous_end, in.recv_done_end);
    auto src_it = sources_.find({id, h.chips[c].global_id});
    if (src_it == sources_.end()) return false;
    bool paired = false;
    for (int64_t src : src_it->second) {
      auto chip_it = chip_by_global_.find(src);
      if (chip_it == chip_by_global_.end()) continue;
      const ChipKey& sk = chip_it->second;
      const auto sl = instances_[sk.host][sk.chip].find(id);
      if (sl == instances_[sk.host][sk.chip].end()) continue;
      const std::vector<ChipInstance>& sends = sl->second;
      auto it = std::upper_bound(sends.begin(), sends.end(), in.recv_done_end - 1,
                                 [](int64_t t, const ChipInstance& s) { return t < s.send_start; });
      while (it != sends.begin() && !std::prev(it)->has_send) --it;
      if (it == sends.begin() || !std::prev(it)->has_send_done) continue;
      const ChipInstance& s = *std::prev(it);
      Pending& p = pending->emplace_back();
      p.rendezvous = id;
      p.local = local;
      p.sender_held = s.held_ns;
      p.receiver = {hi, c};
      DcnTransfer& t = p.t;
      const DcnHost& sender = hosts_[sk.host];
      t.rendezvous = names_[static_cast<size_t>(id)];
      t.src_slice = sender.slice;
      t.dst_slice = h.slice;
      t.src_host = sender.host;
      t.dst_host = h.host;
      t.src_chip = sender.chips[sk.chip].ordinal;
      t.dst_chip = h.chips[c].ordinal;
      t.send_start_ns = s.send_start;
      t.send_done_end_ns = s.send_done_end;
      t.recv_done_start_ns = in.recv_done_start;
      t.recv_done_end_ns = in.recv_done_end;
      t.consumer_ready_ns = in.send_start;
      t.transit_ns = in.recv_done_end - s.send_done_end;
      t.wait_ns = std::max<int64_t>(0, in.recv_done_end - in.recv_done_start);
      t.clock_uncertainty_ns = h.clock_uncertainty_ns + sender.clock_uncertainty_ns;
      if (runtime != nullptr) {
        t.runtime_latency_ns = runtime->latency_ns;
        t.transmission_budget_ns = runtime->transmission_budget_ns;
        t.delay_budget_ns = runtime->delay_budget_ns;
      }
      paired = true;
    }
    return paired;
  }

  const std::vector<DcnHost>& hosts_;
  std::map<std::string, int> rendezvous_ids_;
  std::vector<std::string> names_;  // by rendezvous id
  std::map<int64_t, ChipKey> chip_by_global_;
  std::map<std::pair<int, int64_t>, std::vector<int64_t>> sources_;  // (rendezvous, dst) -> srcs
  std::vector<std::vector<int>> host_rendezvous_;  // per host, per instruction: rendezvous id
  std::vector<std::vector<ChipInstances>> instances_;
  // While gathering one host: per chip, its recv-done time so far, and that total at its last
  // send of each rendezvous.
  std::vector<int64_t> held_total_;
  std::vector<std::map<int, int64_t>> held_at_send_;
};

// Steps: each receiver counts its own recv-dones; a chip's count starts at the instance of the
// earliest chip (the reference) nearest in time to its own first.
void NumberSteps(std::vector<Pending>* pending) {
  std::map<int, std::vector<size_t>> by_rendezvous;
  for (size_t i = 0; i < pending->size(); ++i) by_rendezvous[(*pending)[i].rendezvous].push_back(i);
  for (const auto& [id, members] : by_rendezvous) {
    std::map<std::pair<size_t, size_t>, std::vector<std::pair<int64_t, int64_t>>> per_chip;
    for (size_t i : members) {
      const Pending& p = (*pending)[i];
      per_chip[p.receiver].emplace_back(p.local, p.t.recv_done_end_ns);
    }
    const std::vector<std::pair<int64_t, int64_t>>* ref = nullptr;
    for (auto& [key, v] : per_chip) {
      std::sort(v.begin(), v.end());
      if (ref == nullptr || v.front().second < ref->front().second) ref = &v;
    }
    std::vector<int64_t> gaps;
    for (size_t i = 1; i < ref->size(); ++i)
      gaps.push_back((*ref)[i].second - (*ref)[i - 1].second);
    const int64_t period = Median(gaps);
    std::map<std::pair<size_t, size_t>, int64_t> offset;
    for (const auto& [key, v] : per_chip) {
      const int64_t first = v.front().second;
      size_t nearest = 0;
      for (size_t i = 1; i < ref->size(); ++i) {
        if (std::abs((*ref)[i].second - first) < std::abs((*ref)[nearest].second - first)) {
          nearest = i;
        }
      }
      int64_t step = (*ref)[nearest].first - (*ref).front().first;
      const int64_t beyond = first - ref->back().second;
      if (period > 0 && beyond > period / 2) {
        step = ref->back().first - ref->front().first + (beyond + period / 2) / period;
      }
      offset[key] = step - v.front().first;
    }
    for (size_t i : members) {
      Pending& p = (*pending)[i];
      p.t.step = p.local + offset[p.receiver];
    }
  }
}

// The expected transit: the smallest of the known links' medians, else the overall median; and
// how far the clocks may have moved it (the median clock uncertainty of that link's transfers,
// or of all).
std::pair<int64_t, int64_t> ExpectedTransit(const std::vector<Pending>& pending) {
  struct Link {
    std::vector<int64_t> transits, uncertainties;
  };
  std::map<std::pair<int, int>, Link> links;
  Link all;
  for (const Pending& p : pending) {
    all.transits.push_back(p.t.transit_ns);
    all.uncertainties.push_back(p.t.clock_uncertainty_ns);
    if (p.t.src_slice >= 0 && p.t.dst_slice >= 0) {
      Link& l = links[{p.t.src_slice, p.t.dst_slice}];
      l.transits.push_back(p.t.transit_ns);
      l.uncertainties.push_back(p.t.clock_uncertainty_ns);
    }
  }
  const Link* healthiest = links.empty() ? &all : nullptr;
  int64_t expected = links.empty() ? Median(all.transits) : std::numeric_limits<int64_t>::max();
  for (const auto& [key, l] : links) {
    const int64_t m = Median(l.transits);
    if (m < expected) expected = m, healthiest = &l;
  }
  return {expected, healthiest == nullptr ? 0 : Median(healthiest->uncertainties)};
}

// With the runtime's latencies, the network parts need no clock: whether every receiving host
// has them (a transfer at the capture's edge may still miss its sample), and the latency a
// healthy transfer takes (the median transmission budget when every sampled transfer has one,
// else the smallest of the links' median latencies).
void RuntimeExpected(const std::vector<DcnHost>& hosts, const std::vector<Pending>& pending,
                     DcnReport* report) {
  std::map<std::pair<int, int>, std::vector<int64_t>> links;
  std::vector<int64_t> all, budgets;
  for (const Pending& p : pending) {
    if (hosts[p.receiver.first].runtime.empty()) return;
    if (p.t.runtime_latency_ns < 0) continue;
    all.push_back(p.t.runtime_latency_ns);
    if (p.t.transmission_budget_ns >= 0) budgets.push_back(p.t.transmission_budget_ns);
    if (p.t.src_slice >= 0 && p.t.dst_slice >= 0) {
      links[{p.t.src_slice, p.t.dst_slice}].push_back(p.t.runtime_latency_ns);
    }
  }
  if (all.empty()) return;
  report->runtime_network = true;
  report->runtime_budget = budgets.size() == all.size();
  if (report->runtime_budget) {
    report->expected_runtime_latency_ns = Median(std::move(budgets));
    return;
  }
  int64_t expected = links.empty() ? Median(all) : std::numeric_limits<int64_t>::max();
  for (const auto& [key, v] : links) expected = std::min(expected, Median(v));
  report->expected_runtime_latency_ns = expected;
}

// A receiver that starts its recv-done after the data was due mostly finds it there and only
// copies it in. Not always (a slow link's data may still be on its way), so the copy is a low
// quantile of those recv-dones, not their median.
int64_t ExpectedCopy(const std::vector<Pending>& pending, int64_t expected_transit) {
  std::vector<int64_t> copies;
  for (const Pending& p : pending) {
    if (p.t.recv_done_start_ns > p.t.send_done_end_ns + expected_transit) {
      copies.push_back(p.t.wait_ns);
    }
  }
  return Quantile(std::move(copies), 0.1);
}

// Each wait split into the network's excess, the producer's lateness and its own part of it;
// the transfers in the order their receives ended.
std::vector<DcnTransfer> SplitWaits(std::vector<Pending> pending, const DcnReport& report) {
  std::vector<DcnTransfer> transfers;
  transfers.reserve(pending.size());
  for (Pending& p : pending) {
    DcnTransfer& t = p.t;
    // Both parts compare the two ends' clocks: neither gets what their uncertainty could make.
    // The runtime's own latency needs no second clock.
    const int64_t u = t.clock_uncertainty_ns;
    if (report.runtime_network && t.runtime_latency_ns >= 0) {
      const int64_t expected = t.transmission_budget_ns >= 0 ? t.transmission_budget_ns
                                                             : report.expected_runtime_latency_ns;
      t.network_ns = std::clamp<int64_t>(t.runtime_latency_ns - expected, 0, t.wait_ns);
    } else {
      const int64_t due = std::max(t.send_done_end_ns + report.expected_transit_ns +
                                       report.expected_transit_uncertainty_ns + u,
                                   t.recv_done_start_ns + report.expected_copy_ns);
      t.network_ns = std::clamp<int64_t>(t.recv_done_end_ns - due, 0, t.wait_ns);
    }
    t.producer_ns =
        std::clamp<int64_t>(t.send_start_ns - t.consumer_ready_ns - u, 0, t.wait_ns - t.network_ns);
    t.producer_own_ns = std::clamp<int64_t>(t.producer_ns - p.sender_held, 0, t.producer_ns);
    transfers.push_back(std::move(t));
  }
  std::sort(transfers.begin(), transfers.end(), [](const DcnTransfer& a, const DcnTransfer& b) {
    return std::tie(a.recv_done_end_ns, a.dst_host, a.dst_chip, a.rendezvous) <
           std::tie(b.recv_done_end_ns, b.dst_host, b.dst_chip, b.rendezvous);
  });
  return transfers;
}

}  // namespace

DcnReport AnalyseDcn(const std::vector<DcnHost>& hosts, const DcnOptions& options) {
  DcnReport report;
  Pairing pairing(hosts);
  report.slices = pairing.Index();
  pairing.GatherInstances();
  std::vector<Pending> pending = pairing.Pair(&report.unpaired);
  NumberSteps(&pending);
  std::tie(report.expected_transit_ns, report.expected_transit_uncertainty_ns) =
      ExpectedTransit(pending);
  report.expected_copy_ns = ExpectedCopy(pending, report.expected_transit_ns);
  RuntimeExpected(hosts, pending, &report);
  std::vector<DcnTransfer> transfers = SplitWaits(std::move(pending), report);
  report.transfers = static_cast<int64_t>(transfers.size());
  dcn_internal::JudgeDcn(transfers, &report);

  for (const DcnHost& h : hosts) {
    for (XprofRendezvousRow& row : HostXprofFigures(h)) report.xprof.push_back(std::move(row));
  }
  std::stable_sort(
      transfers.begin(), transfers.end(),
      [](const DcnTransfer& a, const DcnTransfer& b) { return a.wait_ns > b.wait_ns; });
  if (transfers.size() > options.max_worst) transfers.resize(options.max_worst);
  report.worst = std::move(transfers);
  return report;
}

}  // namespace podprof::insight
