// Kernel-profiling options: how a capture's CaptureOptions become the workload profiler's
// ProfileOptions, spelled as XProf documents them (docs/kernel-profiling.md and
// docs/advanced_profiler_options.md in openxla/xprof). `--kernel-profiling` alone is XProf's
// standard kernel profiling ("profiles some standard TC counters every 1 us"):
//
//   tpu_enable_kernel_profiling                     bool   true
//
// With counters, sets, an interval, a trigger, scaling or a counter size it is periodic
// sampling, configured per component:
//
//   tpu_enable_periodic_counter_sampling            bool   true
//   tpu_<component>_perf_counter_sampling_options   string "interval_us:1 scaling:0
//                                                    counter_size_bits:1 indices:10 indices:11"
//                                                    (is_external_trigger:true in place of
//                                                    interval_us)
//   tpu_perf_counter_sets                           string "TC_COMPUTATION,TC_MEMORY"
//
// and in either case
//
//   tpu_perf_counters                               bool   true with perf_counters
//
// plus the client's own KEY=VALUE entries. The aggregator validates a request with
// ValidateCaptureOptions before it asks any host; the agent builds the workload's options with
// FillProfileOptions. Pure functions: thread-safe.
#ifndef PODPROF_KERNELPROF_OPTIONS_H_
#define PODPROF_KERNELPROF_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/podprof_types.pb.h"
#include "proto/profiler_options.pb.h"

namespace podprof::kernelprof {

// The components whose counters XProf samples, lower case, as in the option names.
const std::vector<std::string>& Components();

// The counter sets XProf documents for `tpu_perf_counter_sets` (upper case): TC_COMPUTATION
// and TC_MEMORY (tc), SC_ACTIVITY and SC_MEMORY (scs, sctc, sctd), HBM (cmn). They are sent by
// name; the workload adds the indices each stands for (XProf's docs do not list them).
const std::vector<std::string>& CounterSets();

// The components whose counters a set names (XProf's docs/kernel-profiling.md, "Using default
// counter sets"): {"tc"} for TC_COMPUTATION and TC_MEMORY, {"scs", "sctc", "sctd"} for
// SC_ACTIVITY and SC_MEMORY, {"cmn"} for HBM; empty for an unknown set.
std::vector<std::string> CounterSetComponents(absl::string_view set);

// The components whose `tpu_<component>_perf_counter_sampling_options` a capture sends, with
// their indices: each --counters entry, plus every component a counter set covers (without
// indices of its own, so that the capture's schedule and packing reach the set's counters).
// Empty for standard kernel profiling and without kernel_profiling. Sorted by component.
std::vector<v1::CaptureOptions::ComponentCounters> SampledComponents(
    const v1::CaptureOptions& options);

// The value of `tpu_perf_counter_sets`: the capture's counter sets in their order,
// comma-separated, or with neither sets nor counters "TC_COMPUTATION,TC_MEMORY" (what
// podprof's utilizations need); empty when the key is not sent (standard kernel profiling,
// counters without sets, no kernel_profiling).
std::string CounterSetsText(const v1::CaptureOptions& options);

// The advanced_configuration key of a component's sampling options,
// "tpu_<component>_perf_counter_sampling_options".
std::string SamplingOptionsKey(absl::string_view component);

// Checks the kernel-profiling and tracer fields of `options`. Errors are InvalidArgument and
// name what is wrong: an unknown component or counter set (with the known ones), a component
// given twice, a repeated or missing index, an interval under 1 us or not whole
// microseconds, an interval together with external_trigger, kernel-profiling fields without
// kernel_profiling, scaling or counter size out of range, a tracer level out of range, or a
// profiler option that is malformed, is an XLA flag, or repeats a key podprof builds.
absl::Status ValidateCaptureOptions(const v1::CaptureOptions& options);

// The value of one component's sampling options, e.g.
// "interval_us:1 scaling:0 counter_size_bits:1 indices:10 indices:11". Assumes `options`
// is valid.
std::string SamplingOptionsText(const v1::CaptureOptions& options,
                                const v1::CaptureOptions::ComponentCounters& counters);

// Validates `options`, then sets `profile`'s device and python tracer levels (device 1 when
// unset) and adds the advanced_configuration entries listed at the top of this file. Adds
// no entry when kernel_profiling, perf_counters and profiler_options are all unset. On error
// `profile` is unchanged.
absl::Status FillProfileOptions(const v1::CaptureOptions& options,
                                tensorflow::ProfileOptions* profile);

// Parses one `--counters` value, "COMPONENT:INDEX,INDEX,...", e.g. "tc:10,11,56", and
// appends it to `options`. The component is lower-cased; whether it is known is left to
// ValidateCaptureOptions. Errors (InvalidArgument, naming the text): no ':', an empty
// component or index list, an index that is not a non-negative 32-bit decimal.
absl::Status ParseCountersFlag(absl::string_view text, v1::CaptureOptions* options);

// Parses one `--profiler-option` value, "KEY=VALUE", into options->profiler_options. Errors
// (InvalidArgument, naming the text): no '=', an empty key, a key given twice.
absl::Status ParseProfilerOptionFlag(absl::string_view text, v1::CaptureOptions* options);

// The value an option's text stands for, as FillProfileOptions sends it: "true"/"false" a
// bool, a decimal integer that fits in int64 an int64, anything else the text itself.
tensorflow::ProfileOptions::AdvancedConfigValue ConfigValueOf(absl::string_view text);

// The kernel-profiling options for people, e.g.
// "kernel profiling: tc[10,11,56] every 1 us; sets TC_COMPUTATION; python tracer 1"; empty
// when none of the fields this file handles is set.
std::string DescribeOptions(const v1::CaptureOptions& options);

}  // namespace podprof::kernelprof

#endif  // PODPROF_KERNELPROF_OPTIONS_H_
