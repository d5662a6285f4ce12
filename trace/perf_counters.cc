#include "trace/perf_counters.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace podprof::trace {
namespace {

constexpr PerfCounterId kV6e[] = {
#include "trace/perf_counter_ids_v6e.inc"
};
constexpr PerfCounterId kV7x[] = {
#include "trace/perf_counter_ids_v7x.inc"
};

// v7x's second die repeats the first's registers this much higher.
constexpr uint64_t kV7xDieStride = 0x20000000;
// Consecutive counters of a block are 8 bytes apart.
constexpr uint64_t kCounterStride = 8;

}  // namespace

bool IsPerfSeries(absl::string_view series_name) {
  return absl::StartsWith(series_name, kPerfSeriesPrefix);
}

absl::Span<const PerfCounterId> PerfCounterTable(absl::string_view generation) {
  if (generation == "v6e") return kV6e;
  if (generation == "v7x") return kV7x;
  return {};
}

std::optional<absl::string_view> PerfCounterName(absl::string_view generation, uint64_t id) {
  absl::Span<const PerfCounterId> table = PerfCounterTable(generation);
  auto it = std::lower_bound(table.begin(), table.end(), id,
                             [](const PerfCounterId& c, uint64_t v) { return c.id < v; });
  if (it == table.end() || it->id != id) return std::nullopt;
  return absl::string_view(it->name);
}

std::string ShortPerfCounterName(absl::string_view register_name) {
  absl::string_view n = register_name;
  absl::ConsumePrefix(&n, "VF_CHIP_");
  // The statistics blocks' names say nothing the counter's own name does not.
  std::string s = absl::StrReplaceAll(
      n, {{"TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_UNPRIVILEGED_COUNT_", "TC_"},
          {"_SC_STATS_COUNTERS_UNPRIVILEGED_COUNT_", "_"},
          {"_CMN_HI_FREQ_STATS_COUNTERS_UNPRIVILEGED_", "_"},
          {"PWRMGR_PWRMGR_TC_THROTTLE_CORE_DEBUG_STATS_UNPRIVILEGED_", "PWRMGR_"},
          {"_PERF_COUNTERS_FIFO_STATS_COUNTERS_UNPRIVILEGED_", "_"}});
  return absl::AsciiStrToLower(s);
}

std::string PerfSeriesName(absl::string_view generation, uint64_t id) {
  std::optional<absl::string_view> name = PerfCounterName(generation, id);
  if (!name) return absl::StrCat(kPerfSeriesPrefix, "id_", id);
  return absl::StrCat(kPerfSeriesPrefix, ShortPerfCounterName(*name));
}

std::optional<uint64_t> PerfSeriesId(absl::string_view generation, absl::string_view series_name) {
  if (!absl::ConsumePrefix(&series_name, kPerfSeriesPrefix)) return std::nullopt;
  uint64_t id;
  if (absl::ConsumePrefix(&series_name, "id_")) {
    if (absl::SimpleAtoi(series_name, &id)) return id;
    return std::nullopt;
  }
  for (const PerfCounterId& c : PerfCounterTable(generation)) {
    if (ShortPerfCounterName(c.name) == series_name) return c.id;
  }
  return std::nullopt;
}

std::optional<uint64_t> ComponentCounterId(absl::string_view generation,
                                           absl::string_view component, int die, int index) {
  if (index < 0 || component != "tc") return std::nullopt;
  // The TensorCore block starts at its cycle counter (index 0).
  if (generation == "v6e" && die == 0) return 3257466888u + kCounterStride * index;
  if (generation == "v7x" && (die == 0 || die == 1)) {
    return 2791874568u + kV7xDieStride * static_cast<uint64_t>(die) + kCounterStride * index;
  }
  return std::nullopt;
}

absl::StatusOr<SamplingOptions> ParseSamplingOptions(absl::string_view text) {
  SamplingOptions out;
  bool interval = false;
  for (absl::string_view field : absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(field, absl::MaxSplits(':', 1));
    const absl::string_view key = kv.first, value = kv.second;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("sampling option \"", field, "\": ", why));
    };
    int64_t n = 0;
    if (key == "is_external_trigger") {
      if (value != "true" && value != "false") return bad("expected true or false");
      out.external_trigger = value == "true";
      continue;
    }
    if (key != "interval_us" && key != "scaling" && key != "counter_size_bits" &&
        key != "indices") {
      return bad(
          "unknown field (known: interval_us, is_external_trigger, scaling, "
          "counter_size_bits, indices)");
    }
    if (!absl::SimpleAtoi(value, &n)) return bad("expected an integer");
    if (key == "interval_us") {
      if (n < 1) return bad("the interval must be at least 1 us");
      out.interval_us = n;
      interval = true;
    } else if (key == "scaling") {
      if (n < 0 || n > 63) return bad("expected 0-63");
      out.scaling = static_cast<int>(n);
    } else if (key == "counter_size_bits") {
      if (n < 0 || n > 3) return bad("expected 0-3 (8, 16, 32 or 64 bits)");
      out.counter_size_bits = static_cast<int>(n);
    } else {
      if (n < 0 || n > (1 << 20)) return bad("expected a counter index");
      out.indices.push_back(static_cast<int>(n));
    }
  }
  if (interval && out.external_trigger) {
    return absl::InvalidArgumentError(
        "sampling options: interval_us and is_external_trigger:true exclude each other");
  }
  return out;
}

std::string FormatSamplingOptions(const SamplingOptions& options) {
  std::string out;
  if (options.external_trigger) {
    out = "is_external_trigger:true ";
  } else if (options.interval_us > 0) {
    out = absl::StrCat("interval_us:", options.interval_us, " ");
  }
  absl::StrAppend(&out, "scaling:", options.scaling,
                  " counter_size_bits:", options.counter_size_bits);
  for (int i : options.indices) absl::StrAppend(&out, " indices:", i);
  return out;
}

void UnwrapCounterSamples(int scaling, double* values, size_t n) {
  double max = 0;
  for (size_t i = 0; i < n; ++i) max = std::max(max, values[i]);
  int bits = 8;
  while (bits < 64 && max >= std::ldexp(1.0, bits)) bits *= 2;
  const double wrap = std::ldexp(1.0, bits);
  const double scale = std::ldexp(1.0, std::clamp(scaling, 0, 63));
  double carried = 0, previous = 0;
  for (size_t i = 0; i < n; ++i) {
    const double raw = values[i];
    if (i > 0 && raw < previous) carried += wrap;
    previous = raw;
    values[i] = (raw + carried) * scale;
  }
}

}  // namespace podprof::trace
