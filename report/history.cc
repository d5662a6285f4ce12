#include "report/history.h"

#include <cmath>

#include "report/format.h"
#include "report/mxu.h"

namespace podprof::report {

const char* const kHistoryCsvHeader =
    "kernel,module,capture,start_ns,count,mean_ps,p50_ps,p90_ps,p99_ps,total_ps,achieved_tflops,"
    "regression";

void WriteHistoryCsv(const v1::KernelHistoryResponse& response, std::ostream& out) {
  out << kHistoryCsvHeader << "\n";
  for (const v1::KernelHistorySeries& series : response.series()) {
    for (const v1::KernelHistoryPoint& p : series.points()) {
      out << CsvField(series.kernel().op_name()) << ',' << CsvField(series.kernel().module()) << ','
          << CsvField(p.capture_id()) << ',' << p.capture_start_ns() << ',' << p.count() << ','
          << std::llround(p.mean_ps()) << ',' << p.p50_ps() << ',' << p.p90_ps() << ','
          << p.p99_ps() << ',' << p.total_ps() << ',' << CsvDouble(p.achieved_tflops()) << ','
          << (p.regression() ? "true" : "false") << "\n";
    }
  }
}

nlohmann::json HistoryJson(const v1::KernelHistoryResponse& response) {
  nlohmann::json j = nlohmann::json::array();
  for (const v1::KernelHistorySeries& series : response.series()) {
    nlohmann::json points = nlohmann::json::array();
    for (const v1::KernelHistoryPoint& p : series.points()) {
      points.push_back({{"capture", p.capture_id()},
                        {"start_ns", p.capture_start_ns()},
                        {"count", p.count()},
                        {"mean_ps", p.mean_ps()},
                        {"p50_ps", p.p50_ps()},
                        {"p90_ps", p.p90_ps()},
                        {"p99_ps", p.p99_ps()},
                        {"total_ps", p.total_ps()},
                        {"chip_count", p.chip_count()},
                        {"achieved_tflops", p.achieved_tflops()},
                        {"regression", p.regression()}});
      if (const MxuFigure mxu = MxuOf(p); mxu.known()) {
        points.back()["mxu"] = mxu.busy;
        points.back()["mxu_source"] = MxuSourceName(mxu.source);
      }
    }
    j.push_back({{"kernel", series.kernel().op_name()},
                 {"module", series.kernel().module()},
                 {"category", series.kernel().category()},
                 {"points", std::move(points)}});
  }
  return j;
}

nlohmann::ordered_json HistoryRowsJson(const v1::KernelHistoryResponse& response) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const v1::KernelHistorySeries& series : response.series()) {
    for (const v1::KernelHistoryPoint& p : series.points()) {
      rows.push_back({{"kernel", series.kernel().op_name()},
                      {"module", series.kernel().module()},
                      {"capture", p.capture_id()},
                      {"start_ns", p.capture_start_ns()},
                      {"count", p.count()},
                      {"mean_ps", std::llround(p.mean_ps())},
                      {"p50_ps", p.p50_ps()},
                      {"p90_ps", p.p90_ps()},
                      {"p99_ps", p.p99_ps()},
                      {"total_ps", p.total_ps()},
                      {"achieved_tflops", p.achieved_tflops()},
                      {"regression", p.regression()}});
    }
  }
  return rows;
}

}  // namespace podprof::report
