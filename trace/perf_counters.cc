#include "trace/perf_counters.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

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

// Consecutive counters of a block are 8 bytes apart.
constexpr uint64_t kCounterStride = 8;

const PerfCounterId* Find(absl::Span<const PerfCounterId> table, uint64_t id) {
  auto it = std::lower_bound(table.begin(), table.end(), id,
                             [](const PerfCounterId& c, uint64_t v) { return c.id < v; });
  return it == table.end() || it->id != id ? nullptr : &*it;
}

// v7x's die-1 registers the published table lacks, named after their die-0 twins (the table
// is a best-effort list: it has fewer than half as many DIE1 names as DIE0 ones). Sorted by id;
// built once, never freed, so the names can be handed out as string_views.
absl::Span<const PerfCounterId> V7xDerivedDie1() {
  // The names and the entries pointing into them live together, reachable from the static.
  struct Derived {
    std::deque<std::string> names;  // a deque: its strings never move
    std::vector<PerfCounterId> ids;
  };
  static const Derived* const kDerived = [] {
    auto* d = new Derived;
    for (const PerfCounterId& c : kV7x) {
      const absl::string_view name = c.name;
      const size_t at = name.find("_DIE0_");
      if (at == absl::string_view::npos || Find(kV7x, c.id + kV7xDieStride) != nullptr) continue;
      std::string& twin = d->names.emplace_back(name);
      twin.replace(at, 6, "_DIE1_");
      d->ids.push_back({c.id + kV7xDieStride, twin.c_str()});
    }
    return d;  // sorted: kV7x is, and every id moved by the same stride
  }();
  return kDerived->ids;
}

// The statistics block a component's counter indices count in: the register-name prefix
// after "VF_CHIP_" (XProf's docs/kernel-profiling.md, "Determining Counter Indices"), on v7x
// and on v6e (empty: v6e has no such block). Die-1 blocks of v7x are the die-0 ones plus
// kV7xDieStride, except ICR's, which belongs to the chiplet, not to a die.
struct ComponentBlock {
  absl::string_view component;
  absl::string_view v7x_prefix;
  absl::string_view v6e_prefix;
};
constexpr ComponentBlock kComponentBlocks[] = {
    {"tc", "DIE0_TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_",
     "TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_"},
    {"scs", "DIE0_SC_0_SCS_SC_STATS_COUNTERS_", "SC_0_SCS_SC_STATS_COUNTERS_"},
    {"sctc", "DIE0_SC_0_SCTC_0_SC_STATS_COUNTERS_", ""},
    {"sctd", "DIE0_SC_0_SCTD_0_SC_STATS_COUNTERS_", ""},
    {"cmn", "DIE0_CMN_CMNUR_0_CMN_STATS_DEBUG_FIXED_STATS_COUNTERS_", ""},
    {"icr", "CHIPLET_ICR_ICR_DATA_0_DEBUG_DOMAIN_ICR_DATA_STATS_PACKET_COUNTERS_", ""},
};

// The lowest id of the table's registers named "VF_CHIP_" + `prefix`: the block's counter 0
// (in every block it is the cycle counter, or for ICR the first link's first counter).
// nullopt for an empty prefix or one the table lacks.
std::optional<uint64_t> FirstRegister(absl::Span<const PerfCounterId> table,
                                      absl::string_view prefix) {
  if (prefix.empty()) return std::nullopt;
  const std::string full = absl::StrCat("VF_CHIP_", prefix);
  std::optional<uint64_t> first;
  for (const PerfCounterId& c : table) {
    if (absl::StartsWith(c.name, full) && (!first || c.id < *first)) first = c.id;
  }
  return first;
}

// FirstRegister of every component, by generation, found once.
struct BlockStarts {
  std::optional<uint64_t> v7x[std::size(kComponentBlocks)];
  std::optional<uint64_t> v6e[std::size(kComponentBlocks)];
};
const BlockStarts& Starts() {
  static const BlockStarts* const kStarts = [] {
    auto* s = new BlockStarts;
    for (size_t i = 0; i < std::size(kComponentBlocks); ++i) {
      s->v7x[i] = FirstRegister(kV7x, kComponentBlocks[i].v7x_prefix);
      s->v6e[i] = FirstRegister(kV6e, kComponentBlocks[i].v6e_prefix);
    }
    return s;
  }();
  return *kStarts;
}

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
  if (const PerfCounterId* c = Find(PerfCounterTable(generation), id); c != nullptr) {
    return absl::string_view(c->name);
  }
  if (generation == "v7x") {
    if (const PerfCounterId* c = Find(V7xDerivedDie1(), id); c != nullptr) {
      return absl::string_view(c->name);
    }
  }
  return std::nullopt;
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
  if (generation == "v7x") {
    for (const PerfCounterId& c : V7xDerivedDie1()) {
      if (ShortPerfCounterName(c.name) == series_name) return c.id;
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> ComponentCounterId(absl::string_view generation,
                                           absl::string_view component, int die, int index) {
  if (index < 0) return std::nullopt;
  for (size_t i = 0; i < std::size(kComponentBlocks); ++i) {
    const ComponentBlock& b = kComponentBlocks[i];
    if (b.component != component) continue;
    std::optional<uint64_t> first;
    if (generation == "v6e" && die == 0) first = Starts().v6e[i];
    if (generation == "v7x" && (die == 0 || (die == 1 && component != "icr"))) {
      first = Starts().v7x[i];
      if (first) *first += kV7xDieStride * static_cast<uint64_t>(die);
    }
    if (!first) return std::nullopt;
    return *first + kCounterStride * static_cast<uint64_t>(index);
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
