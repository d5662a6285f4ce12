#include "insight/kernel_utilization.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "insight/attribution.h"
#include "trace/chip_catalog.h"
#include "trace/perf_counters.h"

namespace podprof::insight {
namespace {

// The rows kernel_utilization shows apart from other_metrics, and its name for HBM Rd+Wr.
constexpr char kAvgMxu[] = "Avg MXU Busy";
constexpr char kHbm[] = "HBM Rd+Wr";
constexpr char kHbmXprof[] = "HBM Bandwidth Utilization";

// The MXU precision rows and the breakdown's names for them (v6e counts FP8 with BF16).
constexpr std::pair<const char*, const char*> kPrecisions[] = {
    {"MXU BF16", "BF16"}, {"MXU E4M3 + E5M2", "FP8"}, {"MXU I8", "Int8"}, {"MXU I4", "Int4"}};

bool IsPrecisionRow(const std::string& name) {
  for (const auto& [row, label] : kPrecisions) {
    if (name == row) return true;
  }
  return false;
}

// A chip's perf series, integrated.
struct ChipSeries {
  std::vector<const trace::CounterSeries*> series;
  std::vector<SeriesIntegral> integrals;
};

// One execution's counts: each series' increase across [begin_ps, end_ps) (ps since each
// series' origin is taken from `base_ns`), and the time some series covered.
std::map<std::string, double> CountsOver(const ChipSeries& s, int64_t base_ns, int64_t begin_ps,
                                         int64_t end_ps, std::vector<size_t>* cursors,
                                         int64_t* covered_ps) {
  std::map<std::string, double> totals;
  *covered_ps = 0;
  for (size_t k = 0; k < s.integrals.size(); ++k) {
    const SeriesIntegral& in = s.integrals[k];
    const int64_t shift = (base_ns - in.origin_ns()) * 1000;
    int64_t covered = 0;
    const double v = in.Over(shift + begin_ps, shift + end_ps, &covered, &(*cursors)[k]);
    if (covered <= 0) continue;
    totals[s.series[k]->name] += v;
    *covered_ps = std::max(*covered_ps, covered);
  }
  return totals;
}

bool AnyCounted(const std::map<std::string, double>& totals) {
  for (const auto& [name, v] : totals) {
    if (v > 0) return true;
  }
  return false;
}

// XProf's rows for one execution when they differ from the measured ones.
void AddXprofView(const trace::ChipGeneration& g, const std::map<std::string, double>& totals,
                  ExecutionUtilization* e) {
  const double nominal = static_cast<double>(e->duration_ps) * 1e-12 * g.tc_clock_hz;
  std::vector<int> dies;
  std::vector<UtilizationRow> rows = XprofPooledRows(g, totals, nominal, &dies);
  if (dies.empty()) return;
  e->xprof_rows = std::move(rows);
  e->xprof_differs = absl::StrFormat(
      "XProf's kernel_utilization counts die %s, which has no cycle count, as idle for the "
      "execution's %.0f nominal cycles (its time at %.2f GHz)",
      absl::StrJoin(dies, " and "), nominal, g.tc_clock_hz * 1e-9);
}

}  // namespace

XprofFigures XprofFiguresOf(const std::vector<UtilizationRow>& pooled_rows) {
  XprofFigures f;
  double mxu_cycles = 0;
  for (const UtilizationRow& r : pooled_rows) {
    if (IsPrecisionRow(r.name)) mxu_cycles += r.achieved;
  }
  for (const UtilizationRow& r : pooled_rows) {
    if (r.peak <= 0) continue;
    if (r.name == kAvgMxu) {
      f.mxu_utilization = 100 * r.Share();
      f.has_mxu = true;
    } else if (IsPrecisionRow(r.name)) {
      for (const auto& [row, label] : kPrecisions) {
        if (r.name == row && mxu_cycles > 0)
          f.mxu_cycles_breakdown[label] = 100 * r.achieved / mxu_cycles;
      }
    } else {
      f.other_metrics[r.name == kHbm ? kHbmXprof : r.name] = 100 * r.Share();
    }
  }
  return f;
}

std::vector<ExecutionUtilization> ExecutionUtilizations(const trace::HostCapture& capture) {
  std::map<int, ChipSeries> chips;
  for (const trace::CounterSeries& s : capture.counters) {
    if (!trace::IsPerfSeries(s.name)) continue;
    SeriesIntegral integral(s);
    if (integral.empty()) continue;
    ChipSeries& c = chips[s.chip];
    c.series.push_back(&s);
    c.integrals.push_back(std::move(integral));
  }
  std::vector<ExecutionUtilization> out;
  for (const auto& [chip, series] : chips) {
    const trace::ChipGeneration* g =
        trace::FindGenerationByName(capture.host.chips[chip].generation);
    for (const trace::EventBlock& b : capture.blocks) {
      if (b.chip != chip || !trace::IsKernelLine(b.kind)) continue;
      std::vector<size_t> cursors(series.integrals.size(), 0);
      for (size_t i = 0; i < b.size(); ++i) {
        int64_t covered = 0;
        const std::map<std::string, double> totals = CountsOver(
            series, b.base_ns, b.start_ps[i], b.start_ps[i] + b.duration_ps[i], &cursors, &covered);
        if (!AnyCounted(totals)) continue;
        ExecutionUtilization e;
        e.chip = chip;
        e.kernel = b.kernel[i];
        e.begin_ns = b.base_ns + b.start_ps[i] / 1000;
        e.duration_ps = b.duration_ps[i];
        e.profile = ProfileFromCounters(g, totals, covered, 0, b.duration_ps[i]);
        if (g != nullptr && (g->name == "v6e" || g->name == "v7x")) AddXprofView(*g, totals, &e);
        out.push_back(std::move(e));
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.chip, a.begin_ns) < std::tie(b.chip, b.begin_ns);
  });
  return out;
}

}  // namespace podprof::insight
