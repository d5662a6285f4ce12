#include "kernelprof/options.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "trace/perf_counters.h"

namespace podprof::kernelprof {
namespace {

using ComponentCounters = v1::CaptureOptions::ComponentCounters;

constexpr char kEnableSamplingKey[] = "tpu_enable_periodic_counter_sampling";
constexpr char kKernelProfilingKey[] = "tpu_enable_kernel_profiling";
constexpr char kCounterSetsKey[] = "tpu_perf_counter_sets";
constexpr char kPerfCountersKey[] = "tpu_perf_counters";
// Unshifted 64-bit values unless asked otherwise (XProf's default width): narrower values save
// trace space but wrap, and a counter that wraps more than once between two samples (across an
// idle gap, when sampling only runs inside kernels) cannot be unwrapped.
constexpr uint32_t kDefaultScaling = 0;
constexpr uint32_t kDefaultCounterSizeBits = 3;
// A right shift of a 64-bit counter by 64 or more leaves nothing.
constexpr uint32_t kMaxScaling = 63;
// counter_size_bits n means 2^(n+3)-bit values: 8, 16, 32 or 64.
constexpr uint32_t kMaxCounterSizeBits = 3;
constexpr int64_t kMinIntervalNs = 1000;

bool Contains(const std::vector<std::string>& names, absl::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool IsKeyChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// A decimal integer as XProf's int64 values are written: an optional '-' and digits only.
bool IsDecimal(absl::string_view text) {
  if (absl::StartsWith(text, "-")) text.remove_prefix(1);
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
}

// The kernel-profiling fields that mean nothing without kernel_profiling, by the flag that
// sets them; empty when none is set.
std::string KernelOnlyFieldSet(const v1::CaptureOptions& o) {
  if (!o.counters().empty()) return "--counters";
  if (!o.counter_sets().empty()) return "--counter-sets";
  if (o.counter_interval_ns() != 0) return "--counter-interval";
  if (o.external_trigger()) return "--external-trigger";
  if (o.has_counter_scaling()) return "--counter-scaling";
  if (o.has_counter_size_bits()) return "--counter-size-bits";
  return "";
}

// True when `o` asks for kernel profiling and nothing more: XProf's standard kernel profiling
// (`tpu_enable_kernel_profiling`), the runtime's own counters and schedule.
bool StandardKernelProfiling(const v1::CaptureOptions& o) {
  return o.kernel_profiling() && KernelOnlyFieldSet(o).empty();
}

// The sets `o` sends in `tpu_perf_counter_sets`: its own, or with neither sets nor counters
// (only a schedule or packing) TC_COMPUTATION and TC_MEMORY, what podprof's utilizations need.
std::vector<std::string> SentSets(const v1::CaptureOptions& o) {
  if (o.counter_sets().empty() && o.counters().empty()) return {"TC_COMPUTATION", "TC_MEMORY"};
  return {o.counter_sets().begin(), o.counter_sets().end()};
}

absl::Status ValidateCounters(const v1::CaptureOptions& o) {
  std::set<std::string> seen;
  for (const ComponentCounters& c : o.counters()) {
    if (!Contains(Components(), c.component())) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown counter component \"", c.component(),
                       "\" (known: ", absl::StrJoin(Components(), ", "), ")"));
    }
    if (!seen.insert(c.component()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("counter component \"", c.component(), "\" is given twice"));
    }
    if (c.indices().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("counter component \"", c.component(), "\" has no counter indices"));
    }
    std::set<uint32_t> indices;
    for (uint32_t i : c.indices()) {
      if (!indices.insert(i).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("counter index ", i, " is given twice for \"", c.component(), "\""));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSampling(const v1::CaptureOptions& o) {
  std::set<std::string> sets;
  for (const std::string& s : o.counter_sets()) {
    if (!Contains(CounterSets(), s)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown counter set \"", s, "\" (known: ", absl::StrJoin(CounterSets(), ", "), ")"));
    }
    if (!sets.insert(s).second) {
      return absl::InvalidArgumentError(absl::StrCat("counter set \"", s, "\" is given twice"));
    }
  }
  const int64_t interval_ns = static_cast<int64_t>(o.counter_interval_ns());
  if (o.counter_interval_ns() != 0) {
    if (o.external_trigger()) {
      return absl::InvalidArgumentError(
          "a counter interval and an external trigger exclude each other: externally triggered "
          "sampling has no interval");
    }
    if (interval_ns < kMinIntervalNs) {
      return absl::InvalidArgumentError(absl::StrCat("counter interval ",
                                                     FormatDurationPs(interval_ns * 1000),
                                                     " is below the minimum of 1 us"));
    }
    if (interval_ns % 1000 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("counter interval ",
                                                     FormatDurationPs(interval_ns * 1000),
                                                     " is not a whole number of microseconds"));
    }
  }
  if (o.has_counter_scaling() && o.counter_scaling() > kMaxScaling) {
    return absl::InvalidArgumentError(absl::StrCat("counter scaling ", o.counter_scaling(),
                                                   " is out of range (0-", kMaxScaling, ")"));
  }
  if (o.has_counter_size_bits() && o.counter_size_bits() > kMaxCounterSizeBits) {
    return absl::InvalidArgumentError(absl::StrCat("counter size bits ", o.counter_size_bits(),
                                                   " is out of range (0-", kMaxCounterSizeBits,
                                                   ": 8, 16, 32 or 64-bit values)"));
  }
  return ValidateCounters(o);
}

