// What a capture asks of the simulated runtime's kernel profiling: ProfileOptions'
// advanced_configuration read and checked into a KernelProfilingRequest (kernel_profiling.h).
// What a chip then writes is kernel_profiling.cc's.
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "sim/kernel_profiling.h"

namespace podprof::sim {
namespace {

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

// The counter sets of `tpu_perf_counter_sets`: a comma-separated list of kCounterSets, in the
// order given, each once.
absl::StatusOr<std::vector<std::string>> CounterSets(const tensorflow::ProfileOptions& options) {
  std::vector<std::string> out;
  auto it = options.advanced_configuration().find(kCounterSetsKey);
  if (it == options.advanced_configuration().end()) return out;
  if (it->second.value_case() != tensorflow::ProfileOptions::AdvancedConfigValue::kStringValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("advanced_configuration[\"", kCounterSetsKey, "\"] must be a string"));
  }
  for (absl::string_view piece : absl::StrSplit(it->second.string_value(), ',')) {
    const absl::string_view set = absl::StripAsciiWhitespace(piece);
    if (set.empty()) continue;
    if (std::find(std::begin(kCounterSets), std::end(kCounterSets), set) ==
        std::end(kCounterSets)) {
      return absl::InvalidArgumentError(
          absl::StrCat("advanced_configuration[\"", kCounterSetsKey, "\"]: unknown counter set \"",
                       set, "\" (known: ", absl::StrJoin(kCounterSets, ", "), ")"));
    }
    if (std::find(out.begin(), out.end(), set) == out.end()) out.emplace_back(set);
  }
  return out;
}

// A TensorCore counter of a set, by its name after `_COUNT_`: that name, or every name with
// that prefix.
struct SetMember {
  absl::string_view name;
  bool prefix;
};
constexpr SetMember kTcComputation[] = {{"CYCLES", false},
                                        {"SCALAR_ALU_INSTRUCTION_", true},
                                        {"VECTOR_ALU_INSTRUCTION_", true},
                                        {"VPU_VALU_", true},
                                        {"MXU_BUSY_", true},
                                        {"MATMUL_VREG_", true},
                                        {"MATMUL_LMR_", true},
                                        {"MATPUSH_CYCLES_MXU_", true},
                                        {"XLU_BUSY_", true},
                                        {"PACKED_XLU_", true},
                                        {"ROTATE_PERMUTE_", true},
                                        {"TRANSPOSE_XLU_", true}};
constexpr SetMember kTcMemory[] = {
    {"CYCLES", false}, {"VST_INSTRUCTION", false}, {"VLD_INSTRUCTION_", true}};

// The indices of the TensorCore counters `members` name in `generation`'s table, sorted.
std::vector<int> TcIndices(absl::string_view generation, absl::Span<const SetMember> members) {
  std::vector<int> out;
  const std::optional<uint64_t> first = trace::ComponentCounterId(generation, "tc", 0, 0);
  if (!first) return out;
  const std::optional<absl::string_view> first_name = trace::PerfCounterName(generation, *first);
  const size_t at = first_name ? first_name->find("_COUNT_") : absl::string_view::npos;
  if (at == absl::string_view::npos) return out;
  const absl::string_view block = first_name->substr(0, at + 7);
  for (const trace::PerfCounterId& c : trace::PerfCounterTable(generation)) {
    absl::string_view name = c.name;
    if (!absl::ConsumePrefix(&name, block)) continue;
    for (const SetMember& m : members) {
      if (m.prefix ? absl::StartsWith(name, m.name) : name == m.name) {
        out.push_back(static_cast<int>((c.id - *first) / 8));
        break;
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::vector<int>>> CounterSetIndices(
    absl::string_view generation, absl::string_view set) {
  if (set == "TC_COMPUTATION") return {{"tc", TcIndices(generation, kTcComputation)}};
  if (set == "TC_MEMORY") return {{"tc", TcIndices(generation, kTcMemory)}};
  if (set == "HBM") return {{"cmn", {0, 1, 2}}};
  return {};
}

trace::SamplingOptions DefaultTcSampling() {
  std::set<int> indices;
  for (absl::string_view set : {"TC_COMPUTATION", "TC_MEMORY"}) {
    for (const auto& [component, i] : CounterSetIndices("v7x", set)) {
      indices.insert(i.begin(), i.end());
    }
  }
  trace::SamplingOptions o;
  o.indices.assign(indices.begin(), indices.end());
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
  // Every option is checked, asked for or not: a malformed value is a mistake the user wants
  // to hear about before the capture, not after.
  absl::StatusOr<std::vector<std::string>> sets = CounterSets(options);
  if (!sets.ok()) return sets.status();
  std::optional<trace::SamplingOptions> tc, cmn;
  for (absl::string_view component : trace::kPerfComponents) {
    absl::StatusOr<std::optional<trace::SamplingOptions>> s = Sampling(options, component);
    if (!s.ok()) return s.status();
    if (!s->has_value()) continue;
    if (component == "tc") {
      tc = **s;
    } else if (component == "cmn") {
      cmn = **s;
    } else if (r.requested) {
      r.ignored_components.emplace_back(component);
    }
  }
  if (!r.requested) return r;
  r.per_kernel = *kernel && !tc && !cmn;
  r.tc = tc ? *tc : cmn ? *cmn : trace::SamplingOptions();
  std::set<int> tc_indices, cmn_indices;
  if (tc) tc_indices.insert(tc->indices.begin(), tc->indices.end());
  if (cmn) cmn_indices.insert(cmn->indices.begin(), cmn->indices.end());
  if (r.per_kernel) {
    const std::vector<int> standard = DefaultTcSampling().indices;
    tc_indices.insert(standard.begin(), standard.end());
  }
  // Kernel profiling is a TPU7x feature: the sets' indices are v7x's.
  for (const std::string& set : *sets) {
    if (absl::StartsWith(set, "SC_")) r.ignored_sets.push_back(set);
    if (set == "HBM") r.hbm_controllers = true;
    for (const auto& [component, indices] : CounterSetIndices("v7x", set)) {
      (component == "tc" ? tc_indices : cmn_indices).insert(indices.begin(), indices.end());
    }
  }
  r.tc.indices.assign(tc_indices.begin(), tc_indices.end());
  r.cmn.assign(cmn_indices.begin(), cmn_indices.end());
  return r;
}

}  // namespace podprof::sim
