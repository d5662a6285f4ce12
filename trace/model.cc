#include "trace/model.h"

#include <cstring>

#include "absl/strings/match.h"
#include "trace/perf_counters.h"
#include "trace/xspace_schema.h"

namespace podprof::trace {
namespace {

template <typename T>
size_t VectorBytes(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

size_t StringBytes(const std::string& s) {
  // Short strings live inside the object (SSO) and cost nothing extra.
  return s.capacity() > 15 ? s.capacity() + 1 : 0;
}

}  // namespace

size_t HostCapture::KeptBytes() const {
  size_t bytes = sizeof(*this) + StringBytes(host.name) + VectorBytes(host.chips);
  for (const Chip& c : host.chips) bytes += StringBytes(c.generation) + StringBytes(c.device_type);
  bytes += VectorBytes(kernels);
  for (const KernelDef& k : kernels) {
    bytes += StringBytes(k.module) + StringBytes(k.name) + StringBytes(k.category) +
             StringBytes(k.source) + StringBytes(k.hlo_text) + StringBytes(k.tf_op) +
             StringBytes(k.source_stack) + StringBytes(k.mlir);
  }
  bytes += VectorBytes(blocks);
  for (const EventBlock& b : blocks) {
    bytes += StringBytes(b.line) + VectorBytes(b.start_ps) + VectorBytes(b.duration_ps) +
             VectorBytes(b.kernel) + VectorBytes(b.collective);
  }
  bytes += VectorBytes(counters);
  for (const CounterSeries& c : counters) {
    bytes += StringBytes(c.name) + VectorBytes(c.time_ns) + VectorBytes(c.value);
  }
  bytes += VectorBytes(warnings);
  for (const std::string& w : warnings) bytes += StringBytes(w);
  return bytes;
}

size_t HostCapture::EventCount() const {
  size_t n = 0;
  for (const EventBlock& b : blocks) {
    n += b.size() > 0 ? b.size() : static_cast<size_t>(b.encoded_events);
  }
  return n;
}

bool IsScopesLine(std::string_view line) {
  const absl::string_view name(line.data(), line.size());
  if (name == xspace::kXlaTraceMeLine || name == xspace::kPallasPrimitivesLine ||
      name == xspace::kSourceLinesLine || name == xspace::kSourceCodeLine ||
      name == xspace::kSyncFlagLine) {
    return true;
  }
  // "LLO Instructions" and the per-unit lines ("VALU Instructions", "MXU0 Instructions").
  if (absl::EndsWith(name, xspace::kInstructionsLineSuffix)) return true;
  // A SparseCore plane's line, read onto its chip: "SparseCore 1/Sparse Core Ops".
  return absl::StartsWith(name, kSparseCoreLinePrefix) && name.find('/') != absl::string_view::npos;
}

LineKind LineKindOfName(const std::string& line) {
  if (line == xspace::kXlaModulesLine) return LineKind::kModules;
  if (line == xspace::kStepsLine) return LineKind::kSteps;
  if (absl::StartsWith(line, xspace::kGpuStreamLinePrefix)) return LineKind::kGpuStream;
  if (IsScopesLine(line)) return LineKind::kScopes;
  return LineKind::kOps;
}

CounterKind CounterKindOfName(const std::string& name) {
  // Sampled performance counters (trace/perf_counters.h) are registers that count up.
  if (IsPerfSeries(name)) return CounterKind::kCumulative;
  for (const char* suffix : {"_nj", "_cycles", "_count", "_bytes"}) {
    const size_t n = std::strlen(suffix);
    if (name.size() >= n && name.compare(name.size() - n, n, suffix) == 0) {
      return CounterKind::kCumulative;
    }
  }
  return CounterKind::kGauge;
}

std::string CustomCallTarget(const std::string& hlo_text) {
  static constexpr char kKey[] = "custom_call_target=\"";
  const size_t at = hlo_text.find(kKey);
  if (at == std::string::npos) return "";
  const size_t begin = at + sizeof(kKey) - 1;
  const size_t end = hlo_text.find('"', begin);
  return end == std::string::npos ? "" : hlo_text.substr(begin, end - begin);
}

bool IsPallasKernel(const KernelDef& k) {
  return !k.mlir.empty() || CustomCallTarget(k.hlo_text) == "tpu_custom_call";
}

}  // namespace podprof::trace
