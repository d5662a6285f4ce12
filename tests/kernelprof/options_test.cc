// Validation of kernel-profiling options and their mapping onto ProfileOptions, with every key
// and value spelled as XProf documents it (docs/kernel-profiling.md,
// docs/advanced_profiler_options.md).
#include "kernelprof/options.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/util/status_matchers.h"

namespace podprof::kernelprof {
namespace {

using Value = tensorflow::ProfileOptions::AdvancedConfigValue;

v1::CaptureOptions KernelOptions() {
  v1::CaptureOptions o;
  o.set_kernel_profiling(true);
  EXPECT_OK(ParseCountersFlag("tc:10,11,56", &o));
  o.set_counter_interval_ns(1000);
  return o;
}

// The advanced_configuration as a sorted map of printable values, for exact comparison.
std::map<std::string, std::string> Config(const tensorflow::ProfileOptions& p) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : p.advanced_configuration()) {
    switch (v.value_case()) {
      case Value::kBoolValue:
        out[k] = v.bool_value() ? "bool:true" : "bool:false";
        break;
      case Value::kInt64Value:
        out[k] = "int:" + std::to_string(v.int64_value());
        break;
      case Value::kStringValue:
        out[k] = "string:" + v.string_value();
        break;
      default:
        out[k] = "unset";
    }
  }
  return out;
}

void ExpectInvalid(const v1::CaptureOptions& o, const std::string& needle) {
  absl::Status s = ValidateCaptureOptions(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), needle)) << s.message() << " lacks " << needle;
}

TEST(KernelProfilingOptionsTest, EveryDocumentedComponentNamesItsSamplingOption) {
  EXPECT_EQ(Components(), (std::vector<std::string>{"tc", "scs", "sctc", "sctd", "cmn", "icr"}));
  EXPECT_EQ(SamplingOptionsKey("tc"), "tpu_tc_perf_counter_sampling_options");
  EXPECT_EQ(SamplingOptionsKey("scs"), "tpu_scs_perf_counter_sampling_options");
  EXPECT_EQ(SamplingOptionsKey("sctc"), "tpu_sctc_perf_counter_sampling_options");
  EXPECT_EQ(SamplingOptionsKey("sctd"), "tpu_sctd_perf_counter_sampling_options");
  EXPECT_EQ(SamplingOptionsKey("cmn"), "tpu_cmn_perf_counter_sampling_options");
  EXPECT_EQ(SamplingOptionsKey("icr"), "tpu_icr_perf_counter_sampling_options");
}

TEST(KernelProfilingOptionsTest, PeriodicSamplingIsSpelledAsXprofDocumentsIt) {
  v1::CaptureOptions o = KernelOptions();
  ASSERT_OK(ParseCountersFlag("SCS:0,3", &o));  // components are case-insensitive
  o.add_counter_sets("TC_COMPUTATION");
  o.add_counter_sets("HBM");
  tensorflow::ProfileOptions p;
  ASSERT_OK(FillProfileOptions(o, &p));
  // The sets go by name, as documented; the workload adds their indices. HBM's component
  // (cmn) gets the capture's schedule with no indices of its own.
  EXPECT_EQ(Config(p),
            (std::map<std::string, std::string>{
                {"tpu_enable_periodic_counter_sampling", "bool:true"},
                {"tpu_perf_counter_sets", "string:TC_COMPUTATION,HBM"},
                {"tpu_tc_perf_counter_sampling_options",
                 "string:interval_us:1 scaling:0 counter_size_bits:3 indices:10 indices:11 "
                 "indices:56"},
                {"tpu_scs_perf_counter_sampling_options",
                 "string:interval_us:1 scaling:0 counter_size_bits:3 indices:0 indices:3"},
                {"tpu_cmn_perf_counter_sampling_options",
                 "string:interval_us:1 scaling:0 counter_size_bits:3"}}));
  EXPECT_EQ(p.device_tracer_level(), 1u);
  EXPECT_EQ(p.python_tracer_level(), 0u);
}

