#include "bench/kernel_profiling_xspace.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "trace/perf_counters.h"
#include "trace/xspace_schema.h"

namespace podprof::bench {
namespace {

namespace xs = trace::xspace;

constexpr int kVarint = 0, kLengthDelimited = 2;

// The wire format, written into a buffer the caller sized (the hot path: a sample line) or
// appended to a string (everything else).
char* PutVarint(char* p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}
char* PutUint(char* p, uint32_t field, uint64_t v) {
  return PutVarint(PutVarint(p, (uint64_t{field} << 3) | kVarint), v);
}
char* PutBytes(char* p, uint32_t field, const char* data, size_t n) {
  p = PutVarint(PutVarint(p, (uint64_t{field} << 3) | kLengthDelimited), n);
  std::memcpy(p, data, n);
  return p + n;
}
void AppendUint(std::string* out, uint32_t field, uint64_t v) {
  char buf[20];
  out->append(buf, PutUint(buf, field, v) - buf);
}
void AppendBytes(std::string* out, uint32_t field, absl::string_view data) {
  char buf[20];
  char* p = PutVarint(buf, (uint64_t{field} << 3) | kLengthDelimited);
  out->append(buf, PutVarint(p, data.size()) - buf);
  out->append(data.data(), data.size());
}

// Stat metadata ids of every plane.
enum StatId : uint64_t {
  kPerfCounterIdStat = 1,
  kCounterValueStat,
  kDeviceTypeStat,
  kGlobalChipIdStat,
  kHloCategoryStat,
  kFlopsStat,
  kBytesAccessedStat,
};
constexpr xs::Stat kStatOfId[] = {xs::Stat::kPerformanceCounterId, xs::Stat::kCounterValue,
                                  xs::Stat::kDeviceTypeString,     xs::Stat::kGlobalChipId,
                                  xs::Stat::kHloCategory,          xs::Stat::kFlops,
                                  xs::Stat::kBytesAccessed};

// The kernels the chips run, drawn uniformly; event metadata ids 1..kKernelTypes.
struct KernelType {
  const char* name;  // display name
  const char* hlo;   // the metadata's name: the HLO text
  const char* category;
  int64_t flops, bytes;
};
constexpr KernelType kKernels[] = {
    {"fusion.1", "%fusion.1 = bf16[1024,4096] fusion(...), kind=kLoop", "loop fusion", 4 << 20,
     16 << 20},
    {"convolution.2", "%convolution.2 = bf16[1024,4096] convolution(...)", "convolution",
     int64_t{1} << 34, 48 << 20},
    {"fusion.3", "%fusion.3 = bf16[4096,4096] fusion(...), kind=kOutput", "output fusion",
     int64_t{1} << 33, 64 << 20},
    {"copy.4", "%copy.4 = bf16[4096,1024] copy(...)", "data formatting", 0, 16 << 20},
    {"flash_attention",
     "%flash_attention = bf16[8,1024,128] custom-call(...), "
     "custom_call_target=\"tpu_custom_call\"",
     "custom-call", int64_t{1} << 32, 24 << 20},
    {"all-reduce.5", "%all-reduce.5 = f32[4096] all-reduce(...)", "all-reduce", 4096, 1 << 16},
};
constexpr int kKernelTypes = sizeof(kKernels) / sizeof(kKernels[0]);
constexpr int kPallasType = 4;
// Inside a Pallas execution: primitives splitting it (fractions of its duration, per mille)
// and one sync-flag wait near its end. Event metadata ids follow the kernels'.
constexpr const char* kPrimitives[] = {"dma_start", "dot_general", "dma_wait"};
constexpr int64_t kPrimitiveEndsPermille[] = {100, 800, 1000};
constexpr uint64_t kFirstPrimitiveMeta = kKernelTypes + 1;
constexpr uint64_t kSyncWaitMeta = kFirstPrimitiveMeta + 3;
constexpr uint64_t kFirstCounterMeta = kSyncWaitMeta + 1;
// TensorCore cycles per ns: the cycle counter's rate; the others count a fraction of it.
constexpr int64_t kCyclesPerUs = 1900;

struct Execution {
  int type;
  int64_t begin_ns, end_ns;  // since the window's start
};

// A chip's kernels, back to back over the window, the last one cut at its end.
std::vector<Execution> Schedule(const KernelProfilingSpec& spec, int chip) {
  std::mt19937_64 rng(1234 + chip);
  std::uniform_int_distribution<int64_t> duration(spec.min_kernel_ns, spec.max_kernel_ns);
  std::uniform_int_distribution<int> type(0, kKernelTypes - 1);
  std::vector<Execution> out;
  for (int64_t t = 0; t < spec.window_ns;) {
    const int64_t end = std::min(t + duration(rng), spec.window_ns);
    out.push_back({type(rng), t, end});
    t = end;
  }
  return out;
}

struct Counter {
  uint64_t id;
  std::string register_name;
  // Increase per sample interval while each kernel type runs.
  int64_t step[kKernelTypes];
};

absl::StatusOr<std::vector<Counter>> Counters(const KernelProfilingSpec& spec) {
  std::vector<Counter> out;
  for (int die = 0; die < 2; ++die) {
    for (int index : kSampledTcIndices) {
      const std::optional<uint64_t> id = trace::ComponentCounterId("v7x", "tc", die, index);
      if (!id) return absl::InternalError(absl::StrCat("no v7x tc counter ", index));
      Counter c;
      c.id = *id;
      c.register_name =
          std::string(trace::PerfCounterName("v7x", *id).value_or(absl::StrCat("ID_", *id)));
      // Index 0 counts cycles; the others a fraction of them, by kernel, made up but fixed.
      for (int k = 0; k < kKernelTypes; ++k) {
        const int64_t permille = index == 0 ? 1000 : (k * 311 + index * 173 + die * 71) % 1000;
        c.step[k] = kCyclesPerUs * spec.interval_ns / 1000 * permille / 1000;
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

// A metadata map entry (XPlane's event_metadata or stat_metadata) of id `id`.
void AppendMetadata(std::string* plane, uint32_t map_field, uint64_t id, absl::string_view name,
                    absl::string_view display_name = "", absl::string_view stats = "") {
  std::string value, entry;
  AppendUint(&value, xs::XEventMetadataField::kId, id);  // XStatMetadata's id is field 1 too
  AppendBytes(&value, xs::XEventMetadataField::kName, name);
  if (!display_name.empty())
    AppendBytes(&value, xs::XEventMetadataField::kDisplayName, display_name);
  value.append(stats.data(), stats.size());
  AppendUint(&entry, xs::MapEntryField::kKey, id);
  AppendBytes(&entry, xs::MapEntryField::kValue, value);
  AppendBytes(plane, map_field, entry);
}

std::string UintStat(uint64_t metadata_id, uint64_t v) {
  std::string s;
  AppendUint(&s, xs::XStatField::kMetadataId, metadata_id);
  AppendUint(&s, xs::XStatField::kUint64Value, v);
  return s;
}
std::string StrStat(uint64_t metadata_id, absl::string_view v) {
  std::string s;
  AppendUint(&s, xs::XStatField::kMetadataId, metadata_id);
  AppendBytes(&s, xs::XStatField::kStrValue, v);
  return s;
}

// A plane's id, name, stats and metadata: everything but its lines.
void AppendPlaneHeader(int chip, const std::vector<Counter>& counters, std::string* plane) {
  AppendUint(plane, xs::XPlaneField::kId, chip);
  AppendBytes(plane, xs::XPlaneField::kName, absl::StrCat(xs::kTpuPlanePrefix, chip));
  AppendBytes(plane, xs::XPlaneField::kStats, StrStat(kDeviceTypeStat, "TPU v7x"));
  AppendBytes(plane, xs::XPlaneField::kStats, UintStat(kGlobalChipIdStat, chip));
  for (uint64_t i = 0; i < std::size(kStatOfId); ++i) {
    AppendMetadata(plane, xs::XPlaneField::kStatMetadata, i + 1, xs::StatName(kStatOfId[i]));
  }
  for (int k = 0; k < kKernelTypes; ++k) {
    std::string stats;
    AppendBytes(&stats, xs::XEventMetadataField::kStats,
                StrStat(kHloCategoryStat, kKernels[k].category));
    AppendBytes(&stats, xs::XEventMetadataField::kStats, UintStat(kFlopsStat, kKernels[k].flops));
    AppendBytes(&stats, xs::XEventMetadataField::kStats,
                UintStat(kBytesAccessedStat, kKernels[k].bytes));
    AppendMetadata(plane, xs::XPlaneField::kEventMetadata, k + 1, kKernels[k].hlo, kKernels[k].name,
                   stats);
  }
  for (uint64_t p = 0; p < std::size(kPrimitives); ++p) {
    AppendMetadata(plane, xs::XPlaneField::kEventMetadata, kFirstPrimitiveMeta + p, kPrimitives[p]);
  }
  AppendMetadata(plane, xs::XPlaneField::kEventMetadata, kSyncWaitMeta, "SyncWait");
  for (size_t c = 0; c < counters.size(); ++c) {
    AppendMetadata(plane, xs::XPlaneField::kEventMetadata, kFirstCounterMeta + c,
                   counters[c].register_name);
  }
}

void AppendEvent(std::string* line, uint64_t metadata_id, int64_t offset_ns, int64_t duration_ns) {
  std::string ev;
  AppendUint(&ev, xs::XEventField::kMetadataId, metadata_id);
  AppendUint(&ev, xs::XEventField::kOffsetPs, static_cast<uint64_t>(offset_ns * 1000));
  AppendUint(&ev, xs::XEventField::kDurationPs, static_cast<uint64_t>(duration_ns * 1000));
  AppendBytes(line, xs::XLineField::kEvents, ev);
}

// The XLA Ops, Pallas Primitives and Tensor Core Sync Flag lines; returns the scope events.
int64_t AppendKernelLines(const KernelProfilingSpec& spec, const std::vector<Execution>& runs,
                          int64_t first_line_id, std::string* plane) {
  std::string ops, prims, sync;
  int64_t scopes = 0;
  for (const Execution& e : runs) {
    AppendEvent(&ops, e.type + 1, e.begin_ns, e.end_ns - e.begin_ns);
    if (e.type != kPallasType) continue;
    const int64_t d = e.end_ns - e.begin_ns;
    int64_t from = e.begin_ns;
    for (size_t p = 0; p < std::size(kPrimitives); ++p) {
      const int64_t to = e.begin_ns + d * kPrimitiveEndsPermille[p] / 1000;
      AppendEvent(&prims, kFirstPrimitiveMeta + p, from, to - from);
      from = to;
    }
    AppendEvent(&sync, kSyncWaitMeta, e.end_ns - d * 150 / 1000, d * 100 / 1000);
    scopes += std::size(kPrimitives) + 1;
  }
  const std::pair<absl::string_view, const std::string*> lines[] = {
      {xs::kXlaOpsLine, &ops}, {xs::kPallasPrimitivesLine, &prims}, {xs::kSyncFlagLine, &sync}};
  int64_t id = first_line_id;
  for (const auto& [name, events] : lines) {
    std::string line;
    AppendUint(&line, xs::XLineField::kId, id++);
    AppendBytes(&line, xs::XLineField::kName, name);
    AppendUint(&line, xs::XLineField::kTimestampNs, spec.start_ns);
    line += *events;
    AppendBytes(plane, xs::XPlaneField::kLines, line);
  }
  return scopes;
}

// A line per sample instant, named after the kernel running then, with an event per counter:
// the hot path, written with no allocation.
void AppendSampleLines(const KernelProfilingSpec& spec, const std::vector<Execution>& runs,
                       const std::vector<Counter>& counters, int64_t samples, std::string* plane) {
  std::vector<std::string> id_stats;  // each counter's performance_counter_id stat
  for (const Counter& c : counters) id_stats.push_back(UintStat(kPerfCounterIdStat, c.id));
  std::vector<uint64_t> total(counters.size(), 0);
  std::vector<char> line(64 + counters.size() * 64);
  size_t run = 0;
  for (int64_t i = 0; i < samples; ++i) {
    const int64_t t = i * spec.interval_ns;
    while (run + 1 < runs.size() && runs[run].end_ns <= t) ++run;
    const KernelType& kernel = kKernels[runs[run].type];
    char* p = line.data();
    p = PutUint(p, xs::XLineField::kId, i);
    p = PutBytes(p, xs::XLineField::kName, kernel.name, std::strlen(kernel.name));
    p = PutUint(p, xs::XLineField::kTimestampNs, spec.start_ns + t);
    for (size_t c = 0; c < counters.size(); ++c) {
      char value[24], ev[64];
      char* v = PutUint(value, xs::XStatField::kMetadataId, kCounterValueStat);
      v = PutUint(v, xs::XStatField::kUint64Value, total[c]);
      char* e = PutUint(ev, xs::XEventField::kMetadataId, kFirstCounterMeta + c);
      e = PutBytes(e, xs::XEventField::kStats, id_stats[c].data(), id_stats[c].size());
      e = PutBytes(e, xs::XEventField::kStats, value, v - value);
      p = PutBytes(p, xs::XLineField::kEvents, ev, e - ev);
      total[c] += counters[c].step[runs[run].type];
    }
    char head[20];
    char* h = PutVarint(head, (uint64_t{xs::XPlaneField::kLines} << 3) | kLengthDelimited);
    h = PutVarint(h, p - line.data());
    plane->append(head, h - head);
    plane->append(line.data(), p - line.data());
  }
}

}  // namespace

absl::StatusOr<KernelProfilingXSpace> BuildKernelProfilingXSpace(const KernelProfilingSpec& spec) {
  if (spec.chips <= 0 || spec.window_ns <= 0 || spec.interval_ns <= 0 || spec.min_kernel_ns <= 0 ||
      spec.max_kernel_ns < spec.min_kernel_ns) {
    return absl::InvalidArgumentError(
        "kernel profiling spec: chips, window, interval and "
        "kernel durations must be positive");
  }
  absl::StatusOr<std::vector<Counter>> counters = Counters(spec);
  if (!counters.ok()) return counters.status();
  KernelProfilingXSpace out;
  out.samples_per_series = spec.window_ns / spec.interval_ns;
  for (const Counter& c : *counters) out.series.push_back(trace::PerfSeriesName("v7x", c.id));
  // About 24 bytes an event: reserve the lot, so the bytes are not copied as they grow.
  const size_t plane_bytes =
      static_cast<size_t>(out.samples_per_series) * (32 + 26 * counters->size());
  out.bytes.reserve(plane_bytes * spec.chips + (size_t{1} << 20));
  std::string plane;
  plane.reserve(plane_bytes + (size_t{1} << 20));
  for (int chip = 0; chip < spec.chips; ++chip) {
    const std::vector<Execution> runs = Schedule(spec, chip);
    plane.clear();
    AppendPlaneHeader(chip, *counters, &plane);
    out.scope_events += AppendKernelLines(spec, runs, out.samples_per_series, &plane);
    AppendSampleLines(spec, runs, *counters, out.samples_per_series, &plane);
    AppendBytes(&out.bytes, xs::XSpaceField::kPlanes, plane);
    out.executions += static_cast<int64_t>(runs.size());
    for (const Execution& e : runs) out.pallas_executions += e.type == kPallasType;
  }
  AppendBytes(&out.bytes, xs::XSpaceField::kHostnames, "v7x-bench");
  return out;
}

}  // namespace podprof::bench
