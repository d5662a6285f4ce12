#include "insight/kernel_profile.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "trace/perf_counters.h"

namespace podprof::insight {
namespace {

// XProf's Utilization Viewer: one HBM beat moves 32 bytes.
constexpr double kHbmBytesPerBeat = 32;
// A clock running this much below nominal is throttled; less is measurement noise.
constexpr double kThrottledShare = 0.1;
// An MXU this idle, in a kernel that waits on sync flags this much (or moves HBM data at this
// share of the peak), is waiting on memory.
constexpr double kIdleMxu = 0.3;
constexpr double kWaitingShare = 0.3;
constexpr double kBusyHbm = 0.6;

// To a tenth, as the tables print the same figures (report/format.h).
std::string Percent(double f) { return absl::StrFormat("%.1f%%", 100 * f); }

// Counter increases summed over the dies ("perf/die1_tc_cycles" adds to "tc_cycles"), and the
// number of dies that counted TensorCore cycles.
struct DieSums {
  std::map<std::string, double> sum;
  int cycle_dies = 0;
  int pwrmgr_dies = 0;

  double Get(const std::string& key) const {
    auto it = sum.find(key);
    return it == sum.end() ? 0 : it->second;
  }
  bool Has(const std::string& key) const { return sum.count(key) > 0; }
};

DieSums SumOverDies(const std::map<std::string, double>& totals) {
  DieSums d;
  for (const auto& [name, value] : totals) {
    absl::string_view n = name;
    if (!absl::ConsumePrefix(&n, trace::kPerfSeriesPrefix)) continue;
    if (absl::StartsWith(n, "die") && n.size() > 4 && std::isdigit(n[3]) && n[4] == '_') {
      n.remove_prefix(5);
    }
    if (n == "tc_cycles") ++d.cycle_dies;
    if (n == "pwrmgr_cycle_count") ++d.pwrmgr_dies;
    d.sum[std::string(n)] += value;
  }
  return d;
}

// HBM beats read and written, over every channel: read responses and (partial) write requests.
double HbmBeats(const DieSums& d, bool* any) {
  double beats = 0;
  for (const auto& [name, value] : d.sum) {
    if (!absl::StartsWith(name, "hbm_")) continue;
    if (absl::StrContains(name, "_rd_resp_ps") || absl::StrContains(name, "_wr_req_ps") ||
        absl::StrContains(name, "_partial_write_req_ps")) {
      beats += value;
      *any = true;
    }
  }
  return beats;
}

void UnitShares(const DieSums& d, double cycles, KernelProfile* p) {
  auto put = [&](const char* unit, std::initializer_list<const char*> counters, double weight) {
    bool any = false;
    double sum = 0;
    for (const char* c : counters) {
      any = any || d.Has(c);
      sum += d.Get(c);
    }
    if (any) p->units[unit] = sum / (weight * cycles);
  };
  put("scalar_alu", {"tc_scalar_alu_instruction_0", "tc_scalar_alu_instruction_1"}, 2);
  put("vector_alu",
      {"tc_vector_alu_instruction_0", "tc_vector_alu_instruction_1", "tc_vector_alu_instruction_2",
       "tc_vector_alu_instruction_3"},
      4);
  put("vector_load", {"tc_vld_instruction_0", "tc_vld_instruction_1"}, 2);
  put("vector_store", {"tc_vst_instruction"}, 1);
  if (d.Has("tc_mxu_busy_1") || d.Has("tc_mxu_busy_2")) {
    p->units["mxu"] = (0.5 * d.Get("tc_mxu_busy_1") + d.Get("tc_mxu_busy_2")) / cycles;
  }
  if (d.Has("tc_xlu_busy_1") || d.Has("tc_xlu_busy_2")) {
    p->units["xlu"] = (0.5 * d.Get("tc_xlu_busy_1") + d.Get("tc_xlu_busy_2")) / cycles;
  }
}

// The counters of die `die` alone, without their die prefix ("perf/die1_tc_cycles" is
// "perf/tc_cycles").
std::map<std::string, double> DieTotals(const std::map<std::string, double>& totals, int die) {
  const std::string prefix = absl::StrCat(trace::kPerfSeriesPrefix, "die", die, "_");
  std::map<std::string, double> out;
  for (const auto& [name, value] : totals) {
    if (absl::StartsWith(name, prefix)) {
      out[absl::StrCat(trace::kPerfSeriesPrefix, name.substr(prefix.size()))] = value;
    }
  }
  return out;
}

// The dies the counters name, in order.
std::vector<int> DiesOf(const std::map<std::string, double>& totals) {
  std::vector<int> dies;
  for (const auto& [name, value] : totals) {
    absl::string_view n = name;
    if (!absl::ConsumePrefix(&n, trace::kPerfSeriesPrefix) || !absl::ConsumePrefix(&n, "die") ||
        n.size() < 2 || !std::isdigit(n[0]) || n[1] != '_') {
      continue;
    }
    const int die = n[0] - '0';
    if (std::find(dies.begin(), dies.end(), die) == dies.end()) dies.push_back(die);
  }
  std::sort(dies.begin(), dies.end());
  return dies;
}

// The cycles (the nominal clock's when no die counted them), throttling and units' shares of
// counters `d` of `cores` TensorCores over `seconds`, into `p`: the pooled profile's and each
// die's, by one rule.
void Figures(const DieSums& d, const trace::ChipGeneration* generation, double seconds, int cores,
             KernelProfile* p) {
  const double clock = generation != nullptr ? generation->tc_clock_hz : 0;
  p->nominal_cycles = seconds * clock * cores;
  p->cycles = d.cycle_dies > 0 ? d.Get("tc_cycles") : p->nominal_cycles;
  // Only when every die that counted cycles has them: one die's power-manager cycles under two
  // dies' busy counts would double their shares.
  if (d.pwrmgr_dies > 0 && d.pwrmgr_dies >= d.cycle_dies && d.Get("pwrmgr_cycle_count") > 0) {
    // v7x's power manager counts the clocks it skipped; the viewer divides by its cycle count.
    p->throttled = d.Get("pwrmgr_clocks_skipped") / d.Get("pwrmgr_cycle_count");
    p->cycles = d.Get("pwrmgr_cycle_count");
    p->power_manager = true;
  } else if (d.cycle_dies > 0 && p->nominal_cycles > 0) {
    p->throttled = std::max(0.0, 1 - p->cycles / p->nominal_cycles);
  }
  if (p->cycles > 0) UnitShares(d, p->cycles, p);
  bool hbm = false;
  const double bytes = kHbmBytesPerBeat * HbmBeats(d, &hbm);
  const double per_core = generation != nullptr ? generation->hbm_bytes_per_s_per_core : 0;
  if (hbm && per_core > 0 && seconds > 0) {
    p->units["hbm_bandwidth"] = bytes / (per_core * seconds * cores);
  }
}

DieProfile DieFigures(const trace::ChipGeneration* generation,
                      const std::map<std::string, double>& totals, int die, int64_t covered_ps) {
  DieProfile out;
  out.die = die;
  const DieSums d = SumOverDies(DieTotals(totals, die));
  if (d.cycle_dies == 0 && !(d.pwrmgr_dies > 0 && d.Get("pwrmgr_cycle_count") > 0)) {
    out.missing = "no cycle count";
    return out;
  }
  KernelProfile p;
  Figures(d, generation, static_cast<double>(covered_ps) * 1e-12, 1, &p);
  out.units = std::move(p.units);
  out.cycles = p.cycles;
  out.nominal_cycles = p.nominal_cycles;
  out.throttled = p.throttled;
  out.power_manager = p.power_manager;
  return out;
}

// The busiest unit's name and share; ("", 0) when no unit has a figure.
std::pair<std::string, double> Busiest(const std::map<std::string, double>& units) {
  std::pair<std::string, double> best("", 0);
  for (const auto& [name, share] : units) {
    if (share > best.second) best = {name, share};
  }
  return best;
}

}  // namespace

KernelProfile ProfileFromCounters(const trace::ChipGeneration* generation,
                                  const std::map<std::string, double>& totals, int64_t covered_ps,
                                  int64_t sync_wait_ps, int64_t total_ps) {
  KernelProfile p;
  const DieSums d = SumOverDies(totals);
  if (d.sum.empty() || covered_ps <= 0) return p;
  p.present = true;
  const int cores = std::max(
      1, d.cycle_dies > 0 ? d.cycle_dies : (generation != nullptr ? generation->tensor_cores : 1));
  Figures(d, generation, static_cast<double>(covered_ps) * 1e-12, cores, &p);
  if (total_ps > 0) {
    p.sync_wait = std::min(1.0, static_cast<double>(sync_wait_ps) / static_cast<double>(total_ps));
  }
  for (int die : DiesOf(totals)) p.dies.push_back(DieFigures(generation, totals, die, covered_ps));
  return p;
}

ProfileCause CauseOf(const KernelProfile& p, bool memory_bound, bool mxu_work) {
  if (!p.present) return {};
  auto unit = [&](const char* name) {
    auto it = p.units.find(name);
    return it == p.units.end() ? -1.0 : it->second;
  };
  const double mxu = unit("mxu"), hbm = unit("hbm_bandwidth");
  const bool waits = p.sync_wait >= kWaitingShare || hbm >= kBusyHbm || (hbm < 0 && memory_bound);
  if (mxu_work && mxu >= 0 && mxu < kIdleMxu && waits) {
    std::string why;
    if (p.sync_wait > 0) absl::StrAppend(&why, ", ", Percent(p.sync_wait), " of it in sync waits");
    if (hbm >= 0) absl::StrAppend(&why, ", HBM at ", Percent(hbm), " of peak");
    if (p.throttled >= kThrottledShare) {
      absl::StrAppend(&why, "; also throttled, ", Percent(p.throttled),
                      " of its clock cycles skipped");
    }
    if (why.empty()) why = ", and its costs put it under the roofline's ridge";
    return {"MXU idle waiting on HBM",
            absl::StrCat("MXU idle waiting on HBM: MXU busy ", Percent(mxu), why)};
  }
  if (p.throttled >= kThrottledShare) {
    return {"throttled",
            absl::StrCat("throttled: ", Percent(p.throttled), " of its clock cycles skipped",
                         p.power_manager ? std::string(" (power manager)")
                         : p.nominal_cycles > 0
                             ? absl::StrCat(" (counted ", Percent(p.cycles / p.nominal_cycles),
                                            " of the nominal clock's cycles)")
                             : std::string())};
  }
  const auto [busiest, most] = Busiest(p.units);
  if (most < kUnitBoundShare) return {};
  static const std::map<std::string, std::string> kBound = {
      {"mxu", "MXU bound"},
      {"vector_alu", "vector-ALU bound"},
      {"vector_load", "vector-load bound"},
      {"vector_store", "vector-store bound"},
      {"scalar_alu", "scalar-ALU bound"},
      {"xlu", "XLU bound"},
      {"hbm_bandwidth", "HBM-bandwidth bound"}};
  const std::string name = kBound.at(busiest);
  return {name, absl::StrCat(name, ": ", busiest, " busy ", Percent(most), " of its cycles")};
}

std::string OnTheLineNote(const KernelProfile& p, bool bound) {
  const auto [busiest, most] = Busiest(p.units);
  if (busiest.empty() || std::abs(most - kUnitBoundShare) > kOnTheLine) return "";
  return absl::StrFormat(" (on the line: %s busy %.1f%%, and %.0f%% makes a unit the bound%s)",
                         busiest, 100 * most, 100 * kUnitBoundShare,
                         bound ? "" : "; it is not counted as the bound");
}

}  // namespace podprof::insight
