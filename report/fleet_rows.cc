#include "report/fleet_rows.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "report/format.h"
#include "report/table.h"

namespace podprof::report {
namespace {

using Col = TextTable::Column;
using A = TextTable::Align;

double MeanPs(int64_t total_ps, int64_t count) {
  return count > 0 ? static_cast<double>(total_ps) / static_cast<double>(count) : 0;
}
int64_t RoundedMeanPs(int64_t total_ps, int64_t count) {
  return std::llround(MeanPs(total_ps, count));
}

}  // namespace

const char* const kFleetHistoryCsvHeader =
    "pod,kernel,module,capture,start_ns,count,chips,mean_ps,p50_ps,p90_ps,p99_ps,total_ps";
const char* const kFleetTopCsvHeader =
    "pod,host,module,kernel,count,total_ps,captures,pods,mean_ps,p50_ps,p99_ps";
const char* const kFleetRegressionsCsvHeader =
    "pod,kernel,module,baseline_captures,candidate_captures,baseline_p50_ps,candidate_p50_ps,"
    "baseline_p99_ps,candidate_p99_ps,p50_change,p99_change,p50_regressed,p99_regressed";

void WriteFleetHistoryCsv(const std::vector<FleetHistoryRow>& rows, std::ostream& out) {
  out << kFleetHistoryCsvHeader << "\n";
  for (const FleetHistoryRow& p : rows) {
    out << CsvField(p.pod) << ',' << CsvField(p.kernel) << ',' << CsvField(p.module) << ','
        << CsvField(p.capture) << ',' << p.start_ns << ',' << p.count << ',' << p.chips << ','
        << RoundedMeanPs(p.total_ps, p.count) << ',' << p.p50_ps << ',' << p.p90_ps << ','
        << p.p99_ps << ',' << p.total_ps << "\n";
  }
}

nlohmann::json FleetHistoryJson(const std::vector<FleetHistoryRow>& rows) {
  nlohmann::json list = nlohmann::json::array();
  for (const FleetHistoryRow& p : rows) {
    list.push_back({{"pod", p.pod},
                    {"module", p.module},
                    {"kernel", p.kernel},
                    {"capture", p.capture},
                    {"start_ns", p.start_ns},
                    {"count", p.count},
                    {"chips", p.chips},
                    {"total_ps", p.total_ps},
                    {"mean_ps", RoundedMeanPs(p.total_ps, p.count)},
                    {"p50_ps", p.p50_ps},
                    {"p90_ps", p.p90_ps},
                    {"p99_ps", p.p99_ps}});
  }
  return list;
}

void WriteFleetHistoryTable(const std::vector<FleetHistoryRow>& rows, std::ostream& out) {
  TextTable t({Col{"KERNEL", A::kLeft, 40}, Col{"POD"}, Col{"CAPTURE"}, Col{"STARTED"},
               Col{"CALLS", A::kRight}, Col{"MEAN", A::kRight}, Col{"P50", A::kRight},
               Col{"P99", A::kRight}});
  for (const FleetHistoryRow& p : rows) {
    t.AddRow({p.kernel, p.pod, p.capture, FormatTimestampNs(p.start_ns), absl::StrCat(p.count),
              FormatMeanPs(MeanPs(p.total_ps, p.count)), FormatDurationPs(p.p50_ps),
              FormatDurationPs(p.p99_ps)});
  }
  out << CountOf(rows.size(), "point") << "\n";
  if (t.rows() > 0) {
    out << "\n";
    t.Write(out);
  }
}

void WriteFleetTopCsv(const std::vector<FleetTopRow>& rows, std::ostream& out) {
  out << kFleetTopCsvHeader << "\n";
  for (const FleetTopRow& r : rows) {
    out << CsvField(r.pod) << ',' << CsvField(r.host) << ',' << CsvField(r.module) << ','
        << CsvField(r.kernel) << ',' << r.count << ',' << r.total_ps << ',' << r.captures << ','
        << r.pods << ',' << RoundedMeanPs(r.total_ps, r.count) << ',' << r.p50_ps << ',' << r.p99_ps
        << "\n";
  }
}

nlohmann::json FleetTopJson(const std::vector<FleetTopRow>& rows) {
  nlohmann::json list = nlohmann::json::array();
  for (const FleetTopRow& r : rows) {
    list.push_back({{"pod", r.pod},
                    {"host", r.host},
                    {"module", r.module},
                    {"kernel", r.kernel},
                    {"count", r.count},
                    {"total_ps", r.total_ps},
                    {"captures", r.captures},
                    {"pods", r.pods},
                    {"mean_ps", RoundedMeanPs(r.total_ps, r.count)},
                    {"p50_ps", r.p50_ps},
                    {"p99_ps", r.p99_ps}});
  }
  return list;
}

void WriteFleetTopTable(const std::vector<FleetTopRow>& rows, const std::string& by,
                        std::ostream& out) {
  auto name = [&](const FleetTopRow& r) {
    return by == "kernel" ? r.kernel : by == "pod" ? r.pod : absl::StrCat(r.pod, "/", r.host);
  };
  TextTable t({Col{absl::AsciiStrToUpper(by), A::kLeft, 48}, Col{"TOTAL", A::kRight},
               Col{"CALLS", A::kRight}, Col{"MEAN", A::kRight}, Col{"P50", A::kRight},
               Col{"P99", A::kRight}, Col{"CAPTURES", A::kRight}, Col{"PODS", A::kRight}});
  for (const FleetTopRow& r : rows) {
    t.AddRow({name(r), FormatDurationPs(r.total_ps), absl::StrCat(r.count),
              FormatMeanPs(MeanPs(r.total_ps, r.count)), FormatDurationPs(r.p50_ps),
              FormatDurationPs(r.p99_ps), absl::StrCat(r.captures), absl::StrCat(r.pods)});
  }
  t.Write(out);
}

void WriteFleetRegressionsCsv(const std::vector<FleetRegressionRow>& rows, std::ostream& out) {
  out << kFleetRegressionsCsvHeader << "\n";
  for (const FleetRegressionRow& r : rows) {
    out << CsvField(r.pod) << ',' << CsvField(r.kernel) << ',' << CsvField(r.module) << ','
        << r.baseline_captures << ',' << r.candidate_captures << ',' << r.baseline_p50_ps << ','
        << r.candidate_p50_ps << ',' << r.baseline_p99_ps << ',' << r.candidate_p99_ps << ','
        << CsvDouble(r.p50_change) << ',' << CsvDouble(r.p99_change) << ','
        << (r.p50_regressed ? 1 : 0) << ',' << (r.p99_regressed ? 1 : 0) << "\n";
  }
}

nlohmann::json FleetRegressionsJson(const std::vector<FleetRegressionRow>& rows) {
  nlohmann::json list = nlohmann::json::array();
  for (const FleetRegressionRow& r : rows) {
    list.push_back({{"pod", r.pod},
                    {"module", r.module},
                    {"kernel", r.kernel},
                    {"baseline_captures", r.baseline_captures},
                    {"candidate_captures", r.candidate_captures},
                    {"baseline_p50_ps", r.baseline_p50_ps},
                    {"candidate_p50_ps", r.candidate_p50_ps},
                    {"baseline_p99_ps", r.baseline_p99_ps},
                    {"candidate_p99_ps", r.candidate_p99_ps},
                    {"p50_change", r.p50_change},
                    {"p99_change", r.p99_change},
                    {"p50_regressed", r.p50_regressed},
                    {"p99_regressed", r.p99_regressed}});
  }
  return list;
}

void WriteFleetRegressionsTable(const std::vector<FleetRegressionRow>& rows, std::ostream& out) {
  TextTable t({Col{"KERNEL", A::kLeft, 40}, Col{"POD"}, Col{"P50", A::kRight},
               Col{"CHANGE", A::kRight}, Col{"P99", A::kRight}, Col{"CHANGE", A::kRight},
               Col{"CAPTURES", A::kRight}, Col{"VERDICT"}});
  int regressed = 0;
  for (const FleetRegressionRow& r : rows) {
    const bool bad = r.p50_regressed || r.p99_regressed;
    regressed += bad ? 1 : 0;
    t.AddRow({r.kernel, r.pod,
              absl::StrCat(FormatDurationPs(r.baseline_p50_ps), " -> ",
                           FormatDurationPs(r.candidate_p50_ps)),
              FormatChange(r.p50_change),
              absl::StrCat(FormatDurationPs(r.baseline_p99_ps), " -> ",
                           FormatDurationPs(r.candidate_p99_ps)),
              FormatChange(r.p99_change),
              absl::StrCat(r.baseline_captures, "+", r.candidate_captures),
              bad ? (r.p50_regressed ? "REGRESSED (p50)" : "REGRESSED (p99)") : "ok"});
  }
  out << regressed << " of " << CountOf(rows.size(), "kernel") << " regressed\n";
  if (t.rows() > 0) {
    out << "\n";
    t.Write(out);
  }
}

}  // namespace podprof::report