// The keys podprof itself puts in advanced_configuration for `o`.
std::set<std::string> BuiltKeys(const v1::CaptureOptions& o) {
  std::set<std::string> keys;
  if (StandardKernelProfiling(o)) {
    keys.insert(kKernelProfilingKey);
  } else if (o.kernel_profiling()) {
    keys.insert(kEnableSamplingKey);
    if (!CounterSetsText(o).empty()) keys.insert(kCounterSetsKey);
    for (const ComponentCounters& c : SampledComponents(o)) {
      keys.insert(SamplingOptionsKey(c.component()));
    }
  }
  if (o.perf_counters()) keys.insert(kPerfCountersKey);
  return keys;
}

absl::Status ValidateProfilerOptions(const v1::CaptureOptions& o) {
  const std::set<std::string> built = BuiltKeys(o);
  for (const auto& [key, value] : o.profiler_options()) {
    if (key.empty()) return absl::InvalidArgumentError("a profiler option has an empty key");
    if (absl::StartsWith(key, "xla_") || absl::StartsWith(key, "-")) {
      // Custom-call tracing (xla_xprof_enable_custom_call_tracing and the like) is compiled
      // into the program: the workload must start with it, a profiling session cannot ask.
      return absl::InvalidArgumentError(
          absl::StrCat("profiler option \"", key,
                       "\" is an XLA flag, not a profiler option: set it in the workload's "
                       "LIBTPU_INIT_ARGS (e.g. --xla_xprof_enable_custom_call_tracing=true) "
                       "before it starts"));
    }
    if (!std::all_of(key.begin(), key.end(), IsKeyChar)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "profiler option key \"", key, "\" is malformed: use letters, digits and '_'"));
    }
    if (built.count(key) > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "profiler option \"", key, "\" repeats an option podprof sets from its own flags"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& Components() {
  static const auto* const kComponents = new std::vector<std::string>(
      std::begin(trace::kPerfComponents), std::end(trace::kPerfComponents));
  return *kComponents;
}

std::vector<std::string> CounterSetComponents(absl::string_view set) {
  if (set == "TC_COMPUTATION" || set == "TC_MEMORY") return {"tc"};
  if (set == "SC_ACTIVITY" || set == "SC_MEMORY") return {"scs", "sctc", "sctd"};
  if (set == "HBM") return {"cmn"};
  return {};
}

const std::vector<std::string>& CounterSets() {
  static const auto* const kSets = new std::vector<std::string>{"TC_COMPUTATION", "TC_MEMORY",
                                                                "SC_ACTIVITY", "SC_MEMORY", "HBM"};
  return *kSets;
}

std::vector<ComponentCounters> SampledComponents(const v1::CaptureOptions& options) {
  std::map<std::string, std::vector<uint32_t>> by_component;
  if (!options.kernel_profiling() || StandardKernelProfiling(options)) return {};
  for (const ComponentCounters& c : options.counters()) {
    by_component[c.component()].assign(c.indices().begin(), c.indices().end());
  }
  // A set's component without counters of its own still gets its options, so that the
  // capture's schedule and packing apply to the set's counters too.
  for (const std::string& set : SentSets(options)) {
    for (const std::string& component : CounterSetComponents(set)) by_component[component];
  }
  std::vector<ComponentCounters> out;
  for (const auto& [component, indices] : by_component) {
    ComponentCounters c;
    c.set_component(component);
    for (uint32_t i : indices) c.add_indices(i);
    out.push_back(std::move(c));
  }
  return out;
}

std::string CounterSetsText(const v1::CaptureOptions& options) {
  if (!options.kernel_profiling() || StandardKernelProfiling(options)) return "";
  return absl::StrJoin(SentSets(options), ",");
}

std::string SamplingOptionsKey(absl::string_view component) {
  return absl::StrCat("tpu_", component, "_perf_counter_sampling_options");
}

absl::Status ValidateCaptureOptions(const v1::CaptureOptions& options) {
  if (options.has_device_tracer_level() && options.device_tracer_level() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device tracer level ", options.device_tracer_level(), " is out of range (0 off, 1 on)"));
  }
  if (options.python_tracer_level() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "python tracer level ", options.python_tracer_level(), " is out of range (0 off, 1 on)"));
  }
  if (!options.kernel_profiling()) {
    if (std::string flag = KernelOnlyFieldSet(options); !flag.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " needs --kernel-profiling"));
    }
  }
  if (absl::Status s = ValidateSampling(options); !s.ok()) return s;
  return ValidateProfilerOptions(options);
}