// Every set XProf documents is sent, each covering its documented components.
TEST(KernelProfilingOptionsTest, EveryDocumentedSetIsSentWithItsComponents) {
  EXPECT_EQ(CounterSets(), (std::vector<std::string>{"TC_COMPUTATION", "TC_MEMORY", "SC_ACTIVITY",
                                                     "SC_MEMORY", "HBM"}));
  v1::CaptureOptions o;
  o.set_kernel_profiling(true);
  for (const std::string& set : CounterSets()) o.add_counter_sets(set);
  ASSERT_OK(ValidateCaptureOptions(o));
  EXPECT_EQ(CounterSetsText(o), "TC_COMPUTATION,TC_MEMORY,SC_ACTIVITY,SC_MEMORY,HBM");
  std::vector<std::string> components;
  for (const auto& c : SampledComponents(o)) {
    components.push_back(c.component());
    EXPECT_TRUE(c.indices().empty()) << c.component();
  }
  EXPECT_EQ(components, (std::vector<std::string>{"cmn", "scs", "sctc", "sctd", "tc"}));
  tensorflow::ProfileOptions p;
  ASSERT_OK(FillProfileOptions(o, &p));
  EXPECT_EQ(Config(p)["tpu_sctd_perf_counter_sampling_options"],
            "string:scaling:0 counter_size_bits:3");
  // Counters without sets send no set.
  v1::CaptureOptions counters = KernelOptions();
  EXPECT_EQ(CounterSetsText(counters), "");
  tensorflow::ProfileOptions q;
  ASSERT_OK(FillProfileOptions(counters, &q));
  EXPECT_EQ(Config(q).count("tpu_perf_counter_sets"), 0u);
}

TEST(KernelProfilingOptionsTest, ExternalTriggerReplacesTheInterval) {
  v1::CaptureOptions o = KernelOptions();
  o.clear_counter_interval_ns();
  o.set_external_trigger(true);
  o.set_counter_scaling(2);
  o.set_counter_size_bits(3);
  tensorflow::ProfileOptions p;
  ASSERT_OK(FillProfileOptions(o, &p));
  EXPECT_EQ(Config(p)["tpu_tc_perf_counter_sampling_options"],
            "string:is_external_trigger:true scaling:2 counter_size_bits:3 indices:10 indices:11 "
            "indices:56");
}

TEST(KernelProfilingOptionsTest, NoIntervalLeavesTheWorkloadsDefault) {
  v1::CaptureOptions o = KernelOptions();
  o.clear_counter_interval_ns();
  tensorflow::ProfileOptions p;
  ASSERT_OK(FillProfileOptions(o, &p));
  EXPECT_EQ(Config(p)["tpu_tc_perf_counter_sampling_options"],
            "string:scaling:0 counter_size_bits:3 indices:10 indices:11 indices:56");
}

// --kernel-profiling alone is XProf's standard kernel profiling: one switch, the runtime's
// own counters and schedule.
TEST(KernelProfilingOptionsTest, KernelProfilingAloneIsXprofsStandardKernelProfiling) {
  v1::CaptureOptions o;
  o.set_kernel_profiling(true);
  tensorflow::ProfileOptions p;
  ASSERT_OK(FillProfileOptions(o, &p));
  EXPECT_EQ(Config(p),
            (std::map<std::string, std::string>{{"tpu_enable_kernel_profiling", "bool:true"}}));
  EXPECT_TRUE(SampledComponents(o).empty());
  // Its switch is podprof's to set.
  ASSERT_OK(ParseProfilerOptionFlag("tpu_enable_kernel_profiling=true", &o));
  ExpectInvalid(o, "repeats an option podprof sets");
}

