#include "cli/inspect.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/format.h"
#include "common/clock.h"
#include "insight/host_insight.h"
#include "nlohmann/json.hpp"
#include "trace/xspace_reader.h"

namespace podprof::cli {
namespace {

using trace::HostCapture;
using trace::KernelStats;

constexpr int kDefaultTableRows = 25;

std::string ChipLabel(const HostCapture& c, const KernelStats& s) {
  return s.chip == KernelStats::kAllChips ? "*" : absl::StrCat(c.host.chips[s.chip].ordinal);
}

// Peaks to judge a row against: its chip's, or for a roll-up the first chip's when all
// chips agree (a host has one generation), else unknown.
std::pair<double, double> PeaksFor(const HostCapture& c, const KernelStats& s) {
  if (s.chip != KernelStats::kAllChips) {
    return {c.host.chips[s.chip].peak_tflops, c.host.chips[s.chip].peak_hbm_gbps};
  }
  if (c.host.chips.empty()) return {0, 0};
  const trace::Chip& first = c.host.chips.front();
  for (const trace::Chip& chip : c.host.chips) {
    if (chip.peak_tflops != first.peak_tflops || chip.peak_hbm_gbps != first.peak_hbm_gbps) {
      return {0, 0};
    }
  }
  return {first.peak_tflops, first.peak_hbm_gbps};
}

}  // namespace

const char* const kInspectCsvHeader =
    "host,chip,kernel,category,count,total_ps,min_ps,max_ps,mean_ps,p50_ps,p90_ps,p99_ps,flops,"
    "bytes_accessed";

void WriteStatsCsv(const HostCapture& c, const std::vector<KernelStats>& stats, std::ostream& out) {
  out << kInspectCsvHeader << "\n";
  for (const KernelStats& s : stats) {
    const trace::KernelDef& k = c.kernels[s.kernel];
    out << CsvField(c.host.name) << ',' << ChipLabel(c, s) << ',' << CsvField(k.name) << ','
        << CsvField(k.category) << ',' << s.count << ',' << s.total_ps << ',' << s.min_ps << ','
        << s.max_ps << ',' << std::llround(s.mean_ps()) << ',' << s.QuantilePs(0.5) << ','
        << s.QuantilePs(0.9) << ',' << s.QuantilePs(0.99) << ',' << k.flops << ','
        << k.bytes_accessed << "\n";
  }
}

void WriteStatsJson(const HostCapture& c, const std::vector<KernelStats>& stats,
                    std::ostream& out) {
  nlohmann::json j;
  j["host"] = c.host.name;
  j["profile_start_ns"] = c.host.profile_start_ns;
  j["profile_stop_ns"] = c.host.profile_stop_ns;
  j["chips"] = nlohmann::json::array();
  for (const trace::Chip& chip : c.host.chips) {
    j["chips"].push_back({{"ordinal", chip.ordinal},
                          {"kind", chip.kind == trace::DeviceKind::kTpu ? "tpu" : "gpu"},
                          {"global_id", chip.global_id},
                          {"generation", chip.generation},
                          {"device_type", chip.device_type},
                          {"peak_tflops", chip.peak_tflops},
                          {"peak_hbm_gbps", chip.peak_hbm_gbps}});
  }
  j["event_count"] = c.EventCount();
  j["kernels"] = nlohmann::json::array();
  const std::vector<insight::KernelFacts> facts = insight::HostFacts(c, stats);
  for (size_t i = 0; i < stats.size(); ++i) {
    const KernelStats& s = stats[i];
    const trace::KernelDef& k = c.kernels[s.kernel];
    const insight::Verdict v = insight::Decide(facts[i]);
    auto [peak_tflops, peak_gbps] = PeaksFor(c, s);
    trace::KernelRates r = trace::ComputeRates(s, k, peak_tflops, peak_gbps);
    nlohmann::json row = {
        {"chip", s.chip == KernelStats::kAllChips ? nlohmann::json("*")
                                                  : nlohmann::json(c.host.chips[s.chip].ordinal)},
        {"kernel", k.name},
        {"module", k.module},
        {"category", k.category},
        {"program_id", k.program_id},
        {"count", s.count},
        {"total_ps", s.total_ps},
        {"min_ps", s.min_ps},
        {"max_ps", s.max_ps},
        {"mean_ps", s.mean_ps()},
        {"p50_ps", s.QuantilePs(0.5)},
        {"p90_ps", s.QuantilePs(0.9)},
        {"p99_ps", s.QuantilePs(0.99)},
        {"flops", k.flops},
        {"bytes_accessed", k.bytes_accessed},
        {"achieved_tflops", r.achieved_tflops},
        {"achieved_hbm_gbps", r.achieved_hbm_gbps},
        {"fraction_of_peak_flops", r.fraction_of_peak_flops},
        {"fraction_of_peak_hbm", r.fraction_of_peak_hbm},
        {"verdict", insight::BoundName(v.bound)},
        {"verdict_text", v.text},
        {"has_counters", v.has_counters},
    };
    if (v.has_counters) row["utilization"] = facts[i].gauges;
    j["kernels"].push_back(std::move(row));
  }
  j["warnings"] = c.warnings;
  // Kernel names come from the capture and may hold invalid UTF-8: replace, never throw.
  out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void WriteStatsTable(const HostCapture& c, const std::vector<KernelStats>& stats, size_t total_rows,
                     std::ostream& out) {
  out << "host " << c.host.name << ": " << c.host.chips.size() << " chips";
  if (!c.host.chips.empty() && !c.host.chips[0].device_type.empty()) {
    out << " (" << c.host.chips[0].device_type << ")";
  }
  out << ", " << c.kernels.size() << " kernels, " << c.EventCount() << " events";
  if (c.host.profile_stop_ns > c.host.profile_start_ns && c.host.profile_start_ns > 0) {
    out << ", window "
        << FormatDurationPs((c.host.profile_stop_ns - c.host.profile_start_ns) * 1000);
  }
  out << "\n\n";
  const bool by_chip = !stats.empty() && stats[0].chip != KernelStats::kAllChips;
  std::string header =
      absl::StrFormat("%-4s %-32s %-20s %-18s %7s %10s %10s %10s %10s %10s %9s %6s %9s %6s  %s",
                      "CHIP", "KERNEL", "MODULE", "CATEGORY", "COUNT", "TOTAL", "MEAN", "P50",
                      "P99", "MAX", "TFLOP/S", "%PEAK", "GB/S", "%HBM", "VERDICT");
  if (!by_chip) header = header.substr(5);
  out << header << "\n";
  const std::vector<insight::KernelFacts> facts = insight::HostFacts(c, stats);
  for (size_t i = 0; i < stats.size(); ++i) {
    const KernelStats& s = stats[i];
    const trace::KernelDef& k = c.kernels[s.kernel];
    auto [peak_tflops, peak_gbps] = PeaksFor(c, s);
    trace::KernelRates r = trace::ComputeRates(s, k, peak_tflops, peak_gbps);
    std::string line = absl::StrFormat(
        "%-4s %-32s %-20s %-18s %7d %10s %10s %10s %10s %10s %9s %6s %9s %6s", ChipLabel(c, s),
        Truncate(k.name, 32), Truncate(k.module.empty() ? "-" : k.module, 20),
        Truncate(k.category, 18), s.count, FormatDurationPs(s.total_ps),
        FormatDurationPs(std::llround(s.mean_ps())), FormatDurationPs(s.QuantilePs(0.5)),
        FormatDurationPs(s.QuantilePs(0.99)), FormatDurationPs(s.max_ps),
        r.achieved_tflops > 0 ? absl::StrFormat("%.2f", r.achieved_tflops) : "-",
        Percent(r.fraction_of_peak_flops),
        r.achieved_hbm_gbps > 0 ? absl::StrFormat("%.1f", r.achieved_hbm_gbps) : "-",
        Percent(r.fraction_of_peak_hbm));
    absl::StrAppend(&line, "  ", insight::BoundName(insight::Decide(facts[i]).bound));
    if (!by_chip) line = line.substr(5);
    out << line << "\n";
  }
  if (total_rows > stats.size()) {
    out << "... " << total_rows - stats.size() << " more rows (--top 0 shows all)\n";
  }
  for (const std::string& w : c.warnings) out << "warning: " << w << "\n";
}

absl::Status RunInspect(const InspectOptions& options, std::ostream& out) {
  absl::StatusOr<HostCapture> capture = trace::ReadXSpaceFile(options.path);
  if (!capture.ok()) return capture.status();
  GroupBy by = options.by;
  if (!options.by_set)
    by = options.format == OutputFormat::kTable ? GroupBy::kKernel : GroupBy::kChip;
  std::vector<KernelStats> stats = trace::ComputeKernelStats(*capture);
  if (by == GroupBy::kKernel) stats = trace::RollUpByKernel(stats);
  const size_t total_rows = stats.size();
  int top = options.top;
  if (top < 0) top = options.format == OutputFormat::kTable ? kDefaultTableRows : 0;
  if (top > 0 && stats.size() > static_cast<size_t>(top)) stats.resize(top);
  switch (options.format) {
    case OutputFormat::kCsv:
      WriteStatsCsv(*capture, stats, out);
      break;
    case OutputFormat::kJson:
      WriteStatsJson(*capture, stats, out);
      break;
    case OutputFormat::kTable:
      WriteStatsTable(*capture, stats, total_rows, out);
      break;
  }
  return FlushOutput(out);
}

}  // namespace podprof::cli