std::string SamplingOptionsText(const v1::CaptureOptions& options,
                                const ComponentCounters& counters) {
  trace::SamplingOptions o;
  o.external_trigger = options.external_trigger();
  // No interval leaves the workload's default.
  o.interval_us = static_cast<int64_t>(options.counter_interval_ns() / 1000);
  o.scaling =
      static_cast<int>(options.has_counter_scaling() ? options.counter_scaling() : kDefaultScaling);
  o.counter_size_bits = static_cast<int>(
      options.has_counter_size_bits() ? options.counter_size_bits() : kDefaultCounterSizeBits);
  o.indices.assign(counters.indices().begin(), counters.indices().end());
  return trace::FormatSamplingOptions(o);
}

absl::Status FillProfileOptions(const v1::CaptureOptions& options,
                                tensorflow::ProfileOptions* profile) {
  if (absl::Status s = ValidateCaptureOptions(options); !s.ok()) return s;
  profile->set_device_tracer_level(options.has_device_tracer_level() ? options.device_tracer_level()
                                                                     : 1);
  profile->set_python_tracer_level(options.python_tracer_level());
  auto& config = *profile->mutable_advanced_configuration();
  if (StandardKernelProfiling(options)) {
    config[kKernelProfilingKey].set_bool_value(true);
  } else if (options.kernel_profiling()) {
    config[kEnableSamplingKey].set_bool_value(true);
    if (std::string sets = CounterSetsText(options); !sets.empty()) {
      config[kCounterSetsKey].set_string_value(sets);
    }
    for (const ComponentCounters& c : SampledComponents(options)) {
      config[SamplingOptionsKey(c.component())].set_string_value(SamplingOptionsText(options, c));
    }
  }
  if (options.perf_counters()) config[kPerfCountersKey].set_bool_value(true);
  for (const auto& [key, value] : options.profiler_options()) config[key] = ConfigValueOf(value);
  return absl::OkStatus();
}