// A schedule without counters or sets samples what the utilizations need: TC_COMPUTATION and
// TC_MEMORY, on that schedule.
TEST(KernelProfilingOptionsTest, AnIntervalAloneAsksForTheUtilizationSets) {
  v1::CaptureOptions o;
  o.set_kernel_profiling(true);
  o.set_counter_interval_ns(10'000);
  tensorflow::ProfileOptions p;
  ASSERT_OK(FillProfileOptions(o, &p));
  EXPECT_EQ(Config(p), (std::map<std::string, std::string>{
                           {"tpu_enable_periodic_counter_sampling", "bool:true"},
                           {"tpu_perf_counter_sets", "string:TC_COMPUTATION,TC_MEMORY"},
                           {"tpu_tc_perf_counter_sampling_options",
                            "string:interval_us:10 scaling:0 counter_size_bits:3"}}));
  // HBM is a documented set (on CMN): accepted.
  o.add_counter_sets("HBM");
  EXPECT_OK(ValidateCaptureOptions(o));
  EXPECT_EQ(CounterSetsText(o), "HBM");
}

TEST(KernelProfilingOptionsTest, NoOptionsAddNoKeys) {
  tensorflow::ProfileOptions p;
  ASSERT_OK(FillProfileOptions(v1::CaptureOptions(), &p));
  EXPECT_TRUE(p.advanced_configuration().empty());
  EXPECT_EQ(p.device_tracer_level(), 1u);
  EXPECT_EQ(p.python_tracer_level(), 0u);
  EXPECT_EQ(DescribeOptions(v1::CaptureOptions()), "");
}

TEST(KernelProfilingOptionsTest, TracerLevelsAndPerfCountersAreSent) {
  v1::CaptureOptions o;
  o.set_device_tracer_level(0);
  o.set_python_tracer_level(1);
  o.set_perf_counters(true);
  tensorflow::ProfileOptions p;
  ASSERT_OK(FillProfileOptions(o, &p));
  EXPECT_EQ(p.device_tracer_level(), 0u);
  EXPECT_EQ(p.python_tracer_level(), 1u);
  EXPECT_EQ(Config(p), (std::map<std::string, std::string>{{"tpu_perf_counters", "bool:true"}}));
}

TEST(KernelProfilingOptionsTest, ProfilerOptionsPassThroughWithTypesFromTheirText) {
  v1::CaptureOptions o;
  for (const char* kv : {"tpu_power_trace_level=1", "tpu_sc_dma=true", "tpu_circular=false",
                         "tpu_cpu_perf_counter_profile_events=context-switches,page-faults",
                         "tpu_tracemark_lower=-5", "tpu_trace_mode=TRACE_ALL", "empty="}) {
    ASSERT_OK(ParseProfilerOptionFlag(kv, &o)) << kv;
  }
  tensorflow::ProfileOptions p;
  ASSERT_OK(FillProfileOptions(o, &p));
  EXPECT_EQ(Config(p), (std::map<std::string, std::string>{{"tpu_power_trace_level", "int:1"},
                                                           {"tpu_sc_dma", "bool:true"},
                                                           {"tpu_circular", "bool:false"},
                                                           {"tpu_cpu_perf_counter_profile_events",
                                                            "string:context-switches,page-faults"},
                                                           {"tpu_tracemark_lower", "int:-5"},
                                                           {"tpu_trace_mode", "string:TRACE_ALL"},
                                                           {"empty", "string:"}}));
  // Too big for int64, or not quite a number: text.
  EXPECT_EQ(ConfigValueOf("99999999999999999999").string_value(), "99999999999999999999");
  EXPECT_EQ(ConfigValueOf("0x10").string_value(), "0x10");
  EXPECT_EQ(ConfigValueOf("True").string_value(), "True");
}

TEST(KernelProfilingOptionsTest, UnknownComponentIsNamedWithTheKnownOnes) {
  v1::CaptureOptions o = KernelOptions();
  ASSERT_OK(ParseCountersFlag("hbm:1", &o));  // syntax fine, component unknown
  ExpectInvalid(o, "unknown counter component \"hbm\" (known: tc, scs, sctc, sctd, cmn, icr)");
}

TEST(KernelProfilingOptionsTest, UnknownCounterSetIsNamed) {
  v1::CaptureOptions o = KernelOptions();
  o.add_counter_sets("BOGUS");
  ExpectInvalid(o, "unknown counter set \"BOGUS\"");
  o.clear_counter_sets();
  o.add_counter_sets("TC_MEMORY");
  o.add_counter_sets("TC_MEMORY");
  ExpectInvalid(o, "counter set \"TC_MEMORY\" is given twice");
}

TEST(KernelProfilingOptionsTest, IntervalBelowOneMicrosecondOrNotWholeIsRefused) {
  v1::CaptureOptions o = KernelOptions();
  o.set_counter_interval_ns(500);
  ExpectInvalid(o, "counter interval 500 ns is below the minimum of 1 us");
  o.set_counter_interval_ns(1500);
  ExpectInvalid(o, "not a whole number of microseconds");
  o.set_counter_interval_ns(1000);
  o.set_external_trigger(true);
  ExpectInvalid(o, "exclude each other");
}

TEST(KernelProfilingOptionsTest, KernelFieldsNeedKernelProfiling) {
  v1::CaptureOptions o = KernelOptions();
  o.set_kernel_profiling(false);
  ExpectInvalid(o, "--counters needs --kernel-profiling");
  v1::CaptureOptions sets;
  sets.add_counter_sets("HBM");
  ExpectInvalid(sets, "--counter-sets needs --kernel-profiling");
}

TEST(KernelProfilingOptionsTest, RangesAndRepeatsAreRefused) {
  v1::CaptureOptions o = KernelOptions();
  o.set_counter_size_bits(4);
  ExpectInvalid(o, "counter size bits 4 is out of range");
  o = KernelOptions();
  o.set_counter_scaling(64);
  ExpectInvalid(o, "counter scaling 64 is out of range");
  o = KernelOptions();
  ASSERT_OK(ParseCountersFlag("tc:1", &o));
  ExpectInvalid(o, "counter component \"tc\" is given twice");
  o = KernelOptions();
  ASSERT_OK(ParseCountersFlag("cmn:4,4", &o));
  ExpectInvalid(o, "counter index 4 is given twice for \"cmn\"");
  o = v1::CaptureOptions();
  o.set_python_tracer_level(2);
  ExpectInvalid(o, "python tracer level 2");
  o = v1::CaptureOptions();
  o.set_device_tracer_level(5);
  ExpectInvalid(o, "device tracer level 5");
}

TEST(KernelProfilingOptionsTest, MalformedProfilerOptionsAreRefused) {
  v1::CaptureOptions o;
  for (const char* bad : {"no_equals", "=value"}) {
    absl::Status s = ParseProfilerOptionFlag(bad, &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), bad)) << s.message();
  }
  ASSERT_OK(ParseProfilerOptionFlag("a=1", &o));
  EXPECT_TRUE(absl::StrContains(ParseProfilerOptionFlag("a=2", &o).message(), "given twice"));

  o = v1::CaptureOptions();
  (*o.mutable_profiler_options())["bad key"] = "1";
  ExpectInvalid(o, "profiler option key \"bad key\" is malformed");
  // Custom-call tracing is an XLA flag set when the workload starts.
  o = v1::CaptureOptions();
  ASSERT_OK(ParseProfilerOptionFlag("xla_xprof_enable_custom_call_tracing=true", &o));
  ExpectInvalid(o, "LIBTPU_INIT_ARGS");
  // A key podprof builds from its own flags cannot be given twice over.
  o = KernelOptions();
  ASSERT_OK(ParseProfilerOptionFlag("tpu_tc_perf_counter_sampling_options=x", &o));
  ExpectInvalid(o, "repeats an option podprof sets");
  tensorflow::ProfileOptions p;
  EXPECT_FALSE(FillProfileOptions(o, &p).ok());
  EXPECT_TRUE(p.advanced_configuration().empty());
}

TEST(KernelProfilingOptionsTest, MalformedCountersFlagsAreNamed) {
  v1::CaptureOptions o;
  for (const char* bad :
       {"tc", "tc:", ":1,2", "tc:1,,2", "tc:1,", "tc:-1", "tc:x", "tc:1 2", "tc:4294967296"}) {
    absl::Status s = ParseCountersFlag(bad, &o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("\"", bad, "\""))) << s.message();
  }
  EXPECT_TRUE(o.counters().empty());
}

TEST(KernelProfilingOptionsTest, DescriptionSaysWhatWasAsked) {
  v1::CaptureOptions o = KernelOptions();
  o.add_counter_sets("TC_COMPUTATION");
  o.set_python_tracer_level(1);
  ASSERT_OK(ParseProfilerOptionFlag("tpu_power_trace_level=1", &o));
  EXPECT_EQ(DescribeOptions(o),
            "kernel profiling: tc[10,11,56] every 1 us; sets TC_COMPUTATION; python tracer 1; "
            "tpu_power_trace_level=1");
}

}  // namespace
}  // namespace podprof::kernelprof
