#include "insight/kernel_profile.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "trace/perf_counters.h"

namespace podprof::insight {
namespace {

// XProf's Utilization Viewer: one HBM beat moves 32 bytes, one ICI flit 128; its ICI peak
// (bytes/s) over cycles at an assumed 1 GHz.
constexpr double kHbmBytesPerBeat = 32;
constexpr double kIciBytesPerFlit = 128;
constexpr double kIciPeakBytesPerS = 294947368421.0526;
constexpr double kIciClockHz = 1e9;
// Cycles per MXU instruction, by source (LMR, VREG) and precision.
constexpr double kCpiLmrI4 = 2, kCpiLmrI8 = 2, kCpiLmrBf16 = 4, kCpiVregI4 = 8, kCpiVregI8 = 8,
                 kCpiVregF8 = 8, kCpiVregBf16 = 8, kCpiVregF32 = 4;
// A clock this throttled is the cause; less is noise.
constexpr double kThrottledShare = 0.1;
// An MXU this idle, in a kernel that waits on sync flags this much (or moves HBM data at this
// share of the peak), is waiting on memory.
constexpr double kIdleMxu = 0.3;
constexpr double kWaitingShare = 0.3;
constexpr double kBusyHbm = 0.6;

// To a tenth, as the tables print the same figures (report/format.h).
std::string Percent(double f) { return absl::StrFormat("%.1f%%", 100 * f); }

// One die's counter increases by short name without the die ("tc_mxu_busy_2"), and the
// generation's rules.
class DieCounters {
 public:
  DieCounters(const std::map<std::string, double>& totals, absl::string_view die_prefix) {
    for (const auto& [name, value] : totals) {
      absl::string_view n = name;
      if (!absl::ConsumePrefix(&n, trace::kPerfSeriesPrefix) ||
          !absl::ConsumePrefix(&n, die_prefix)) {
        continue;
      }
      // "die1_..." is another die's when this one has no prefix (v6e has none).
      if (die_prefix.empty() && absl::StartsWith(n, "die")) continue;
      sum_[std::string(n)] += value;
    }
  }
  bool Has(absl::string_view key) const { return sum_.count(std::string(key)) > 0; }
  double Get(absl::string_view key) const {
    auto it = sum_.find(std::string(key));
    return it == sum_.end() ? 0 : it->second;
  }
  // The sum of counters `tc_<name>` for each name; `*any` set when one was sampled.
  double Tc(std::initializer_list<absl::string_view> names, bool* any) const {
    double s = 0;
    for (absl::string_view n : names) {
      auto it = sum_.find(absl::StrCat("tc_", n));
      if (it == sum_.end()) continue;
      *any = true;
      s += it->second;
    }
    return s;
  }
  // The sum of every counter whose name starts with `prefix` and ends with one of `suffixes`.
  double Matching(absl::string_view prefix, std::initializer_list<absl::string_view> suffixes,
                  bool* any) const {
    double s = 0;
    for (const auto& [name, value] : sum_) {
      if (!absl::StartsWith(name, prefix)) continue;
      for (absl::string_view suffix : suffixes) {
        if (absl::EndsWith(name, suffix)) {
          *any = true;
          s += value;
          break;
        }
      }
    }
    return s;
  }

