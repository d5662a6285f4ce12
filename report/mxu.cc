#include "report/mxu.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace podprof::report {
namespace {

MxuFigure FromMaps(const v1::KernelProfile* profile,
                   const google::protobuf::Map<std::string, double>& utilization) {
  if (profile != nullptr) {
    auto it = profile->units().find("mxu");
    if (it != profile->units().end()) return {it->second, MxuSource::kPerfCounters};
  }
  auto it = utilization.find("mxu_busy");
  if (it != utilization.end()) return {it->second, MxuSource::kGauge};
  return {};
}

}  // namespace

MxuFigure MxuOf(const v1::KernelInsight& in) {
  return FromMaps(in.has_kernel_profile() ? &in.kernel_profile() : nullptr, in.utilization());
}

MxuFigure MxuOf(const v1::KernelHistoryPoint& p) {
  return FromMaps(p.has_kernel_profile() ? &p.kernel_profile() : nullptr, p.utilization());
}

const char* MxuSourceName(MxuSource source) {
  switch (source) {
    case MxuSource::kPerfCounters:
      return "perf_counters";
    case MxuSource::kGauge:
      return "mxu_busy_gauge";
    case MxuSource::kNone:
      break;
  }
  return "";
}

void MxuSources::Add(const MxuFigure& f) {
  perf_ = perf_ || f.source == MxuSource::kPerfCounters;
  gauge_ = gauge_ || f.source == MxuSource::kGauge;
}

std::string MxuSources::Cell(const MxuFigure& f) const {
  if (!f.known()) return "-";
  // ShareCell's form: a measured 0% is 0.0%, not "-".
  const std::string cell = absl::StrFormat("%.1f%%", 100 * f.busy);
  return perf_ && f.source == MxuSource::kGauge ? absl::StrCat("~", cell) : cell;
}

std::string MxuSources::Footnote() const {
  if (perf_ && gauge_) {
    return "MXU: performance counters (kernel profiling); ~ marks the runtime's MXU-busy gauge "
           "over the kernel's runs, where they were not sampled";
  }
  if (perf_) return "MXU: the kernel's sampled performance counters (kernel profiling)";
  if (gauge_) return "MXU: the runtime's MXU-busy gauge over the kernel's runs";
  return "";
}

void WriteMxuFootnote(const MxuSources& sources, const TextTable& table, const TableFit& fit,
                      std::ostream& out) {
  const std::vector<std::string> shown = table.Shown(fit);
  const std::string note = sources.Footnote();
  if (!note.empty() && std::find(shown.begin(), shown.end(), "MXU") != shown.end()) {
    out << note << "\n";
  }
}

}  // namespace podprof::report
