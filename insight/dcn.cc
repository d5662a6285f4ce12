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

// The element at rank floor(q x (n - 1)); 0 for none.
int64_t Quantile(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  const size_t at = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(at), v.end());
  return v[at];
}

int64_t Median(std::vector<int64_t> v) { return Quantile(std::move(v), 0.5); }

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
  return h;
}

namespace {

// One chip's ops of one rendezvous instance (send, send-done, recv-done), aggregator clock.
struct ChipInstance {
  bool has_send = false, has_send_done = false, has_recv_done = false;
  int64_t send_start = std::numeric_limits<int64_t>::min();  // kept ascending (see AddSend)
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

}  // namespace

DcnReport AnalyseDcn(const std::vector<DcnHost>& hosts, const DcnOptions& options) {
  DcnReport report;
  std::map<std::string, int> rendezvous_ids;
  std::vector<std::string> rendezvous_names;
  auto rendezvous_id = [&](const std::string& name) {
    auto [it, inserted] = rendezvous_ids.emplace(name, static_cast<int>(rendezvous_names.size()));
    if (inserted) rendezvous_names.push_back(name);
    return it->second;
  };
  // Pod-wide: chips by global id, and who sends to whom per rendezvous (any op's text).
  std::map<int64_t, ChipKey> chip_by_global;
  std::map<std::pair<int, int64_t>, std::vector<int64_t>> sources;  // (rendezvous, dst) -> srcs
  std::vector<std::vector<int>> host_instruction_rendezvous(hosts.size());
  std::map<int, int> slices;
  for (size_t hi = 0; hi < hosts.size(); ++hi) {
    const DcnHost& h = hosts[hi];
    for (size_t c = 0; c < h.chips.size(); ++c) {
      if (h.chips[c].global_id >= 0) chip_by_global.emplace(h.chips[c].global_id, ChipKey{hi, c});
    }
    if (h.slice >= 0 && !h.runs.empty()) slices[h.slice] = 1;
    // An op without the attribute takes the rendezvous its channel has elsewhere on the host.
    std::map<int64_t, int> by_channel;
    for (const DcnInstruction& d : h.instructions) {
      if (d.has_rendezvous) by_channel.emplace(d.channel_id, rendezvous_id(d.rendezvous));
    }
    std::vector<int>& ids = host_instruction_rendezvous[hi];
    for (const DcnInstruction& d : h.instructions) {
      int id = -1;
      if (d.has_rendezvous) {
        id = rendezvous_id(d.rendezvous);
      } else if (auto it = by_channel.find(d.channel_id); it != by_channel.end()) {
        id = it->second;
      }
      ids.push_back(id);
      if (id < 0) continue;
      for (const auto& [src, dst] : d.source_target_pairs) {
        std::vector<int64_t>& v = sources[{id, dst}];
        if (std::find(v.begin(), v.end(), src) == v.end()) v.push_back(src);
      }
    }
  }
  report.slices = static_cast<int>(slices.size());

  // Every chip's instances.
  std::vector<std::vector<ChipInstances>> instances(hosts.size());
  for (size_t hi = 0; hi < hosts.size(); ++hi) {
    const DcnHost& h = hosts[hi];
    instances[hi].resize(h.chips.size());
    std::vector<int64_t> held_total(h.chips.size(), 0);
    std::vector<std::map<int, int64_t>> held_at_send(h.chips.size());
    for (const DcnOpRun& r : h.runs) {
      if (r.chip < 0 || static_cast<size_t>(r.chip) >= h.chips.size()) continue;
      if (r.instruction < 0 || static_cast<size_t>(r.instruction) >= h.instructions.size()) {
        continue;
      }
      const size_t chip = static_cast<size_t>(r.chip);
      const int id = host_instruction_rendezvous[hi][static_cast<size_t>(r.instruction)];
      if (id < 0) continue;
      const int64_t start = h.correction.ApplyNs(r.StartNs());
      const int64_t end = h.correction.ApplyNs(r.EndNs());
      std::vector<ChipInstance>& list = instances[hi][chip][id];
      switch (h.instructions[static_cast<size_t>(r.instruction)].kind) {
        case DcnOpKind::kSend: {
          ChipInstance& in = list.emplace_back();
          in.has_send = true;
          in.send_start = start;
          int64_t& since = held_at_send[chip][id];
          in.held_ns = held_total[chip] - since;
          since = held_total[chip];
          break;
        }
        case DcnOpKind::kSendDone:
        case DcnOpKind::kRecvDone: {
          const bool send_done =
              h.instructions[static_cast<size_t>(r.instruction)].kind == DcnOpKind::kSendDone;
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
            held_total[chip] += end - start;
          }
          break;
        }
        case DcnOpKind::kRecv:
          break;
      }
    }
  }