 private:
  std::map<std::string, double> sum_;
};

// Adds a row when any of its counters was sampled.
void Row(std::vector<UtilizationRow>* rows, const char* name, bool any, double achieved,
         double peak, const char* unit) {
  if (peak > 0) rows->push_back({name, achieved, peak, unit, any});
}

// The MXU cycles of MXU `m` (XProf: instructions by source and precision x their CPI).
struct MxuCycles {
  double bf16 = 0, f8 = 0, i8 = 0, i4 = 0;
  double total() const { return bf16 + f8 + i8 + i4; }
};
MxuCycles MxuOf(const DieCounters& c, int m, bool v6e, bool* any) {
  auto n = [&](const char* what) { return c.Tc({absl::StrCat("matmul_", what, "_mxu_", m)}, any); };
  MxuCycles out;
  out.bf16 =
      kCpiLmrBf16 * n("lmr_bf16") + kCpiVregBf16 * n("vreg_bf16") + kCpiVregF32 * n("vreg_f32");
  out.f8 = kCpiVregF8 * n("vreg_f8");
  if (v6e) {
    out.i8 = kCpiLmrI8 * n("lmr_i8") + kCpiVregI8 * n("vreg_i8");
    out.i4 = kCpiLmrI4 * n("lmr_i4") + kCpiVregI4 * n("vreg_i4");
  }
  return out;
}

// The rows of a pair of units' busy counters (`<counter>0..2`: cycles with none, one or both
// busy), named `names`, and their average: one busy counts half.
void BusyRows(const DieCounters& c, const std::string& counter,
              const std::array<const char*, 4>& names, double cycles,
              std::vector<UtilizationRow>* rows) {
  bool any = false;
  double busy[3];
  for (int n = 0; n < 3; ++n) busy[n] = c.Tc({absl::StrCat(counter, n)}, &any);
  for (int n = 0; n < 3; ++n) Row(rows, names[n], any, busy[n], cycles, "cycles");
  Row(rows, names[3], any, 0.5 * busy[1] + busy[2], cycles, "cycles");
}

void MxuRows(const DieCounters& c, double cycles, bool v6e, std::vector<UtilizationRow>* rows) {
  BusyRows(c, "mxu_busy_", {"No MXU Busy", "1 MXU Busy", "2 MXU Busy", "Avg MXU Busy"}, cycles,
           rows);
  bool mm = false;
  const MxuCycles m0 = MxuOf(c, 0, v6e, &mm), m1 = MxuOf(c, 1, v6e, &mm);
  Row(rows, "MXU0", mm, m0.total(), cycles, "cycles");
  Row(rows, "MXU1", mm, m1.total(), cycles, "cycles");
  // v6e counts F8 with BF16 (XProf's formula); v7x has a row of its own for it.
  const double bf16 = m0.bf16 + m1.bf16 + (v6e ? m0.f8 + m1.f8 : 0);
  Row(rows, "MXU BF16", mm, bf16, 2 * cycles, "cycles");
  if (v6e) {
    Row(rows, "MXU I8", mm, m0.i8 + m1.i8, 2 * cycles, "cycles");
    Row(rows, "MXU I4", mm, m0.i4 + m1.i4, 2 * cycles, "cycles");
  } else {
    Row(rows, "MXU E4M3 + E5M2", mm, m0.f8 + m1.f8, 2 * cycles, "cycles");
  }
  bool mp = false;
  Row(rows, "MXU matpush", mp, c.Tc({"matpush_cycles_mxu_0", "matpush_cycles_mxu_1"}, &mp),
      2 * cycles, "cycles");
}

void XluRows(const DieCounters& c, double cycles, int cycles_per_xlu,
             std::vector<UtilizationRow>* rows) {
  BusyRows(c, "xlu_busy_", {"No XLU Busy", "1 XLU Busy", "2 XLUs Busy", "Avg XLU Busy"}, cycles,
           rows);
  // XProf divides integer cycles.
  const double peak = std::floor(cycles / cycles_per_xlu);
  for (int x = 0; x < 2; ++x) {
    bool used = false;
    const double n = c.Tc(
        {absl::StrCat("packed_xlu_", x), absl::StrCat("rotate_permute_instruction_xlu_", x),
         absl::StrCat("rotate_permute_set_instruction_xlu_", x), absl::StrCat("transpose_xlu_", x)},
        &used);
    Row(rows, x == 0 ? "XLU0" : "XLU1", used, n, peak, "instructions");
  }
}

// The TensorCore rows of one die against `cycles`, in XProf's order.
void TcRows(const DieCounters& c, double cycles, bool v6e, int cycles_per_xlu,
            std::vector<UtilizationRow>* rows) {
  if (!v6e) {
    for (const auto& [row, counter] :
         {std::pair<const char*, const char*>{"Clocks Skipped", "pwrmgr_clocks_skipped"},
          {"Ext Throttle Clocks Skipped", "pwrmgr_ext_throttle_clocks_skipped"},
          {"LDIDT Droop Clocks Skipped", "pwrmgr_ldidt_droop_clocks_skipped"}}) {
      Row(rows, row, c.Has(counter), c.Get(counter), cycles, "cycles");
    }
  }
  bool any = false;
  double n = c.Tc({"scalar_alu_instruction_0", "scalar_alu_instruction_1"}, &any);
  Row(rows, "Scalar Unit", any, n, 2 * cycles, "instructions");
  any = false;
  n = c.Tc({"vector_alu_instruction_0", "vector_alu_instruction_1", "vector_alu_instruction_2",
            "vector_alu_instruction_3"},
           &any);
  Row(rows, "Vector ALUs", any, n, 4 * cycles, "instructions");
  any = false;
  double vpu = 0;
  for (const char* op : {"fadd", "fmul", "misc", "int", "fmac"}) {
    for (int i = 0; i < 4; ++i) vpu += c.Tc({absl::StrCat("vpu_valu_", op, "_ops_", i)}, &any);
  }
  Row(rows, "VPU Utilization", any, vpu, 4 * cycles, "instructions");
  any = false;
  n = c.Tc({"vst_instruction"}, &any);
  Row(rows, "Vmem Stores", any, n, cycles, "instructions");
  any = false;
  n = c.Tc({"vld_instruction_0", "vld_instruction_1"}, &any);
  Row(rows, "Vmem Loads", any, n, 2 * cycles, "instructions");
  MxuRows(c, cycles, v6e, rows);
  XluRows(c, cycles, cycles_per_xlu, rows);
}

// HBM against the TC's own cycle count at the generation's clock, and the read/write split.
void HbmRows(const DieCounters& c, const trace::ChipGeneration& g,
             std::vector<UtilizationRow>* rows, double nominal_cycles = 0) {
  const double tc_cycles = c.Get("tc_cycles") > 0 ? c.Get("tc_cycles") : nominal_cycles;
  if (tc_cycles <= 0 || g.tc_clock_hz <= 0) return;
  bool any = false;
  const double rd = kHbmBytesPerBeat * c.Matching("hbm_", {"_rd_resp_ps0", "_rd_resp_ps1"}, &any);
  const double wr =
      kHbmBytesPerBeat *
      c.Matching("hbm_",
                 {"_wr_req_ps0", "_wr_req_ps1", "_partial_write_req_ps0", "_partial_write_req_ps1"},
                 &any);
  Row(rows, "HBM Rd+Wr", any, rd + wr, g.hbm_bytes_per_s_per_core * tc_cycles / g.tc_clock_hz,
      "bytes");
  if (rd + wr > 0) {
    Row(rows, "HBM Read Ratio", any, rd, rd + wr, "percent");
    Row(rows, "HBM Write Ratio", any, wr, rd + wr, "percent");
  }
}

// The chip's ICI rows (on the die that carries them): flits over cycles at XProf's 1 GHz.
void IciRows(const DieCounters& c, const DieCounters& die0, bool v6e,
             std::vector<UtilizationRow>* rows) {
  const double cycles = v6e ? die0.Get("tc_cycles") : die0.Get("pwrmgr_cycle_count");
  if (cycles <= 0) return;
  const double peak = kIciPeakBytesPerS * cycles / kIciClockHz;
  bool rd_any = false, wr_any = false;
  const double rd = c.Matching(
      "oci_icr", {"_bn_rd_req_0_insertion_count", "_bn_rd_req_1_insertion_count"}, &rd_any);
  const double wr = c.Matching(
      "oci_icr", {"_bn_wr_req_0_insertion_count", "_bn_wr_req_1_insertion_count"}, &wr_any);
  Row(rows, "ICI (Read)", rd_any, kIciBytesPerFlit * rd, peak, "bytes");
  Row(rows, "ICI (Write)", wr_any, kIciBytesPerFlit * wr, peak, "bytes");
}

// One SparseCore's rows (XProf's ComputeTpuv7xScUnitUtilization and its v6e twin), named
// "SparseCore <core>: <row>": its tiles' scalar and vector issue against tile 0's cycles x 16
// tiles, and its sequencer's against its own cycles. None without those cycles.
void SparseCoreRows(const DieCounters& c, int core, bool v6e, std::vector<UtilizationRow>* rows) {
  const std::string sc = absl::StrCat("sc_", core, "_");
  const std::string tec = sc + (v6e ? "sct_" : "sctd_"), vec = sc + (v6e ? "sct_" : "sctc_");
  const double tile_cycles = c.Get(tec + "0_cycles"), scs_cycles = c.Get(sc + "scs_cycles");
  auto row = [&](const std::string& prefix, absl::string_view counter, absl::string_view name,
                 double peak) {
    bool any = false;
    const double n = c.Matching(prefix, {absl::StrCat("_", counter)}, &any);
    const std::string full = absl::StrCat("SparseCore ", core, ": ", name);
    Row(rows, full.c_str(), any, n, peak, "instructions");
  };
  if (tile_cycles > 0) {
    row(tec, "tec_scalar_issue", "TEC Scalar Issue", 16 * tile_cycles);
    row(tec, "tec_s0_instruction", "TEC Scalar Issue: S0 slot", 16 * tile_cycles);
    row(tec, "tec_s1_instruction", "TEC Scalar Issue: S1 slot", 16 * tile_cycles);
    row(tec, "tec_smisc_instruction", "TEC Scalar Issue: Smisc slot", 16 * tile_cycles);
    row(vec, "vector_issue", "SC Vector Issue", 16 * tile_cycles);
    // XProf spells three of v6e's slot rows without the space ("SC Vector Issue:V0 Slot").
    for (const char* slot : {"V0", "V1", "V2", "VLD", "VST", "VEX", "VRES"}) {
      const absl::string_view sl = slot;
      const bool tight = v6e && (sl == "V0" || sl == "VEX" || sl == "VRES");
      row(vec, absl::AsciiStrToLower(absl::StrCat(slot, "_instruction")),
          absl::StrCat("SC Vector Issue", tight ? ":" : ": ", slot, " Slot"), 16 * tile_cycles);
    }
  }
  if (scs_cycles > 0) {
    row(sc + "scs", "scalar_issue", "SCS Scalar Issue", scs_cycles);
    row(sc + "scs", "s0_instruction", "SCS: S0 Slot", scs_cycles);
    row(sc + "scs", "s1_instruction", "SCS: S1 Slot", scs_cycles);
    row(sc + "scs", "smisc_instruction", "SCS: Smisc Slot", scs_cycles);
  }
}

// The busy share of each unit, from the rows it is read from.
std::map<std::string, double> UnitsOf(const std::vector<UtilizationRow>& rows) {
  static const std::pair<const char*, const char*> kFrom[] = {
      {"mxu", "Avg MXU Busy"},       {"vpu", "VPU Utilization"},      {"vector_alu", "Vector ALUs"},
      {"vector_load", "Vmem Loads"}, {"vector_store", "Vmem Stores"}, {"scalar_alu", "Scalar Unit"},
      {"xlu", "Avg XLU Busy"},       {"hbm_bandwidth", "HBM Rd+Wr"}};
  std::map<std::string, double> units;
  for (const auto& [unit, row] : kFrom) {
    for (const UtilizationRow& r : rows) {
      if (r.name == row) units[unit] = r.Share();
    }
  }
  return units;
}

// What XProf's Utilization Viewer computes for one die.
DieProfile DieFigures(const trace::ChipGeneration& g, const std::map<std::string, double>& totals,
                      int die, bool dies_named) {
  const bool v6e = g.name == "v6e";
  const std::string prefix = dies_named ? absl::StrCat("die", die, "_") : "";
  const DieCounters c(totals, prefix);
  DieProfile out;
  out.die = die;
  out.cycles = v6e ? c.Get("tc_cycles") : c.Get("pwrmgr_cycle_count");
  if (out.cycles <= 0) {
    out.missing =
        v6e ? "no cycle count (COUNT_CYCLES)" : "no cycle count (the power manager's CYCLE_COUNT)";
    // HBM has a time base of its own, the TC's COUNT_CYCLES: XProf keeps the die's HBM rows.
    HbmRows(c, g, &out.rows);
    return out;
  }
  TcRows(c, out.cycles, v6e, std::max(1, g.xlu_cycles_per_instruction), &out.rows);
  HbmRows(c, g, &out.rows);
  if (die == 0) IciRows(dies_named ? DieCounters(totals, "die1_") : c, c, v6e, &out.rows);
  for (int core = 0; core < 2; ++core) SparseCoreRows(c, core, v6e, &out.rows);
  if (!v6e) {
    out.power_manager = true;
    out.throttled = c.Get("pwrmgr_clocks_skipped") / out.cycles;
  }
  return out;
}

// The dies the counters name ("perf/die1_..."), in order; {0} when they name none.
std::vector<int> DiesOf(const std::map<std::string, double>& totals, bool* named) {
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
  *named = !dies.empty();
  if (dies.empty()) dies.push_back(0);
  return dies;
}

// Each row's achieved and peak summed over the dies that have it, in first-seen order.
std::vector<UtilizationRow> Pool(const std::vector<DieProfile>& dies) {
  std::vector<UtilizationRow> pooled;
  for (const DieProfile& d : dies) {
    for (const UtilizationRow& r : d.rows) {
      auto it = std::find_if(pooled.begin(), pooled.end(),
                             [&](const UtilizationRow& p) { return p.name == r.name; });
      if (it == pooled.end()) {
        pooled.push_back(r);
      } else {
        it->achieved += r.achieved;
        it->peak += r.peak;
        it->measured = it->measured || r.measured;
      }
    }
  }
  return pooled;
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

std::vector<UtilizationRow> XprofPooledRows(const trace::ChipGeneration& generation,
                                            const std::map<std::string, double>& totals,
                                            double nominal_cycles, std::vector<int>* nominal) {
  const bool v6e = generation.name == "v6e";
  std::vector<DieProfile> dies;
  for (int die = 0; die < std::max(1, generation.tensor_cores); ++die) {
    DieProfile d = DieFigures(generation, totals, die, !v6e);
    if (d.cycles <= 0 && nominal_cycles > 0) {
      // Its counters against the nominal cycles: the TensorCore's rows only.
      const DieCounters c(totals, v6e ? "" : absl::StrCat("die", die, "_"));
      d.cycles = nominal_cycles;
      TcRows(c, nominal_cycles, v6e, std::max(1, generation.xlu_cycles_per_instruction), &d.rows);
      // v6e's cycle count is the TC's, HBM's time base: nominal too. (A v7x die keeps its
      // HBM rows only with the TC's own count.)
      if (v6e) HbmRows(c, generation, &d.rows, nominal_cycles);
      nominal->push_back(die);
    }
    dies.push_back(std::move(d));
  }
  return Pool(dies);
}

KernelProfile ProfileFromCounters(const trace::ChipGeneration* generation,
                                  const std::map<std::string, double>& totals, int64_t covered_ps,
                                  int64_t sync_wait_ps, int64_t total_ps) {
  KernelProfile p;
  for (const auto& [name, value] : totals) p.present = p.present || trace::IsPerfSeries(name);
  if (!p.present || covered_ps <= 0) return KernelProfile{};
  if (total_ps > 0) {
    p.sync_wait = std::min(1.0, static_cast<double>(sync_wait_ps) / static_cast<double>(total_ps));
  }
  if (generation == nullptr || (generation->name != "v6e" && generation->name != "v7x")) {
    p.missing = "XProf's Utilization Viewer has formulas for v6e and v7x only";
    return p;
  }
  bool named = false;
  double skipped = 0;
  for (int die : DiesOf(totals, &named)) {
    p.dies.push_back(DieFigures(*generation, totals, die, named));
    const DieProfile& d = p.dies.back();
    p.cycles += d.cycles;
    skipped += d.throttled * d.cycles;
    p.power_manager = p.power_manager || d.power_manager;
  }
  p.rows = Pool(p.dies);
  auto unmeasured = [](const UtilizationRow& r) { return !r.measured; };
  p.rows.erase(std::remove_if(p.rows.begin(), p.rows.end(), unmeasured), p.rows.end());
  p.units = UnitsOf(p.rows);
  for (DieProfile& d : p.dies) {
    d.rows.erase(std::remove_if(d.rows.begin(), d.rows.end(), unmeasured), d.rows.end());
    d.units = UnitsOf(d.rows);
  }
  if (p.cycles > 0) p.throttled = skipped / p.cycles;
  if (p.rows.empty()) p.missing = "no cycle count on any die";
  // A chip of one TensorCore has no die to tell apart.
  if (!named) p.dies.clear();
  return p;
}

namespace {

// The cause one set of figures shows (CauseOf for a profile or one of its dies).
ProfileCause CauseOfFigures(const std::map<std::string, double>& units, double throttled,
                            double sync_wait, bool memory_bound, bool mxu_work) {
  auto unit = [&](const char* name) {
    auto it = units.find(name);
    return it == units.end() ? -1.0 : it->second;
  };
  const double mxu = unit("mxu"), hbm = unit("hbm_bandwidth");
  const bool waits = sync_wait >= kWaitingShare || hbm >= kBusyHbm || (hbm < 0 && memory_bound);
  if (mxu_work && mxu >= 0 && mxu < kIdleMxu && waits) {
    std::string why;
    if (sync_wait > 0) absl::StrAppend(&why, ", ", Percent(sync_wait), " of it in sync waits");
    if (hbm >= 0) absl::StrAppend(&why, ", HBM at ", Percent(hbm), " of peak");
    if (throttled >= kThrottledShare) {
      absl::StrAppend(&why, "; also throttled, ", Percent(throttled),
                      " of its clock cycles skipped (power manager)");
    }
    if (why.empty()) why = ", and its costs put it under the roofline's ridge";
    return {"MXU idle waiting on HBM",
            absl::StrCat("MXU idle waiting on HBM: MXU busy ", Percent(mxu), why)};
  }
  if (throttled >= kThrottledShare) {
    return {"throttled", absl::StrCat("throttled: ", Percent(throttled),
                                      " of its clock cycles skipped (power manager)")};
  }
  const auto [busiest, most] = Busiest(units);
  if (most < kUnitBoundShare) return {};
  static const std::map<std::string, std::string> kBound = {
      {"mxu", "MXU bound"},
      {"vpu", "VPU bound"},
      {"vector_alu", "vector-ALU bound"},
      {"vector_load", "vector-load bound"},
      {"vector_store", "vector-store bound"},
      {"scalar_alu", "scalar-ALU bound"},
      {"xlu", "XLU bound"},
      {"hbm_bandwidth", "HBM-bandwidth bound"}};
  const std::string name = kBound.at(busiest);
  return {name, absl::StrCat(name, ": ", busiest, " busy ", Percent(most), " of its cycles")};
}

}  // namespace

ProfileCause CauseOf(const KernelProfile& p, bool memory_bound, bool mxu_work) {
  if (!p.present) return {};
  const ProfileCause pooled =
      CauseOfFigures(p.units, p.throttled, p.sync_wait, memory_bound, mxu_work);
  // Each die's own cause; where they differ, the die that shows one is the cause, named.
  std::vector<std::pair<int, ProfileCause>> by_die;
  bool agree = true;
  for (const DieProfile& d : p.dies) {
    if (!d.missing.empty()) continue;
    by_die.push_back(
        {d.die, CauseOfFigures(d.units, d.throttled, p.sync_wait, memory_bound, mxu_work)});
    agree = agree && by_die.back().second.name == by_die.front().second.name;
  }
  if (agree) return pooled;
  for (const auto& [die, cause] : by_die) {
    if (cause.name.empty()) continue;
    std::string others;
    for (const auto& [other, theirs] : by_die) {
      if (other == die) continue;
      absl::StrAppend(&others, "; die ", other,
                      " disagrees: ", theirs.name.empty() ? std::string("no cause") : theirs.text);
    }
    return {cause.name, absl::StrCat("die ", die, " ", cause.text, others)};
  }
  return pooled;
}

std::string OnTheLineNote(const KernelProfile& p, bool bound) {
  const auto [busiest, most] = Busiest(p.units);
  if (busiest.empty() || std::abs(most - kUnitBoundShare) > kOnTheLine) return "";
  return absl::StrFormat(" (on the line: %s busy %.1f%%, and %.0f%% makes a unit the bound%s)",
                         busiest, 100 * most, 100 * kUnitBoundShare,
                         bound ? "" : "; it is not counted as the bound");
}

}  // namespace podprof::insight
