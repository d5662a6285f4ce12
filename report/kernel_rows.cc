#include "report/kernel_rows.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/clock.h"
#include "nlohmann/json.hpp"
#include "report/format.h"
#include "report/mxu.h"
#include "report/proto_json.h"

namespace podprof::report {
namespace {

using Json = nlohmann::json;

std::string HostLabel(const v1::KernelStats& s) {
  return s.host_name().empty() ? "*" : s.host_name();
}
std::string ChipLabel(const v1::KernelStats& s) {
  return s.chip_ordinal() < 0 ? "*" : absl::StrCat(s.chip_ordinal());
}
std::string KernelLabel(const v1::KernelStats& s) {
  return s.kernel().op_name().empty() ? "*" : s.kernel().op_name();
}

// A unit's busy share from the kernel's performance counters (kernel profiling); null where
// they did not measure it.
const double* UnitBusy(const v1::KernelInsight& in, const std::string& unit) {
  if (!in.has_kernel_profile()) return nullptr;
  auto it = in.kernel_profile().units().find(unit);
  return it == in.kernel_profile().units().end() ? nullptr : &it->second;
}

std::string PercentOrDash(const double* v) { return v == nullptr ? "-" : Percent(*v); }
std::string CsvOrEmpty(const double* v) { return v == nullptr ? "" : CsvDouble(*v); }

// The kernel-profiling figures beyond the MXU, in the CSV's order (kKernelCsvHeader's tail;
// `vpu` came later and is last, so that older readers' column positions still hold).
const char* const kProfileUnits[] = {"vector_alu", "vector_load", "vector_store",
                                     "scalar_alu", "xlu",         "hbm_bandwidth"};

// The share of clock cycles skipped, where the power manager counted it; null elsewhere, where
// nothing measured throttling (a 0 there would read as "not throttled").
std::optional<double> Throttled(const v1::KernelInsight& in) {
  if (!in.has_kernel_profile() || !in.kernel_profile().power_manager()) return std::nullopt;
  return in.kernel_profile().throttled();
}

// Each Utilization Viewer row with its share beside achieved and peak, as the CSV has it.
void AddShares(Json& rows) {
  for (Json& r : rows) {
    const double peak = r.value("peak", 0.0);
    r["share"] = peak > 0 ? r.value("achieved", 0.0) / peak : 0.0;
  }
}

// Every field of the profile (per die too), as the proto names them, each row with its share.
Json ProfileJson(const v1::KernelProfile& p) {
  Json j = ProtoToJson(p);
  AddShares(j["rows"]);
  for (Json& d : j["dies"]) AddShares(d["rows"]);
  return j;
}

Json InsightJson(const v1::KernelInsight& in) {
  Json j = {{"verdict", in.verdict()},
            {"cause", in.cause()},
            {"verdict_text", in.verdict_text()},
            {"arithmetic_intensity", in.arithmetic_intensity()},
            {"ridge_point", in.ridge_point()},
            {"roofline_fraction", in.roofline_fraction()},
            {"wait_fraction", in.wait_fraction()},
            {"wait_ps", in.wait_ps()},
            {"straggler", in.straggler()},
            {"has_counters", in.has_counters()}};
  if (in.has_counters()) {
    Json u = Json::object(), t = Json::object();
    for (const auto& [k, v] : in.utilization()) u[k] = v;
    for (const auto& [k, v] : in.totals()) t[k] = v;
    j["utilization"] = std::move(u);
    j["totals"] = std::move(t);
    j["stall_fraction"] = in.stall_fraction();
    j["dominant_stall"] = in.dominant_stall();
    j["counter_covered_ps"] = in.counter_covered_ps();
  }
  if (in.has_kernel_profile()) j["kernel_profile"] = ProfileJson(in.kernel_profile());
  return j;
}

}  // namespace

std::string ThrottledCell(const v1::KernelInsight& in) {
  const std::optional<double> t = Throttled(in);
  return t.has_value() ? ShareCell(*t) : "-";
}

std::string ShareCell(double share) { return absl::StrFormat("%.1f%%", 100 * share); }

std::string VerdictCell(const v1::KernelInsight& in) {
  if (!in.cause().empty()) return in.cause();
  return in.verdict().empty() ? "-" : in.verdict();
}

namespace {

// The columns of a kernel table: its identity and verdict first, then the statistics, rates
// and counters. Priorities say which go first when the terminal is narrow (report/table.h):
// the mean, total and MXU stay longest, the vector units and bandwidth go first.
std::vector<TextTable::Column> TableColumns(StatsGrouping by) {
  using Align = TextTable::Align;
  constexpr int kAlways = TextTable::kAlways;
  const bool has_host = by == StatsGrouping::kChip || by == StatsGrouping::kHost;
  const bool has_kernel = by != StatsGrouping::kCategory;
  std::vector<TextTable::Column> columns;
  if (has_host) columns.push_back({"HOST", Align::kLeft, 24, kAlways, 12});
  if (by == StatsGrouping::kChip) columns.push_back({"CHIP", Align::kRight});
  if (has_kernel) {
    columns.push_back({"KERNEL", Align::kLeft, 32, kAlways, 24});
    columns.push_back({"VERDICT", Align::kLeft, 28, kAlways, 13});
    columns.push_back({"MODULE", Align::kLeft, 20, 30});
    columns.push_back({"CATEGORY", Align::kLeft, 18, 35});
  } else {
    columns.push_back({"CATEGORY", Align::kLeft, 32, kAlways, 16});
  }
  const std::pair<const char*, int> figures[] = {
      {"COUNT", 60},   {"TOTAL", 85},    {"MEAN", 90},  {"P50", 40},  {"P99", 70}, {"MAX", 25},
      {"TFLOP/S", 20}, {"%PEAK", 75},    {"GB/S", 15},  {"%HBM", 65}, {"MXU", 80}, {"VALU", 10},
      {"VST", 10},     {"THROTTLE", 62}, {"STALL", 50}, {"WAIT", 55}};
  for (const auto& [header, priority] : figures) {
    columns.push_back({header, Align::kRight, 0, priority});
  }
  return columns;
}

// Statistics, rates and counters of a row: the cells after its identity.
void AddFigureCells(const v1::KernelStats& s, const MxuSources& mxu,
                    std::vector<std::string>& cells) {
  cells.push_back(absl::StrCat(s.count()));
  cells.push_back(FormatDurationPs(s.total_ps()));
  cells.push_back(FormatMeanPs(s.mean_ps()));
  cells.push_back(FormatDurationPs(s.p50_ps()));
  cells.push_back(FormatDurationPs(s.p99_ps()));
  cells.push_back(FormatDurationPs(s.max_ps()));
  // Rates are 0 where they mean nothing (unknown costs, async start/done ops): show "-".
  cells.push_back(FormatTflops(s.achieved_tflops()));
  cells.push_back(Percent(s.fraction_of_peak_flops()));
  cells.push_back(s.achieved_hbm_gbps() > 0 ? absl::StrFormat("%.1f", s.achieved_hbm_gbps()) : "-");
  cells.push_back(Percent(s.fraction_of_peak_hbm()));
  // Counter figures only where counters covered the kernel: "-" is "not measured", not 0.
  const v1::KernelInsight& in = s.insight();
  cells.push_back(mxu.Cell(MxuOf(in)));
  cells.push_back(PercentOrDash(UnitBusy(in, "vector_alu")));
  cells.push_back(PercentOrDash(UnitBusy(in, "vector_store")));
  cells.push_back(ThrottledCell(in));
  cells.push_back(in.has_counters() ? Percent(in.stall_fraction()) : "-");
  cells.push_back(Percent(in.wait_fraction()));
}

}  // namespace

const char* GroupingName(StatsGrouping by) {
  switch (by) {
    case StatsGrouping::kKernel:
      return "kernel";
    case StatsGrouping::kChip:
      return "chip";
    case StatsGrouping::kHost:
      return "host";
    case StatsGrouping::kCategory:
      return "category";
  }
  return "kernel";
}

const char* const kKernelCsvHeader =
    "capture,host,chip,kernel,module,category,count,total_ps,min_ps,max_ps,mean_ps,p50_ps,p90_ps,"
    "p99_ps,flops,bytes_accessed,achieved_tflops,fraction_of_peak_flops,achieved_hbm_gbps,"
    "fraction_of_peak_hbm,mxu_busy,stall_fraction,wait_fraction,verdict,vector_alu,vector_load,"
    "vector_store,scalar_alu,xlu,hbm_bandwidth,throttled,sync_wait,cause,vpu";

void WriteKernelRowsCsv(absl::string_view source, const KernelRows& rows, std::ostream& out) {
  out << kKernelCsvHeader << "\n";
  for (const v1::KernelStats& s : rows) {
    const v1::KernelInsight& in = s.insight();
    const MxuFigure mxu = MxuOf(in);
    out << CsvField(source) << ',' << CsvField(HostLabel(s)) << ',' << ChipLabel(s) << ','
        << CsvField(KernelLabel(s)) << ',' << CsvField(s.kernel().module()) << ','
        << CsvField(s.kernel().category()) << ',' << s.count() << ',' << s.total_ps() << ','
        << s.min_ps() << ',' << s.max_ps() << ',' << std::llround(s.mean_ps()) << ',' << s.p50_ps()
        << ',' << s.p90_ps() << ',' << s.p99_ps() << ',' << s.kernel().flops() << ','
        << s.kernel().bytes_accessed() << ',' << CsvDouble(s.achieved_tflops()) << ','
        << CsvDouble(s.fraction_of_peak_flops()) << ',' << CsvDouble(s.achieved_hbm_gbps()) << ','
        << CsvDouble(s.fraction_of_peak_hbm()) << ',' << (mxu.known() ? CsvDouble(mxu.busy) : "")
        << ',' << (in.has_counters() ? CsvDouble(in.stall_fraction()) : "") << ','
        << CsvDouble(in.wait_fraction()) << ',' << CsvField(in.verdict());
    for (const char* unit : kProfileUnits) out << ',' << CsvOrEmpty(UnitBusy(in, unit));
    const bool p = in.has_kernel_profile();
    out << ',' << (Throttled(in).has_value() ? CsvDouble(*Throttled(in)) : "") << ','
        << (p ? CsvDouble(in.kernel_profile().sync_wait()) : "") << ',' << CsvField(in.cause())
        << ',' << CsvOrEmpty(UnitBusy(in, "vpu")) << "\n";
  }
}

Json KernelRowJson(const v1::KernelStats& s) {
  return {{"host", HostLabel(s)},
          {"chip", s.chip_ordinal() < 0 ? Json("*") : Json(s.chip_ordinal())},
          {"kernel", KernelLabel(s)},
          {"module", s.kernel().module()},
          {"category", s.kernel().category()},
          // Ids as strings: as JSON numbers a browser would round them (proto_json.h).
          {"kernel_id", absl::StrCat(s.kernel().kernel_id())},
          {"program_id", absl::StrCat(s.kernel().program_id())},
          {"count", s.count()},
          {"total_ps", s.total_ps()},
          {"min_ps", s.min_ps()},
          {"max_ps", s.max_ps()},
          {"mean_ps", s.mean_ps()},
          {"p50_ps", s.p50_ps()},
          {"p90_ps", s.p90_ps()},
          {"p99_ps", s.p99_ps()},
          {"flops", s.kernel().flops()},
          {"bytes_accessed", s.kernel().bytes_accessed()},
          {"chip_count", s.chip_count()},
          {"achieved_tflops", s.achieved_tflops()},
          {"achieved_hbm_gbps", s.achieved_hbm_gbps()},
          {"fraction_of_peak_flops", s.fraction_of_peak_flops()},
          {"fraction_of_peak_hbm", s.fraction_of_peak_hbm()},
          {"insight", InsightJson(s.insight())}};
}

Json KernelRowsJson(const KernelRows& rows) {
  Json j = Json::array();
  for (const v1::KernelStats& s : rows) j.push_back(KernelRowJson(s));
  return j;
}

void WriteKernelRowsTable(const KernelRows& rows, StatsGrouping by, std::ostream& out,
                          const TableFit& fit) {
  const bool has_kernel = by != StatsGrouping::kCategory;
  MxuSources mxu;
  for (const v1::KernelStats& s : rows) mxu.Add(MxuOf(s.insight()));
  TextTable table(TableColumns(by));
  for (const v1::KernelStats& s : rows) {
    std::vector<std::string> cells;
    if (by == StatsGrouping::kChip || by == StatsGrouping::kHost) cells.push_back(HostLabel(s));
    if (by == StatsGrouping::kChip) cells.push_back(ChipLabel(s));
    if (has_kernel) {
      cells.push_back(KernelLabel(s));
      cells.push_back(VerdictCell(s.insight()));
      cells.push_back(s.kernel().module().empty() ? "-" : s.kernel().module());
    }
    cells.push_back(s.kernel().category().empty() ? "-" : s.kernel().category());
    AddFigureCells(s, mxu, cells);
    table.AddRow(std::move(cells));
  }
  table.Write(out, fit);
  WriteMxuFootnote(mxu, table, fit, out);
}

const char* const kKernelProfileCsvHeader =
    "capture,kernel,module,host,chip,die,row,unit,achieved,peak,share,missing";

namespace {

// One kernel row's Utilization Viewer rows: pooled (die `*`), then each die's, a die without
// figures as one line with only its reason.
void WriteProfileRowsCsv(const std::string& lead, const v1::KernelProfile& p, std::ostream& out) {
  auto rows = [&](const std::string& die,
                  const google::protobuf::RepeatedPtrField<v1::UtilizationRow>& rs) {
    for (const v1::UtilizationRow& r : rs) {
      out << lead << ',' << die << ',' << CsvField(r.name()) << ',' << CsvField(r.unit()) << ','
          << CsvDouble(r.achieved()) << ',' << CsvDouble(r.peak()) << ','
          << CsvDouble(r.peak() > 0 ? r.achieved() / r.peak() : 0) << ",\n";
    }
  };
  if (!p.missing().empty()) out << lead << ",*,,,,,," << CsvField(p.missing()) << "\n";
  rows("*", p.rows());
  for (const v1::KernelDieProfile& d : p.dies()) {
    if (!d.missing().empty()) {
      out << lead << ',' << d.die() << ",,,,,," << CsvField(d.missing()) << "\n";
    }
    rows(absl::StrCat(d.die()), d.rows());
  }
}

}  // namespace

void WriteKernelProfileCsv(const v1::DescribeKernelResponse& r, std::ostream& out) {
  out << kKernelProfileCsvHeader << "\n";
  const std::string kernel =
      absl::StrCat(CsvField(r.capture_id()), ",", CsvField(r.kernel().op_name()), ",",
                   CsvField(r.kernel().module()));
  auto write = [&](const v1::KernelStats& s) {
    if (!s.insight().has_kernel_profile()) return;
    WriteProfileRowsCsv(absl::StrCat(kernel, ",", CsvField(HostLabel(s)), ",", ChipLabel(s)),
                        s.insight().kernel_profile(), out);
  };
  write(r.rollup());
  for (const v1::KernelStats& s : r.per_chip()) write(s);
}

nlohmann::json KernelJson(const v1::DescribeKernelResponse& r) {
  nlohmann::json others = nlohmann::json::array();
  for (const v1::KernelDef& o : r.others()) others.push_back(ProtoToJson(o));
  nlohmann::json history = nlohmann::json::array();
  for (const auto& p : r.history()) history.push_back(ProtoToJson(p));
  nlohmann::json scopes = nlohmann::json::array();
  for (const auto& t : r.scopes()) scopes.push_back(ProtoToJson(t));
  return {{"capture_id", r.capture_id()},        {"kernel", ProtoToJson(r.kernel())},
          {"rollup", KernelRowJson(r.rollup())}, {"per_chip", KernelRowsJson(r.per_chip())},
          {"history", std::move(history)},       {"others", std::move(others)},
          {"scopes", std::move(scopes)}};
}

}  // namespace podprof::report
