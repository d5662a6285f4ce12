#include "cli/kernel_executions.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"

namespace podprof::cli {
namespace {

using insight::ExecutionUtilization;
using insight::XprofFigures;

nlohmann::json FiguresJson(const XprofFigures& f) {
  nlohmann::json j = {{"mxu_cycles_breakdown", f.mxu_cycles_breakdown},
                      {"other_metrics", f.other_metrics}};
  if (f.has_mxu) j["mxu_utilization"] = f.mxu_utilization;
  return j;
}

nlohmann::json ExecutionJson(const trace::HostCapture& c, const ExecutionUtilization& e) {
  nlohmann::json j = FiguresJson(insight::XprofFiguresOf(e.profile.rows));
  j["kernel_name"] = c.kernels[e.kernel].name;
  j["start_ns"] = e.begin_ns;
  j["duration_us"] = static_cast<double>(e.duration_ps) * 1e-6;
  if (!e.profile.missing.empty()) j["missing"] = e.profile.missing;
  nlohmann::json dies = nlohmann::json::array();
  for (const insight::DieProfile& d : e.profile.dies) {
    nlohmann::json die = FiguresJson(insight::XprofFiguresOf(d.rows));
    die["die"] = d.die;
    if (!d.missing.empty()) die["missing"] = d.missing;
    dies.push_back(std::move(die));
  }
  if (!dies.empty()) j["dies"] = std::move(dies);
  if (!e.xprof_differs.empty()) {
    j["xprof"] = FiguresJson(insight::XprofFiguresOf(e.xprof_rows));
    j["xprof"]["why"] = e.xprof_differs;
  }
  return j;
}

std::string Pct(const std::map<std::string, double>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? "-" : absl::StrFormat("%.2f%%", it->second);
}

}  // namespace

nlohmann::json KernelExecutionsJson(const trace::HostCapture& capture,
                                    const std::vector<ExecutionUtilization>& executions) {
  std::map<int, nlohmann::json> devices;
  for (const ExecutionUtilization& e : executions) {
    const trace::Chip& chip = capture.host.chips[e.chip];
    nlohmann::json& d = devices[e.chip];
    if (d.is_null()) {
      d = {{"device_id", chip.ordinal},
           {"device_type", chip.device_type},
           {"kernels", nlohmann::json::array()}};
    }
    d["kernels"].push_back(ExecutionJson(capture, e));
  }
  nlohmann::json list = nlohmann::json::array();
  for (auto& [chip, d] : devices) list.push_back(std::move(d));
  return {
      {"host", capture.host.name}, {"devices", std::move(list)}, {"warnings", capture.warnings}};
}

void WriteKernelExecutionsTable(const trace::HostCapture& capture,
                                const std::vector<ExecutionUtilization>& executions,
                                const report::TableFit& fit, std::ostream& out) {
  using Column = report::TextTable::Column;
  using Align = report::TextTable::Align;
  report::TextTable t({Column{"CHIP", Align::kRight}, Column{"KERNEL", Align::kLeft, 40, 10, 12},
                       Column{"START", Align::kRight, 0, 3}, Column{"DURATION", Align::kRight},
                       Column{"MXU", Align::kRight}, Column{"HBM", Align::kRight, 0, 5},
                       Column{"VPU", Align::kRight, 0, 4},
                       Column{"CLOCKS SKIPPED", Align::kRight, 0, 2},
                       Column{"XPROF SHOWS", Align::kLeft, 0, 1}});
  const int64_t origin = capture.host.profile_start_ns;
  for (const ExecutionUtilization& e : executions) {
    const XprofFigures f = insight::XprofFiguresOf(e.profile.rows);
    std::string xprof;
    if (!e.xprof_differs.empty()) {
      const XprofFigures x = insight::XprofFiguresOf(e.xprof_rows);
      xprof = absl::StrFormat("MXU %.2f%%: %s", x.mxu_utilization, e.xprof_differs);
    }
    t.AddRow({absl::StrCat(capture.host.chips[e.chip].ordinal), capture.kernels[e.kernel].name,
              FormatDurationPs((e.begin_ns - origin) * 1000), FormatDurationPs(e.duration_ps),
              f.has_mxu ? absl::StrFormat("%.2f%%", f.mxu_utilization) : "-",
              Pct(f.other_metrics, "HBM Bandwidth Utilization"),
              Pct(f.other_metrics, "VPU Utilization"), Pct(f.other_metrics, "Clocks Skipped"),
              xprof});
  }
  t.Write(out, fit);
  if (executions.empty()) {
    out << "no kernel execution that performance counters counted over (kernel profiling)\n";
  }
}

}  // namespace podprof::cli
