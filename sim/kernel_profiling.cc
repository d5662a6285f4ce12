#include "sim/kernel_profiling.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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
// v7x's power manager: a die's nominal clock cycles and the cycles throttling skipped
// (trace/perf_counter_ids_v7x.inc); die 1's registers are die 0's plus the die stride.
constexpr uint64_t kV7xPwrCycleCount = 2847490056u, kV7xPwrClocksSkipped = 2847490064u;
constexpr uint64_t kV7xDieStride = 0x20000000;
// An LLO instruction event lasts this many cycles; they are written at most one per
// microsecond and 16 per primitive, enough to show what runs without the cost of every bundle.
constexpr double kLloInstructionCycles = 8;
constexpr int64_t kLloSpacingPs = 1'000'000;
constexpr int64_t kLloPerPrimitive = 16;

// A flag of advanced_configuration: a bool, or the int or string spellings of one.
absl::StatusOr<bool> Flag(const tensorflow::ProfileOptions& options, const char* key) {
  auto it = options.advanced_configuration().find(key);
  if (it == options.advanced_configuration().end()) return false;
  using Value = tensorflow::ProfileOptions::AdvancedConfigValue;
  const Value& v = it->second;
  if (v.value_case() == Value::kBoolValue) return v.bool_value();
  if (v.value_case() == Value::kInt64Value) return v.int64_value() != 0;
  if (v.value_case() == Value::kStringValue &&
      (v.string_value() == "true" || v.string_value() == "false")) {
    return v.string_value() == "true";
  }
  return absl::InvalidArgumentError(
      absl::StrCat("advanced_configuration[\"", key, "\"] must be a bool"));
}

// A component's sampling options, when the capture gives them.
absl::StatusOr<std::optional<trace::SamplingOptions>> Sampling(
    const tensorflow::ProfileOptions& options, absl::string_view component) {
  const std::string key = absl::StrCat("tpu_", component, "_perf_counter_sampling_options");
  auto it = options.advanced_configuration().find(key);
  if (it == options.advanced_configuration().end()) return std::nullopt;
  if (it->second.value_case() != tensorflow::ProfileOptions::AdvancedConfigValue::kStringValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("advanced_configuration[\"", key, "\"] must be a string"));
  }
  absl::StatusOr<trace::SamplingOptions> parsed =
      trace::ParseSamplingOptions(it->second.string_value());
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("advanced_configuration[\"", key, "\"]: ", parsed.status().message()));
  }
  return *parsed;
}

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
    {"VST_INSTRUCTION", "vector stores to VMEM issued", "issue"},
    {"VLD_INSTRUCTION", "vector loads from VMEM issued", "issue"},
    {"MATMUL_", "matrix unit instructions issued", "mxu"},
    {"MXU_BUSY_", "cycles with this many matrix units busy", "mxu"},
    {"MATPUSH_CYCLES", "cycles pushing weights into a matrix unit", "mxu"},
    {"XLU_BUSY_", "cycles with this many cross-lane units busy", "xlu"},
    {"TRANSPOSE_XLU", "cross-lane transposes issued", "xlu"},
    {"ROTATE_PERMUTE", "cross-lane rotates and permutes issued", "xlu"},
    {"PACKED_XLU", "packed cross-lane instructions issued", "xlu"},
    {"CYCLE_COUNT", "power manager: TensorCore clock cycles, skipped or not", "throttle"},
    {"CLOCKS_SKIPPED", "power manager: clock cycles skipped by throttling", "throttle"},
};