absl::Status ParseCountersFlag(absl::string_view text, v1::CaptureOptions* options) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bad --counters \"", text, "\": ", why,
                                                   " (use COMPONENT:INDEX,..., e.g. tc:10,11,56)"));
  };
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos) return bad("no ':'");
  const std::string component = absl::AsciiStrToLower(text.substr(0, colon));
  if (component.empty()) return bad("no component");
  const absl::string_view list = text.substr(colon + 1);
  if (list.empty()) return bad("no counter indices");
  ComponentCounters counters;
  counters.set_component(component);
  for (absl::string_view piece : absl::StrSplit(list, ',')) {
    uint32_t index = 0;
    if (!IsDecimal(piece) || absl::StartsWith(piece, "-") || !absl::SimpleAtoi(piece, &index)) {
      return bad(absl::StrCat("index \"", piece, "\" is not a non-negative integer"));
    }
    counters.add_indices(index);
  }
  *options->add_counters() = std::move(counters);
  return absl::OkStatus();
}

absl::Status ParseProfilerOptionFlag(absl::string_view text, v1::CaptureOptions* options) {
  const size_t eq = text.find('=');
  if (eq == absl::string_view::npos || eq == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad --profiler-option \"", text, "\": use KEY=VALUE"));
  }
  const std::string key(text.substr(0, eq));
  auto [it, inserted] =
      options->mutable_profiler_options()->insert({key, std::string(text.substr(eq + 1))});
  if (!inserted) {
    return absl::InvalidArgumentError(absl::StrCat("profiler option \"", key, "\" is given twice"));
  }
  return absl::OkStatus();
}

tensorflow::ProfileOptions::AdvancedConfigValue ConfigValueOf(absl::string_view text) {
  tensorflow::ProfileOptions::AdvancedConfigValue v;
  int64_t n = 0;
  if (text == "true" || text == "false") {
    v.set_bool_value(text == "true");
  } else if (IsDecimal(text) && absl::SimpleAtoi(text, &n)) {
    v.set_int64_value(n);
  } else {
    v.set_string_value(std::string(text));
  }
  return v;
}

std::string DescribeOptions(const v1::CaptureOptions& options) {
  std::vector<std::string> parts;
  if (options.kernel_profiling()) {
    std::string k = "kernel profiling";
    std::vector<std::string> comps;
    for (const ComponentCounters& c : options.counters()) {
      comps.push_back(absl::StrCat(c.component(), "[", absl::StrJoin(c.indices(), ","), "]"));
    }
    if (!comps.empty()) absl::StrAppend(&k, ": ", absl::StrJoin(comps, " "));
    if (options.external_trigger()) {
      absl::StrAppend(&k, " on external trigger");
    } else if (options.counter_interval_ns() > 0) {
      absl::StrAppend(&k, " every ", options.counter_interval_ns() / 1000, " us");
    }
    parts.push_back(k);
    if (!options.counter_sets().empty()) {
      parts.push_back(absl::StrCat("sets ", absl::StrJoin(options.counter_sets(), ",")));
    }
    if (options.has_counter_scaling()) {
      parts.push_back(absl::StrCat("scaling ", options.counter_scaling()));
    }
    if (options.has_counter_size_bits()) {
      parts.push_back(absl::StrCat("counter size bits ", options.counter_size_bits()));
    }
  }
  if (options.perf_counters()) parts.push_back("perf counters");
  if (options.has_device_tracer_level()) {
    parts.push_back(absl::StrCat("device tracer ", options.device_tracer_level()));
  }
  if (options.python_tracer_level() > 0) {
    parts.push_back(absl::StrCat("python tracer ", options.python_tracer_level()));
  }
  // Sorted, so that the text is stable whatever order the map iterates in.
  std::map<std::string, std::string> extra(options.profiler_options().begin(),
                                           options.profiler_options().end());
  for (const auto& [key, value] : extra) parts.push_back(absl::StrCat(key, "=", value));
  return absl::StrJoin(parts, "; ");
}

}  // namespace podprof::kernelprof
