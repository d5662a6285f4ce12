// What a chip writes into its device plane when a capture asks for kernel profiling
// (kernel_profiling.h); reading the request is kernel_profiling_request.cc's.
#include "sim/kernel_profiling.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "trace/xspace_schema.h"

namespace podprof::sim {
namespace {

using tensorflow::profiler::XEvent;
using tensorflow::profiler::XLine;
using trace::xspace::Stat;

// Metadata ids of the counters and of the intra-kernel events: far above the ops', the
// steps' (one per step) and the Pallas scopes' (1 << 40), so none can collide.
constexpr int64_t kFirstCounterMeta = int64_t{1} << 41;
constexpr int64_t kFirstIntraKernelMeta = int64_t{1} << 42;
// Line ids of the intra-kernel lines, after the builder's (1-5). Sample lines are numbered by
// sample, as XProf numbers them, and so share small ids with these; readers key them by name.
constexpr int64_t kPallasPrimitivesLineId = 6, kSourceLinesLineId = 7, kLloLineId = 8,
                  kSyncFlagLineId = 9;
// Suffixes of v7x's power manager registers (trace/perf_counter_ids_v7x.inc), on each die.
constexpr absl::string_view kPowerManagerBlock =
    "_PWRMGR_PWRMGR_TC_THROTTLE_CORE_DEBUG_STATS_UNPRIVILEGED_";
constexpr absl::string_view kPowerManagerCounters[] = {
    "CYCLE_COUNT", "CLOCKS_SKIPPED", "EXT_THROTTLE_CLOCKS_SKIPPED", "LDIDT_DROOP_CLOCKS_SKIPPED"};
// The HBM controllers' statistics blocks: VF_CHIP_DIE<d>_HBM_<s>_SS_HBMC_<c>_ + this.
constexpr absl::string_view kHbmControllerBlock = "_CMN_HI_FREQ_STATS_COUNTERS_UNPRIVILEGED_";
constexpr absl::string_view kHbmControllerCounters[] = {
    "RD_RESP_PS0", "RD_RESP_PS1",           "WR_REQ_PS0",
    "WR_REQ_PS1",  "PARTIAL_WRITE_REQ_PS0", "PARTIAL_WRITE_REQ_PS1"};
// HBM moves 32 bytes a beat (what XProf's Utilization Viewer multiplies beats by). The model
// knows a kernel's HBM bytes, not their direction: the simulator reads 3/4 of them and writes
// the rest, all as full writes.
constexpr double kHbmBytesPerBeat = 32;
constexpr double kHbmReadShare = 0.75;
// An LLO instruction event lasts this many cycles; they are written at most one per
// microsecond and 16 per primitive, enough to show what runs without the cost of every bundle.
constexpr double kLloInstructionCycles = 8;
constexpr int64_t kLloSpacingPs = 1'000'000;
constexpr int64_t kLloPerPrimitive = 16;

// What a counter is, for the Perf Counters tool's Description and Set columns.
struct CounterInfo {
  const char* prefix;
  const char* description;
  const char* sets;
};
constexpr CounterInfo kCounterInfos[] = {
    {"CYCLES", "TensorCore clock cycles not skipped by throttling", "cycles"},
    {"SCALAR_ALU_INSTRUCTION", "scalar ALU instructions issued", "issue"},
    {"VECTOR_ALU_INSTRUCTION", "vector ALU instructions issued", "issue"},
    {"VPU_VALU_", "vector ALU operations of one kind", "issue"},
    {"VST_INSTRUCTION", "vector stores to VMEM issued", "issue"},
    {"VLD_INSTRUCTION", "vector loads from VMEM issued", "issue"},
    {"MATMUL_", "matrix unit instructions issued", "mxu"},
    {"MXU_BUSY_", "cycles with this many matrix units busy", "mxu"},
    {"MATPUSH_CYCLES", "cycles pushing weights into a matrix unit", "mxu"},
    {"XLU_BUSY_", "cycles with this many cross-lane units busy", "xlu"},
    {"TRANSPOSE_XLU", "cross-lane transposes issued", "xlu"},
    {"ROTATE_PERMUTE", "cross-lane rotates and permutes issued", "xlu"},
    {"PACKED_XLU", "packed cross-lane instructions issued", "xlu"},
    {"CYCLE_COUNT", "power manager: TensorCore clock cycles, skipped ones included", "throttle"},
    {"CLOCKS_SKIPPED", "power manager: clock cycles skipped by throttling", "throttle"},
    {"EXT_THROTTLE_CLOCKS_SKIPPED", "power manager: clock cycles skipped by external throttling",
     "throttle"},
    {"LDIDT_DROOP_CLOCKS_SKIPPED", "power manager: clock cycles skipped for voltage droop",
     "throttle"},
    {"CYCLE_COUNTER_WINDOW", "CMN: clock cycles of the counting window", "hbm"},
    {"RD_RSP_BEAT_FROM_HBM", "CMN: 32-byte read beats from HBM", "hbm"},
    {"WR_REQ_BEAT_TO_HBM", "CMN: 32-byte write beats to HBM", "hbm"},
    {"RD_RESP_PS", "HBM controller: 32-byte read responses of a pseudo-channel", "hbm"},
    {"WR_REQ_PS", "HBM controller: 32-byte write requests of a pseudo-channel", "hbm"},
    {"PARTIAL_WRITE_REQ_PS", "HBM controller: partial write requests of a pseudo-channel", "hbm"},
};

// The counter's own name: what follows the statistics block ("MXU_BUSY_2", "CYCLE_COUNT").
absl::string_view CounterSuffix(absl::string_view register_name) {
  for (absl::string_view block : {"_COUNT_", "_UNPRIVILEGED_"}) {
    size_t at = register_name.find(block);
    if (at != absl::string_view::npos) return register_name.substr(at + block.size());
  }
  return register_name;
}

// The register groups the model counts in, by register name.
enum class Group { kTensorCore, kPowerManager, kCmn, kHbmController, kOther };
Group GroupOf(absl::string_view name) {
  if (absl::StrContains(name, "_TC_TCS_TC_MISC_TCS_STATS_")) return Group::kTensorCore;
  if (absl::StrContains(name, kPowerManagerBlock)) return Group::kPowerManager;
  if (absl::StrContains(name, "_CMN_CMNUR_")) return Group::kCmn;
  if (absl::StrContains(name, "_SS_HBMC_") && absl::StrContains(name, kHbmControllerBlock)) {
    return Group::kHbmController;
  }
  return Group::kOther;
}

// The ids of v7x's die-0 registers named "VF_CHIP_DIE0_" + ... + one of `suffixes` within
// `block`, table order.
std::vector<uint64_t> Die0Registers(absl::string_view block,
                                    absl::Span<const absl::string_view> suffixes,
                                    absl::string_view must_contain) {
  std::vector<uint64_t> out;
  for (const trace::PerfCounterId& c : trace::PerfCounterTable("v7x")) {
    const absl::string_view name = c.name;
    if (!absl::StartsWith(name, "VF_CHIP_DIE0_") || !absl::StrContains(name, must_contain)) {
      continue;
    }
    const size_t at = name.find(block);
    if (at == absl::string_view::npos) continue;
    const absl::string_view suffix = name.substr(at + block.size());
    if (std::find(suffixes.begin(), suffixes.end(), suffix) != suffixes.end()) {
      out.push_back(c.id);
    }
  }
  return out;
}

// The instruction an LLO line shows for a Pallas primitive.
absl::string_view LloInstruction(absl::string_view primitive) {
  if (primitive == "dma_start") return "dma.hbm_to_vmem";
  if (primitive == "dma_wait") return "vwait.sflag";
  if (primitive == "matmul") return "vmatmul.bf16";
  if (primitive == "softmax") return "vpow2.f32";
  if (primitive == "store") return "vst.msk";
  return "vnop";
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

}  // namespace

double TcCounterShare(absl::string_view counter, const UnitProfile& units,
                      int xlu_cycles_per_instruction) {
  const double m = units.mxu, v = units.vpu;
  // The cross-lane units shuffle what the vector units compute (reductions, transposes).
  const double x = units.vpu / 4;
  const double cpi = std::max(1, xlu_cycles_per_instruction);
  if (counter == "CYCLES") return 1;
  if (absl::StartsWith(counter, "SCALAR_ALU_INSTRUCTION_")) return units.scalar;
  if (absl::StartsWith(counter, "VECTOR_ALU_INSTRUCTION_")) return v;
  if (absl::StartsWith(counter, "VPU_VALU_FADD_OPS_")) return 0.25 * v;
  if (absl::StartsWith(counter, "VPU_VALU_FMUL_OPS_")) return 0.25 * v;
  if (absl::StartsWith(counter, "VPU_VALU_FMAC_OPS_")) return 0.3 * v;
  if (absl::StartsWith(counter, "VPU_VALU_MISC_OPS_")) return 0.1 * v;
  if (absl::StartsWith(counter, "VPU_VALU_INT_OPS_")) return 0.1 * v;
  if (counter == "VST_INSTRUCTION") return 0.3 * v + 0.1 * m;
  if (absl::StartsWith(counter, "VLD_INSTRUCTION_")) return 0.5 * v + 0.3 * m;
  if (counter == "MXU_BUSY_0") return (1 - m) * (1 - m);
  if (counter == "MXU_BUSY_1") return 2 * m * (1 - m);
  if (counter == "MXU_BUSY_2") return m * m;
  // XProf's MXU0/MXU1: 4 cycles per bf16 LMR instruction, 8 per bf16 VREG one.
  if (absl::StartsWith(counter, "MATMUL_LMR_BF16_MXU_")) return 0.75 * m / 4;
  if (absl::StartsWith(counter, "MATMUL_VREG_BF16_MXU_")) return 0.25 * m / 8;
  if (absl::StartsWith(counter, "MATPUSH_CYCLES_MXU_")) return 0.15 * m;
  if (counter == "XLU_BUSY_0") return (1 - x) * (1 - x);
  if (counter == "XLU_BUSY_1") return 2 * x * (1 - x);
  if (counter == "XLU_BUSY_2") return x * x;
  if (absl::StartsWith(counter, "TRANSPOSE_XLU_")) return 0.5 * x / cpi;
  if (absl::StartsWith(counter, "ROTATE_PERMUTE_INSTRUCTION_XLU_")) return 0.2 * x / cpi;
  if (absl::StartsWith(counter, "ROTATE_PERMUTE_SET_INSTRUCTION_XLU_")) return 0.1 * x / cpi;
  if (absl::StartsWith(counter, "PACKED_XLU_")) return 0.2 * x / cpi;
  return 0;
}

KernelProfileWriter::KernelProfileWriter(const PodModel& model, const Timebase& time, int chip,
                                         const KernelProfilingRequest& request,
                                         const exporter::PlaneStats& stats,
                                         tensorflow::profiler::XPlane* plane, int64_t max_samples)
    : model_(model),
      time_(time),
      chip_(chip),
      per_kernel_(request.per_kernel),
      schedule_(request.tc),
      stats_(stats),
      plane_(plane),
      mask_(schedule_.counter_size_bits >= 3
                ? ~uint64_t{0}
                : (uint64_t{1} << (8 << schedule_.counter_size_bits)) - 1),
      max_samples_(max_samples),
      counter_id_stat_(stats.IdOf(Stat::kPerformanceCounterId)),
      counter_value_stat_(stats.IdOf(Stat::kCounterValue)) {
  AddCounters(request);
  AddRates();
  totals_.assign(counters_.size(), 0);
  counts_at_start_.assign(counters_.size(), 0);
  totals_at_ps_ = time.true_start_ps;
  rate_ = &rates_.back();
  bool pallas = false;
  for (const OpTemplate& op : model.ops()) pallas |= !op.primitives.empty();
  if (!pallas) return;
  auto line = [&](int64_t id, absl::string_view name) {
    XLine* l = plane->add_lines();
    l->set_id(id);
    l->set_name(std::string(name));
    return l;
  };
  primitives_ = line(kPallasPrimitivesLineId, trace::xspace::kPallasPrimitivesLine);
  source_lines_ = line(kSourceLinesLineId, trace::xspace::kSourceLinesLine);
  llo_ = line(kLloLineId, trace::xspace::kLloInstructionsLine);
  sync_flag_ = line(kSyncFlagLineId, trace::xspace::kSyncFlagLine);
}

void KernelProfileWriter::AddCounters(const KernelProfilingRequest& request) {
  const trace::ChipGeneration& gen = model_.generation();
  const int dies = std::max(1, gen.tensor_cores);
  for (const auto& [component, indices] :
       {std::pair{"tc", &request.tc.indices}, std::pair{"cmn", &request.cmn}}) {
    for (int die = 0; die < dies; ++die) {
      for (int index : *indices) {
        std::optional<uint64_t> id = trace::ComponentCounterId(gen.name, component, die, index);
        if (id.has_value()) AddCounter(*id);
      }
    }
  }
  if (gen.name != "v7x") return;
  // Die 1's registers are die 0's one stride up (trace/perf_counters.h).
  std::vector<uint64_t> die0 = Die0Registers(kPowerManagerBlock, kPowerManagerCounters, "");
  if (request.hbm_controllers) {
    const std::vector<uint64_t> hbm =
        Die0Registers(kHbmControllerBlock, kHbmControllerCounters, "_SS_HBMC_");
    die0.insert(die0.end(), hbm.begin(), hbm.end());
  }
  for (int die = 0; die < dies; ++die) {
    for (uint64_t id : die0) AddCounter(id + trace::kV7xDieStride * static_cast<uint64_t>(die));
  }
}

void KernelProfileWriter::AddCounter(uint64_t id) {
  const int64_t meta_id = kFirstCounterMeta + static_cast<int64_t>(counters_.size());
  counters_.push_back({id, meta_id});
  ids_.push_back(id);
  std::optional<absl::string_view> name = trace::PerfCounterName(model_.generation().name, id);
  const absl::string_view suffix = name.has_value() ? CounterSuffix(*name) : "";
  CounterInfo info{"", "performance counter", "other"};
  for (const CounterInfo& i : kCounterInfos) {
    if (absl::StartsWith(suffix, i.prefix)) info = i;
  }
  auto& m = (*plane_->mutable_event_metadata())[meta_id];
  m.set_id(meta_id);
  // The Perf Counters tool shows the register name lower-cased; an index the table lacks
  // still gets a name that says which register it is.
  m.set_name(name.has_value() ? absl::AsciiStrToLower(*name)
                              : absl::StrCat("performance_counter_", id));
  stats_.Add(m.mutable_stats(), Stat::kPerformanceCounterId)->set_uint64_value(id);
  stats_.Add(m.mutable_stats(), Stat::kPerformanceCounterDescription)
      ->set_str_value(info.description);
  stats_.Add(m.mutable_stats(), Stat::kPerformanceCounterSets)->set_str_value(info.sets);
}

void KernelProfileWriter::AddRates() {
  const trace::ChipGeneration& gen = model_.generation();
  const double f = model_.ThrottleFraction(model_.config().host_index, chip_);
  const double clocks_per_ps = gen.tc_clock_hz * 1e-12;
  const auto& ops = model_.ops();
  // A die's TensorCore moves half the chip's HBM bytes, spread evenly over its controllers'
  // pseudo-channels.
  const double die_share = 1.0 / std::max(1, gen.tensor_cores);
  const double channels =
      2.0 * static_cast<double>(std::max<size_t>(
                1, Die0Registers(kHbmControllerBlock, {"RD_RESP_PS0"}, "_SS_HBMC_").size()));
  rates_.assign(ops.size() + 1, std::vector<double>(counters_.size(), 0));
  beats_per_byte_.assign(counters_.size(), 0);
  for (size_t c = 0; c < counters_.size(); ++c) {
    std::optional<absl::string_view> name = trace::PerfCounterName(gen.name, counters_[c].id);
    if (!name.has_value()) continue;  // unknown counters count nothing
    const absl::string_view suffix = CounterSuffix(*name);
    const Group group = GroupOf(*name);
    const double read = kHbmReadShare * die_share / kHbmBytesPerBeat;
    const double write = (1 - kHbmReadShare) * die_share / kHbmBytesPerBeat;
    if (group == Group::kCmn) {
      beats_per_byte_[c] = suffix == "RD_RSP_BEAT_FROM_HBM" ? read
                           : suffix == "WR_REQ_BEAT_TO_HBM" ? write
                                                            : 0;
    } else if (group == Group::kHbmController) {
      beats_per_byte_[c] = absl::StartsWith(suffix, "RD_RESP_PS")  ? read / channels
                           : absl::StartsWith(suffix, "WR_REQ_PS") ? write / channels
                                                                   : 0;
    }
    for (size_t s = 0; s < rates_.size(); ++s) {
      // An idle chip is a kernel with every unit idle: its clock and its "none busy" counters
      // run.
      const UnitProfile units = s < ops.size() ? ops[s].units : UnitProfile{};
      double per_clock = 0;
      if (group == Group::kPowerManager) {
        // The power manager counts every cycle of the clock and, of them, those it skipped:
        // XProf's Utilization Viewer gives "Clocks Skipped" as a share of CYCLE_COUNT, and
        // its unit rows too, so that a throttled die's units read as busy for less of the
        // time. (The TensorCore's COUNT_CYCLES counts only the clocked ones.)
        per_clock = suffix == "CYCLE_COUNT" ? 1 : suffix == "CLOCKS_SKIPPED" ? f : 0;
      } else if (group == Group::kCmn) {
        // The CMN's window runs on the nominal clock: it is not throttled with the core.
        per_clock = suffix == "CYCLE_COUNTER_WINDOW" ? 1 : 0;
      } else if (group == Group::kTensorCore) {
        per_clock = (1 - f) * TcCounterShare(suffix, units, gen.xlu_cycles_per_instruction);
      }
      rates_[s][c] = per_clock * clocks_per_ps;
    }
  }
}

void KernelProfileWriter::AdvanceTo(int64_t true_ps) {
  if (true_ps <= totals_at_ps_) return;
  const double dt = static_cast<double>(true_ps - totals_at_ps_);
  for (size_t c = 0; c < totals_.size(); ++c) {
    totals_[c] += ((*rate_)[c] + beats_per_byte_[c] * hbm_bytes_per_ps_) * dt;
  }
  totals_at_ps_ = true_ps;
}

void KernelProfileWriter::OnRun(const OpRun& run, int64_t start_ps, bool in_window) {
  const OpTemplate& op = model_.ops()[run.op];
  if (in_window && !op.collective && !op.primitives.empty() && primitives_ != nullptr) {
    AddIntraKernelLines(op, start_ps, run.duration_ps);
  }
}

void KernelProfileWriter::SampleRun(const OpRun& run, int64_t start_ps, bool in_window,
                                    XSpaceStream& out) {
  AdvanceTo(start_ps);
  const OpTemplate& op = model_.ops()[run.op];
  rate_ = &rates_[run.op];
  // HBM traffic is a compute kernel's: a collective's bytes are the links'.
  hbm_bytes_per_ps_ = op.collective || run.duration_ps <= 0
                          ? 0
                          : static_cast<double>(op.bytes) / static_cast<double>(run.duration_ps);
  const int64_t end_ps = start_ps + run.duration_ps;
  if (in_window && !op.collective) {
    if (!per_kernel_) {
      SamplePeriodically(op, start_ps, end_ps, out);
    } else if (TakeSample(start_ps)) {
      for (size_t c = 0; c < totals_.size(); ++c) {
        counts_at_start_[c] = static_cast<uint64_t>(std::max(0.0, totals_[c]));
      }
      AdvanceTo(end_ps);
      KernelLine(op, start_ps, run.duration_ps, out);
    }
  }
  AdvanceTo(end_ps);
  rate_ = &rates_.back();
  hbm_bytes_per_ps_ = 0;
}

void KernelProfileWriter::SamplePeriodically(const OpTemplate& op, int64_t start_ps, int64_t end_ps,
                                             XSpaceStream& out) {
  if (schedule_.external_trigger) {
    // The runtime triggers a sample as the kernel starts and as it ends.
    Sample(start_ps, op.name, out);
    if (time_.Inside(end_ps)) {
      AdvanceTo(end_ps);
      Sample(end_ps, op.name, out);
    }
    return;
  }
  // The timer runs from the session's start; only its ticks inside the kernel sample.
  const int64_t interval_ps = schedule_.interval_us * 1'000'000;
  const int64_t since = start_ps - time_.true_start_ps;
  int64_t t = time_.true_start_ps + (since + interval_ps - 1) / interval_ps * interval_ps;
  for (; t < end_ps && t < time_.true_end_ps; t += interval_ps) {
    AdvanceTo(t);
    Sample(t, op.name, out);
  }
}

bool KernelProfileWriter::TakeSample(int64_t true_ps) {
  if (samples_ >= max_samples_) {
    if (dropped_++ == 0) first_dropped_ps_ = true_ps;
    return false;
  }
  ++samples_;
  return true;
}

void KernelProfileWriter::AppendEvent(size_t counter, uint64_t offset_ps, uint64_t duration_ps,
                                      uint64_t value) {
  using trace::xspace::XEventField;
  using trace::xspace::XStatField;
  event_.clear();
  AppendVarintField(&event_, XEventField::kMetadataId,
                    static_cast<uint64_t>(counters_[counter].metadata_id));
  AppendVarintField(&event_, XEventField::kOffsetPs, offset_ps);
  if (duration_ps != 0) AppendVarintField(&event_, XEventField::kDurationPs, duration_ps);
  stat_.clear();
  AppendVarintField(&stat_, XStatField::kMetadataId, static_cast<uint64_t>(counter_id_stat_));
  AppendVarintField(&stat_, XStatField::kUint64Value, counters_[counter].id);
  AppendBytesField(&event_, XEventField::kStats, stat_);
  stat_.clear();
  AppendVarintField(&stat_, XStatField::kMetadataId, static_cast<uint64_t>(counter_value_stat_));
  AppendVarintField(&stat_, XStatField::kUint64Value, value);
  AppendBytesField(&event_, XEventField::kStats, stat_);
  AppendBytesField(&line_, trace::xspace::XLineField::kEvents, event_);
}

void KernelProfileWriter::Sample(int64_t true_ps, const std::string& kernel, XSpaceStream& out) {
  using trace::xspace::XLineField;
  if (!TakeSample(true_ps)) return;
  // The wire format of the XLine the generated classes would write (proto3: a zero id and an
  // empty name are left out; offset_ps is in a oneof, so it is written even when zero).
  line_.clear();
  const auto id = static_cast<uint64_t>(samples_ - 1);
  if (id != 0) AppendVarintField(&line_, XLineField::kId, id);
  if (!kernel.empty()) AppendBytesField(&line_, XLineField::kName, kernel);
  const int64_t at = time_.DeviceOffsetPs(true_ps);
  const int64_t ns = FloorDiv(at, 1000);
  if (ns != 0) AppendVarintField(&line_, XLineField::kTimestampNs, static_cast<uint64_t>(ns));
  const auto offset = static_cast<uint64_t>(at - ns * 1000);
  for (size_t c = 0; c < counters_.size(); ++c) {
    // The register holds whole counts; the sample is its low bits after the scaling shift.
    const uint64_t raw = static_cast<uint64_t>(std::max(0.0, totals_[c]));
    AppendEvent(c, offset, 0, (raw >> schedule_.scaling) & mask_);
  }
  out.AppendField(trace::xspace::XPlaneField::kLines, line_);
}

void KernelProfileWriter::KernelLine(const OpTemplate& op, int64_t start_ps, int64_t duration_ps,
                                     XSpaceStream& out) {
  using trace::xspace::XLineField;
  line_.clear();
  AppendVarintField(&line_, XLineField::kId, static_cast<uint64_t>(samples_));
  AppendBytesField(&line_, XLineField::kName,
                   absl::StrCat(trace::xspace::kKernelCountersLinePrefix, op.name));
  // The line starts where the plane's other lines do; its events span the kernel's XLA Ops
  // event exactly.
  const auto offset = static_cast<uint64_t>(time_.DeviceOffsetPs(start_ps));
  const auto duration = static_cast<uint64_t>(time_.clock.HostIntervalPs(duration_ps));
  for (size_t c = 0; c < counters_.size(); ++c) {
    const uint64_t now = static_cast<uint64_t>(std::max(0.0, totals_[c]));
    AppendEvent(c, offset, duration, now - std::min(now, counts_at_start_[c]));
  }
  out.AppendField(trace::xspace::XPlaneField::kLines, line_);
}

void KernelProfileWriter::AddIntraKernelLines(const OpTemplate& op, int64_t start_ps,
                                              int64_t duration_ps) {
  const double d = static_cast<double>(duration_ps);
  const int64_t instruction_ps =
      std::llround(kLloInstructionCycles * 1e12 / model_.generation().tc_clock_hz);
  double at = 0;
  for (const KernelPrimitive& p : op.primitives) {
    const int64_t s = start_ps + std::llround(d * at);
    at = std::min(1.0, at + p.share);
    const int64_t e = start_ps + std::llround(d * at);
    if (e <= s) continue;
    AddSpan(primitives_, p.name, s, e);
    AddSpan(source_lines_, absl::StrCat(op.name, ".py:", p.source_line), s, e);
    if (p.sync_wait) AddSpan(sync_flag_, std::string(trace::xspace::kSyncWaitEvent), s, e);
    const int64_t spacing = std::max(kLloSpacingPs, (e - s) / kLloPerPrimitive);
    for (int64_t t = s; t + instruction_ps <= e; t += spacing) {
      AddSpan(llo_, LloInstruction(p.name), t, t + instruction_ps);
    }
  }
}

int64_t KernelProfileWriter::Meta(absl::string_view name) {
  auto [it, added] = metadata_ids_.try_emplace(
      name, kFirstIntraKernelMeta + static_cast<int64_t>(metadata_ids_.size()));
  if (added) {
    auto& m = (*plane_->mutable_event_metadata())[it->second];
    m.set_id(it->second);
    m.set_name(std::string(name));
  }
  return it->second;
}

void KernelProfileWriter::AddSpan(XLine* line, absl::string_view name, int64_t start_ps,
                                  int64_t end_ps) {
  XEvent* ev = line->add_events();
  ev->set_metadata_id(Meta(name));
  // Both ends through the device timebase, so a slice nests in its kernel under any drift.
  const int64_t off = time_.DeviceOffsetPs(start_ps);
  ev->set_offset_ps(off);
  ev->set_duration_ps(time_.DeviceOffsetPs(end_ps) - off);
}

}  // namespace podprof::sim