  // Pair every receive with its sender's latest send before the receive's end.
  struct Pending {
    DcnTransfer t;
    int rendezvous = 0;
    int64_t local = 0;        // the receiver's count of its recv-dones of the rendezvous
    int64_t sender_held = 0;  // the sender's held_ns at that send
    std::pair<size_t, size_t> receiver;
  };
  std::vector<Pending> pending;
  for (size_t hi = 0; hi < hosts.size(); ++hi) {
    const DcnHost& h = hosts[hi];
    for (size_t c = 0; c < h.chips.size(); ++c) {
      for (const auto& [id, list] : instances[hi][c]) {
        int64_t local = -1;
        for (const ChipInstance& in : list) {
          if (!in.has_recv_done) continue;
          ++local;
          if (!in.has_send) {
            ++report.unpaired;
            continue;
          }
          auto src_it = sources.find({id, h.chips[c].global_id});
          bool paired = false;
          for (int64_t src : src_it == sources.end() ? std::vector<int64_t>{} : src_it->second) {
            auto chip_it = chip_by_global.find(src);
            if (chip_it == chip_by_global.end()) continue;
            const ChipKey& sk = chip_it->second;
            const auto sl = instances[sk.host][sk.chip].find(id);
            if (sl == instances[sk.host][sk.chip].end()) continue;
            const std::vector<ChipInstance>& sends = sl->second;
            auto it =
                std::upper_bound(sends.begin(), sends.end(), in.recv_done_end - 1,
                                 [](int64_t t, const ChipInstance& s) { return t < s.send_start; });
            while (it != sends.begin() && !std::prev(it)->has_send) --it;
            if (it == sends.begin() || !std::prev(it)->has_send_done) continue;
            const ChipInstance& s = *std::prev(it);
            Pending& p = pending.emplace_back();
            p.rendezvous = id;
            p.local = local;
            p.sender_held = s.held_ns;
            p.receiver = {hi, c};
            DcnTransfer& t = p.t;
            t.rendezvous = rendezvous_names[static_cast<size_t>(id)];
            t.src_slice = hosts[sk.host].slice;
            t.dst_slice = h.slice;
            t.src_host = hosts[sk.host].host;
            t.dst_host = h.host;
            t.src_chip = hosts[sk.host].chips[sk.chip].ordinal;
            t.dst_chip = h.chips[c].ordinal;
            t.send_start_ns = s.send_start;
            t.send_done_end_ns = s.send_done_end;
            t.recv_done_start_ns = in.recv_done_start;
            t.recv_done_end_ns = in.recv_done_end;
            t.consumer_ready_ns = in.send_start;
            t.transit_ns = in.recv_done_end - s.send_done_end;
            t.wait_ns = std::max<int64_t>(0, in.recv_done_end - in.recv_done_start);
            paired = true;
          }
          if (!paired) ++report.unpaired;
        }
      }
    }
  }

  // Steps: each receiver counts its own recv-dones; a chip's count starts at the instance of
  // the earliest chip (the reference) nearest in time to its own first.
  std::map<int, std::vector<size_t>> by_rendezvous;
  for (size_t i = 0; i < pending.size(); ++i) by_rendezvous[pending[i].rendezvous].push_back(i);
  for (const auto& [id, members] : by_rendezvous) {
    std::map<std::pair<size_t, size_t>, std::vector<std::pair<int64_t, int64_t>>> per_chip;
    for (size_t i : members) {
      per_chip[pending[i].receiver].emplace_back(pending[i].local, pending[i].t.recv_done_end_ns);
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
    for (size_t i : members) pending[i].t.step = pending[i].local + offset[pending[i].receiver];
  }

  // The expected transit: the smallest of the known links' medians, else the overall median.
  std::map<std::pair<int, int>, std::vector<int64_t>> link_transits;
  std::vector<int64_t> all_transits;
  for (const Pending& p : pending) {
    all_transits.push_back(p.t.transit_ns);
    if (p.t.src_slice >= 0 && p.t.dst_slice >= 0) {
      link_transits[{p.t.src_slice, p.t.dst_slice}].push_back(p.t.transit_ns);
    }
  }
  int64_t expected =
      link_transits.empty() ? Median(all_transits) : std::numeric_limits<int64_t>::max();
  for (const auto& [link, v] : link_transits) expected = std::min(expected, Median(v));
  report.expected_transit_ns = expected;

  // A receiver that starts its recv-done after the data was due mostly finds it there and only
  // copies it in. Not always (a slow link's data may still be on its way), so the copy is a low
  // quantile of those recv-dones, not their median.
  std::vector<int64_t> copies;
  for (const Pending& p : pending) {
    if (p.t.recv_done_start_ns > p.t.send_done_end_ns + expected) copies.push_back(p.t.wait_ns);
  }
  report.expected_copy_ns = Quantile(std::move(copies), 0.1);

  std::vector<DcnTransfer> transfers;
  transfers.reserve(pending.size());
  for (Pending& p : pending) {
    DcnTransfer& t = p.t;
    const int64_t due =
        std::max(t.send_done_end_ns + expected, t.recv_done_start_ns + report.expected_copy_ns);
    t.network_ns = std::clamp<int64_t>(t.recv_done_end_ns - due, 0, t.wait_ns);
    t.producer_ns =
        std::clamp<int64_t>(t.send_start_ns - t.consumer_ready_ns, 0, t.wait_ns - t.network_ns);
    t.producer_own_ns = std::clamp<int64_t>(t.producer_ns - p.sender_held, 0, t.producer_ns);
    transfers.push_back(std::move(t));
  }
  std::sort(transfers.begin(), transfers.end(), [](const DcnTransfer& a, const DcnTransfer& b) {
    return std::tie(a.recv_done_end_ns, a.dst_host, a.dst_chip, a.rendezvous) <
           std::tie(b.recv_done_end_ns, b.dst_host, b.dst_chip, b.rendezvous);
  });
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