// The counter's own name: what follows the statistics block ("MXU_BUSY_2", "CYCLE_COUNT").
absl::string_view CounterSuffix(absl::string_view register_name) {
  for (absl::string_view block : {"_COUNT_", "_UNPRIVILEGED_"}) {
    size_t at = register_name.find(block);
    if (at != absl::string_view::npos) return register_name.substr(at + block.size());
  }
  return register_name;
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

trace::SamplingOptions DefaultTcSampling() {
  trace::SamplingOptions o;
  o.external_trigger = true;
  o.indices = {0, 10, 11, 31, 32, 33, 34, 35, 37, 38, 56, 57, 58, 73, 74, 75};
  return o;
}

absl::StatusOr<KernelProfilingRequest> KernelProfilingFromOptions(
    const tensorflow::ProfileOptions& options) {
  KernelProfilingRequest r;
  absl::StatusOr<bool> periodic = Flag(options, kPeriodicSamplingKey);
  if (!periodic.ok()) return periodic.status();
  absl::StatusOr<bool> kernel = Flag(options, kKernelProfilingKey);
  if (!kernel.ok()) return kernel.status();
  r.requested = *periodic || *kernel;
  // Every component's options are checked, asked for or not: a malformed value is a mistake
  // the user wants to hear about before the capture, not after.
  for (absl::string_view component : trace::kPerfComponents) {
    absl::StatusOr<std::optional<trace::SamplingOptions>> s = Sampling(options, component);
    if (!s.ok()) return s.status();
    if (!s->has_value()) continue;
    if (component == "tc") {
      r.tc = **s;
    } else if (r.requested) {
      r.ignored_components.emplace_back(component);
    }
  }
  if (r.requested && options.advanced_configuration().count(kTcSamplingKey) == 0) {
    r.tc = DefaultTcSampling();
  }
  return r;
}

double TcCounterShare(absl::string_view counter, const UnitProfile& units,
                      int xlu_cycles_per_instruction) {
  const double m = units.mxu;
  // The cross-lane units shuffle what the vector units compute (reductions, transposes).
  const double x = units.vpu / 4;
  const double cpi = std::max(1, xlu_cycles_per_instruction);
  if (counter == "CYCLES") return 1;
  if (absl::StartsWith(counter, "SCALAR_ALU_INSTRUCTION_")) return units.scalar;
  if (absl::StartsWith(counter, "VECTOR_ALU_INSTRUCTION_")) return units.vpu;
  if (counter == "VST_INSTRUCTION") return 0.3 * units.vpu + 0.1 * m;
  if (absl::StartsWith(counter, "VLD_INSTRUCTION_")) return 0.5 * units.vpu + 0.3 * m;
  if (counter == "MXU_BUSY_0") return (1 - m) * (1 - m);
  if (counter == "MXU_BUSY_1") return 2 * m * (1 - m);
  if (counter == "MXU_BUSY_2") return m * m;
  // A bf16 matmul instruction holds its MXU 8 cycles (XProf's MXU0/MXU1 formula).
  if (absl::StartsWith(counter, "MATMUL_VREG_BF16_MXU_")) return m / 8;
  if (absl::StartsWith(counter, "MATPUSH_CYCLES_MXU_")) return 0.15 * m;
  if (counter == "XLU_BUSY_0") return (1 - x) * (1 - x);
  if (counter == "XLU_BUSY_1") return 2 * x * (1 - x);
  if (counter == "XLU_BUSY_2") return x * x;
  if (absl::StartsWith(counter, "TRANSPOSE_XLU_")) return 0.5 * x / cpi;
  if (absl::StartsWith(counter, "ROTATE_PERMUTE_INSTRUCTION_XLU_")) return 0.3 * x / cpi;
  if (absl::StartsWith(counter, "PACKED_XLU_")) return 0.2 * x / cpi;
  return 0;
}

KernelProfileWriter::KernelProfileWriter(const PodModel& model, const Timebase& time, int chip,
                                         const trace::SamplingOptions& tc,
                                         const exporter::PlaneStats& stats,
                                         tensorflow::profiler::XPlane* plane, int64_t max_samples)
    : model_(model),
      time_(time),
      chip_(chip),
      tc_(tc),
      stats_(stats),
      plane_(plane),
      mask_(tc.counter_size_bits >= 3 ? ~uint64_t{0}
                                      : (uint64_t{1} << (8 << tc.counter_size_bits)) - 1),
      max_samples_(max_samples),
      counter_id_stat_(stats.IdOf(Stat::kPerformanceCounterId)),
      counter_value_stat_(stats.IdOf(Stat::kCounterValue)) {
  const trace::ChipGeneration& gen = model.generation();
  for (int die = 0; die < std::max(1, gen.tensor_cores); ++die) {
    for (int index : tc.indices) {
      std::optional<uint64_t> id = trace::ComponentCounterId(gen.name, "tc", die, index);
      if (id.has_value()) AddCounter(*id);
    }
  }
  if (gen.name == "v7x") {
    for (int die = 0; die < gen.tensor_cores; ++die) {
      AddCounter(kV7xPwrCycleCount + kV7xDieStride * die);
      AddCounter(kV7xPwrClocksSkipped + kV7xDieStride * die);
    }
  }
  AddRates();
  totals_.assign(counters_.size(), 0);
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

void KernelProfileWriter::AddCounter(uint64_t id) {
  const int64_t meta_id = kFirstCounterMeta + static_cast<int64_t>(counters_.size());
  counters_.push_back({id, meta_id});
  std::optional<absl::string_view> name = trace::PerfCounterName(model_.generation().name, id);
  const absl::string_view suffix = name.has_value() ? CounterSuffix(*name) : "";
  CounterInfo info{"", "TensorCore performance counter", "tc"};
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
  rates_.assign(ops.size() + 1, std::vector<double>(counters_.size(), 0));
  for (size_t s = 0; s < rates_.size(); ++s) {
    // An idle chip is a kernel with every unit idle: its clock and its "none busy" counters run.
    const UnitProfile units = s < ops.size() ? ops[s].units : UnitProfile{};
    for (size_t c = 0; c < counters_.size(); ++c) {
      std::optional<absl::string_view> name = trace::PerfCounterName(gen.name, counters_[c].id);
      if (!name.has_value()) continue;  // unknown counters count nothing
      const absl::string_view suffix = CounterSuffix(*name);
      double per_clock;
      if (absl::StrContains(*name, "_PWRMGR_")) {
        per_clock = suffix == "CYCLE_COUNT" ? 1 : suffix == "CLOCKS_SKIPPED" ? f : 0;
      } else {
        per_clock = (1 - f) * TcCounterShare(suffix, units, gen.xlu_cycles_per_instruction);
      }
      rates_[s][c] = per_clock * clocks_per_ps;
    }
  }
}

void KernelProfileWriter::AdvanceTo(int64_t true_ps) {
  if (true_ps <= totals_at_ps_) return;
  const double dt = static_cast<double>(true_ps - totals_at_ps_);
  for (size_t c = 0; c < totals_.size(); ++c) totals_[c] += (*rate_)[c] * dt;
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
  rate_ = &rates_[run.op];
  const OpTemplate& op = model_.ops()[run.op];
  const int64_t end_ps = start_ps + run.duration_ps;
  if (in_window && !op.collective) {
    if (tc_.external_trigger) {
      // The runtime triggers a sample as the kernel starts and as it ends.
      Sample(start_ps, op.name, out);
      if (time_.Inside(end_ps)) {
        AdvanceTo(end_ps);
        Sample(end_ps, op.name, out);
      }
    } else {
      // The timer runs from the session's start; only its ticks inside the kernel sample.
      const int64_t interval_ps = tc_.interval_us * 1'000'000;
      const int64_t since = start_ps - time_.true_start_ps;
      int64_t t = time_.true_start_ps + (since + interval_ps - 1) / interval_ps * interval_ps;
      for (; t < end_ps && t < time_.true_end_ps; t += interval_ps) {
        AdvanceTo(t);
        Sample(t, op.name, out);
      }
    }
  }
  AdvanceTo(end_ps);
  rate_ = &rates_.back();
}

void KernelProfileWriter::Sample(int64_t true_ps, const std::string& kernel, XSpaceStream& out) {
  using trace::xspace::XEventField;
  using trace::xspace::XLineField;
  using trace::xspace::XStatField;
  if (samples_ >= max_samples_) {
    if (dropped_++ == 0) first_dropped_ps_ = true_ps;
    return;
  }
  // The wire format of the XLine the generated classes would write (proto3: a zero id and an
  // empty name are left out; offset_ps is in a oneof, so it is written even when zero).
  line_.clear();
  if (samples_ != 0) AppendVarintField(&line_, XLineField::kId, static_cast<uint64_t>(samples_));
  ++samples_;
  if (!kernel.empty()) AppendBytesField(&line_, XLineField::kName, kernel);
  const int64_t at = time_.DeviceOffsetPs(true_ps);
  const int64_t ns = FloorDiv(at, 1000);
  if (ns != 0) AppendVarintField(&line_, XLineField::kTimestampNs, static_cast<uint64_t>(ns));
  const auto offset = static_cast<uint64_t>(at - ns * 1000);
  for (size_t c = 0; c < counters_.size(); ++c) {
    // The register holds whole counts; the sample is its low bits after the scaling shift.
    const uint64_t raw = static_cast<uint64_t>(std::max(0.0, totals_[c]));
    event_.clear();
    AppendVarintField(&event_, XEventField::kMetadataId,
                      static_cast<uint64_t>(counters_[c].metadata_id));
    AppendVarintField(&event_, XEventField::kOffsetPs, offset);
    stat_.clear();
    AppendVarintField(&stat_, XStatField::kMetadataId, static_cast<uint64_t>(counter_id_stat_));
    AppendVarintField(&stat_, XStatField::kUint64Value, counters_[c].id);
    AppendBytesField(&event_, XEventField::kStats, stat_);
    stat_.clear();
    AppendVarintField(&stat_, XStatField::kMetadataId, static_cast<uint64_t>(counter_value_stat_));
    AppendVarintField(&stat_, XStatField::kUint64Value, (raw >> tc_.scaling) & mask_);
    AppendBytesField(&event_, XEventField::kStats, stat_);
    AppendBytesField(&line_, XLineField::kEvents, event_);
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
    if (p.sync_wait) AddSpan(sync_flag_, "SyncWait", s, e);
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
