#include "cli/kernel_command.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/exit_codes.h"
#include "cli/report.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "insight/kernel_profile.h"
#include "nlohmann/json.hpp"
#include "report/format.h"
#include "report/mxu.h"
#include "trace/perf_counters.h"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

class KernelCommand : public AggregatorCommand {
 public:
  KernelCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    AddWideFlag(cmd, context.table_fit);
    cmd->add_option("name", options_.op_name, "The kernel's op name, exactly (e.g. fusion.3)")
        ->required();
    cmd->add_option("--capture", options_.capture_id,
                    "Capture to show (default: the newest holding the kernel)");
    cmd->add_option("--module", options_.module,
                    "Module of the kernel, where several modules have one of that name");
    cmd->add_flag("--full", options_.full, "Print the whole HLO and MLIR texts");
    cmd->footer(
        "Examples:\n  podprof kernel fusion.3\n  podprof kernel flash_attention --full\n"
        "  podprof kernel all-gather.1 --capture cap-1796003829474-cf16 --format json");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    options_.format = context.format;
    options_.fit = context.table_fit;
    absl::Status s = RunKernel(client, options_, out);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  KernelOptions options_;
};

// A text block indented by two spaces, cut to `max_lines` (0 = all) with a note.
void Block(const std::string& title, const std::string& text, size_t max_lines, std::ostream& out) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  out << title << " (" << lines.size() << (lines.size() == 1 ? " line" : " lines") << ")\n";
  const size_t n = max_lines == 0 ? lines.size() : std::min(lines.size(), max_lines);
  for (size_t i = 0; i < n; ++i) out << "  " << lines[i] << "\n";
  if (n < lines.size()) out << "  ... " << lines.size() - n << " more lines (--full shows all)\n";
}

// "mxu_busy 72.0%, vpu_busy 15.0%, tpu.runtime.hbm.memory.usage.bytes 2.1e+10"; busy and
// stall fractions as percentages, gauges in percent as they are, others as numbers. Where the
// performance counters measured the MXU (or the VPU), the runtime's mxu_busy (vpu_busy) gauge,
// sampled around the kernel, not in it, is left out: one figure per unit, the counters'.
std::string Gauges(const v1::KernelInsight& in) {
  std::map<std::string, double> sorted(in.utilization().begin(), in.utilization().end());
  if (in.has_kernel_profile()) {
    for (const char* unit : {"mxu", "vpu"}) {
      if (in.kernel_profile().units().count(unit) > 0) sorted.erase(absl::StrCat(unit, "_busy"));
    }
  }
  std::vector<std::string> parts;
  for (const auto& [name, v] : sorted) {
    std::string value;
    if (absl::EndsWith(name, "_busy") || absl::StartsWith(name, "stall")) {
      value = absl::StrFormat("%.1f%%", 100 * v);
    } else if (absl::StrContains(name, "percent")) {
      value = absl::StrFormat("%.1f%%", v);
    } else {
      value = report::FormatSignificant(v, 4);
    }
    parts.push_back(absl::StrCat(name, " ", value));
  }
  return absl::StrJoin(parts, ", ");
}

// Energy counters (nJ running totals) as energy and mean power over the covered time. A row's
// totals and covered time add up over its chips, so the energy is all its chips' while the
// kernel ran and the power (one over the other) a chip's mean.
std::string Energy(const v1::KernelInsight& in, int64_t chips) {
  std::map<std::string, double> sorted(in.totals().begin(), in.totals().end());
  std::vector<std::string> parts;
  for (const auto& [name, v] : sorted) {
    // Performance counters are summed up by the unit figures (WriteProfile).
    if (trace::IsPerfSeries(name)) continue;
    if (absl::EndsWith(name, "_nj") && in.counter_covered_ps() > 0) {
      const double watts = v / (static_cast<double>(in.counter_covered_ps()) / 1000.0);
      parts.push_back(absl::StrFormat("%s %.3g J while it ran, on %d %s; %.0f W mean per chip",
                                      name.substr(0, name.size() - 3), v / 1e9, chips,
                                      chips == 1 ? "chip" : "chips together", watts));
    } else {
      parts.push_back(absl::StrCat(name, " ", report::FormatSignificant(v, 4)));
    }
  }
  return absl::StrJoin(parts, ", ");
}

// The units' busy shares in kUnitNames' order ("mxu 70.1%, vpu 14.6%, ..."), or "-".
std::string UnitsText(const google::protobuf::Map<std::string, double>& units) {
  std::vector<std::string> parts;
  for (const char* unit : insight::kUnitNames) {
    auto it = units.find(unit);
    if (it != units.end()) parts.push_back(absl::StrCat(unit, " ", ShareCell(it->second)));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
}

// The units' busy shares, throttling where the power manager counted it (each die's too), sync
// waits, and why there are no figures where there are none. Nothing is said of throttling
// without the power manager: no other counter measures it.
void WriteProfile(const v1::KernelProfile& p, std::ostream& out) {
  out << "  units busy: " << UnitsText(p.units()) << "\n";
  if (p.power_manager()) {
    std::vector<std::string> dies;
    for (const v1::KernelDieProfile& d : p.dies()) {
      if (d.power_manager())
        dies.push_back(absl::StrCat("die ", d.die(), " ", ShareCell(d.throttled())));
    }
    out << "  power manager: " << ShareCell(p.throttled()) << " of cycles skipped"
        << (dies.empty() ? "" : absl::StrCat(" (", absl::StrJoin(dies, ", "), ")")) << "\n";
  }
  if (p.sync_wait() > 0) out << "  sync waits: " << Percent(p.sync_wait()) << " of its time\n";
  if (!p.missing().empty()) out << "  no utilization figures: " << p.missing() << "\n";
  // A die with figures has its columns in the utilization table (WriteUtilization).
  for (const v1::KernelDieProfile& d : p.dies()) {
    if (!d.missing().empty())
      out << "    die " << d.die() << ": " << d.missing() << ", no figures\n";
  }
}

// A Utilization Viewer count: cycles, instructions or bytes, four digits.
std::string CountCell(double v) { return FormatSignificant(v, 4); }

// XProf's Utilization Viewer rows of a profile over `chips` chips: pooled over the dies (each row's
// achieved and peak summed over them), and beside them each die's own, "-" where a die lacks the
// row.
void WriteUtilization(const v1::KernelProfile& p, int64_t chips, const TableFit& fit,
                      std::ostream& out) {
  if (p.rows().empty()) return;
  out << "\nutilization over " << chips << (chips == 1 ? " chip" : " chips")
      << ", XProf's Utilization Viewer rows (each row's achieved and peak summed over "
      << (p.dies().empty() ? "the chips" : "the chips and their dies; DIE n: die n of each chip")
      << "):\n";
  // Narrow terminals lose the dies' counts first, then the pooled counts; shares stay.
  using Align = TextTable::Align;
  std::vector<TextTable::Column> columns = {{"ROW", Align::kLeft, 44, TextTable::kAlways, 20},
                                            {"UNIT", Align::kLeft, 0, 30},
                                            {"ACHIEVED", Align::kRight, 0, 40},
                                            {"PEAK", Align::kRight, 0, 40},
                                            {"SHARE", Align::kRight}};
  for (const v1::KernelDieProfile& d : p.dies()) {
    for (const auto& [what, priority] : {std::pair{"ACHIEVED", 10}, {"PEAK", 10}, {"SHARE", 50}}) {
      columns.push_back({absl::StrCat("DIE ", d.die(), " ", what), Align::kRight, 0, priority});
    }
  }
  TextTable table(std::move(columns));
  for (const v1::UtilizationRow& r : p.rows()) {
    std::vector<std::string> cells = {r.name(), r.unit(), CountCell(r.achieved()),
                                      CountCell(r.peak()),
                                      ShareCell(r.peak() > 0 ? r.achieved() / r.peak() : 0)};
    for (const v1::KernelDieProfile& d : p.dies()) {
      auto it = std::find_if(d.rows().begin(), d.rows().end(),
                             [&](const v1::UtilizationRow& dr) { return dr.name() == r.name(); });
      if (it == d.rows().end()) {
        cells.insert(cells.end(), {"-", "-", "-"});
      } else {
        cells.insert(cells.end(), {CountCell(it->achieved()), CountCell(it->peak()),
                                   ShareCell(it->peak() > 0 ? it->achieved() / it->peak() : 0)});
      }
    }
    table.AddRow(std::move(cells));
  }
  table.Write(out, fit);
}

// Time in the named scopes inside the kernel, per scope line, the longest few of each.
void WriteScopes(const v1::DescribeKernelResponse& r, int64_t kernel_total_ps, std::ostream& out) {
  std::map<std::string, std::vector<const v1::KernelScopeTime*>> by_line;
  for (const v1::KernelScopeTime& t : r.scopes()) by_line[t.line()].push_back(&t);
  for (const auto& [line, times] : by_line) {
    out << "\n" << line << ":\n";
    TextTable table({{"NAME", TextTable::Align::kLeft, 40},
                     {"COUNT", TextTable::Align::kRight},
                     {"TOTAL", TextTable::Align::kRight},
                     {"SHARE", TextTable::Align::kRight}});
    const size_t n = std::min<size_t>(times.size(), 10);
    for (size_t i = 0; i < n; ++i) {
      const v1::KernelScopeTime& t = *times[i];
      table.AddRow({t.name(), absl::StrCat(t.count()), FormatDurationPs(t.total_ps()),
                    kernel_total_ps > 0 ? Percent(static_cast<double>(t.total_ps()) /
                                                  static_cast<double>(kernel_total_ps))
                                        : "-"});
    }
    table.Write(out);
    if (n < times.size()) out << "  ... " << times.size() - n << " more\n";
  }
}

void WriteStatsLine(const v1::KernelStats& s, std::ostream& out) {
  out << "  " << s.count() << " runs on " << s.chip_count() << " chips, total "
      << FormatDurationPs(s.total_ps()) << ", mean " << FormatDurationPs(std::llround(s.mean_ps()))
      << ", p50 " << FormatDurationPs(s.p50_ps()) << ", p99 " << FormatDurationPs(s.p99_ps())
      << ", max " << FormatDurationPs(s.max_ps()) << "\n";
  const v1::KernelInsight& in = s.insight();
  if (s.kernel().flops() > 0 || s.kernel().bytes_accessed() > 0) {
    out << absl::StrFormat(
        "  %.2f TFLOP/s (%s of peak), %.1f GB/s (%s of HBM peak), %.1f flop/byte against a "
        "ridge of %.0f\n",
        s.achieved_tflops(), Percent(s.fraction_of_peak_flops()), s.achieved_hbm_gbps(),
        Percent(s.fraction_of_peak_hbm()), in.arithmetic_intensity(), in.ridge_point());
  } else {
    out << "  no cost model (flops, bytes) in the capture\n";
  }
  if (in.has_counters()) {
    out << "  counters over " << FormatDurationPs(in.counter_covered_ps()) << ": " << Gauges(in)
        << "\n";
    if (const std::string energy = Energy(in, s.chip_count()); !energy.empty()) {
      out << "  energy: " << energy << "\n";
    }
  } else {
    out << "  no counters in this capture cover it\n";
  }
  if (in.wait_ps() > 0) {
    out << "  waited " << FormatDurationPs(in.wait_ps()) << " in collectives ("
        << Percent(in.wait_fraction()) << " of its time)"
        << (in.straggler().empty() ? "" : ", most often for " + in.straggler()) << "\n";
  }
  if (in.has_kernel_profile()) WriteProfile(in.kernel_profile(), out);
  out << "  verdict: " << (in.verdict_text().empty() ? "-" : in.verdict_text()) << "\n";
}

void WritePerChip(const v1::DescribeKernelResponse& r, const TableFit& fit, std::ostream& out) {
  out << "\nper chip:\n";
  using Align = TextTable::Align;
  constexpr int kAlways = TextTable::kAlways;
  TextTable table({{"HOST", Align::kLeft, 24, kAlways, 12},
                   {"CHIP", Align::kRight},
                   {"VERDICT", Align::kLeft, 28, kAlways, 13},
                   {"COUNT", Align::kRight, 0, 40},
                   {"MEAN", Align::kRight},
                   {"P99", Align::kRight, 0, 70},
                   {"MXU", Align::kRight, 0, 80},
                   {"THROTTLE", Align::kRight, 0, 60},
                   {"SYNC", Align::kRight, 0, 30},
                   {"STALL", Align::kRight, 0, 50},
                   {"WAIT", Align::kRight, 0, 55}});
  MxuSources mxu;
  for (const v1::KernelStats& s : r.per_chip()) mxu.Add(MxuOf(s.insight()));
  for (const v1::KernelStats& s : r.per_chip()) {
    const v1::KernelInsight& in = s.insight();
    const bool p = in.has_kernel_profile();
    table.AddRow(
        {s.host_name(), absl::StrCat(s.chip_ordinal()), VerdictCell(in), absl::StrCat(s.count()),
         FormatDurationPs(std::llround(s.mean_ps())), FormatDurationPs(s.p99_ps()),
         mxu.Cell(MxuOf(in)), ThrottledCell(in), p ? Percent(in.kernel_profile().sync_wait()) : "-",
         in.has_counters() ? Percent(in.stall_fraction()) : "-", Percent(in.wait_fraction())});
  }
  table.Write(out, fit);
  WriteMxuFootnote(mxu, table, fit, out);
}

void WriteHistory(const v1::DescribeKernelResponse& r, const TableFit& fit, std::ostream& out) {
  std::vector<double> means;
  for (const auto& p : r.history()) means.push_back(p.mean_ps());
  out << "\nhistory over " << r.history_size() << " captures (mean): " << Sparkline(means) << "  "
      << FormatDurationPs(std::llround(means.front())) << " -> "
      << FormatDurationPs(std::llround(means.back())) << "\n";
  using Align = TextTable::Align;
  TextTable table({{"CAPTURE", Align::kLeft, 32},
                   {"START", Align::kLeft, 0, 30},
                   {"COUNT", Align::kRight, 0, 40},
                   {"MEAN", Align::kRight},
                   {"P99", Align::kRight, 0, 70},
                   {"TFLOP/S", Align::kRight, 0, 20},
                   {"MXU", Align::kRight, 0, 80}});
  const int first = std::max(0, r.history_size() - 8);
  MxuSources mxu;
  for (int i = first; i < r.history_size(); ++i) mxu.Add(MxuOf(r.history(i)));
  for (int i = first; i < r.history_size(); ++i) {
    const auto& p = r.history(i);
    table.AddRow({p.capture_id(), FormatTimestampNs(p.capture_start_ns()), absl::StrCat(p.count()),
                  FormatDurationPs(std::llround(p.mean_ps())), FormatDurationPs(p.p99_ps()),
                  FormatTflops(p.achieved_tflops()), mxu.Cell(MxuOf(p))});
  }
  table.Write(out, fit);
  WriteMxuFootnote(mxu, table, fit, out);
}

}  // namespace

std::unique_ptr<Command> AddKernelCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<KernelCommand>(
      app.add_subcommand("kernel",
                         "Show one kernel: what it is (HLO, source, MLIR), its statistics and "
                         "verdict in a capture, per chip, and its history"),
      context);
}

absl::Status RunKernel(AggregatorClient& client, const KernelOptions& options, std::ostream& out) {
  v1::DescribeKernelRequest request;
  request.set_op_name(options.op_name);
  request.set_module(options.module);
  request.set_capture_id(options.capture_id);
  v1::DescribeKernelResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::DescribeKernel, request, &response));
  if (options.format == OutputFormat::kJson) {
    WriteJson(KernelJson(response), out);
  } else if (options.format == OutputFormat::kCsv) {
    WriteKernelProfileCsv(response, out);
  } else {
    WriteKernel(response, options, out);
  }
  return FlushOutput(out);
}

void WriteKernel(const v1::DescribeKernelResponse& r, const KernelOptions& options,
                 std::ostream& out) {
  const v1::KernelDef& k = r.kernel();
  out << "kernel " << k.op_name() << "  (module " << (k.module().empty() ? "-" : k.module())
      << ", program " << k.program_id() << ", category " << k.category() << ")\n";
  if (!k.custom_call_target().empty()) {
    out << "custom call  " << k.custom_call_target()
        << (k.custom_call_target() == "tpu_custom_call" ? " (Pallas/Mosaic kernel)" : "") << "\n";
  }
  if (!k.source().empty()) out << "source       " << k.source() << "\n";
  if (!k.tf_op().empty()) out << "op path      " << k.tf_op() << "\n";
  if (!k.source_stack().empty()) {
    std::vector<std::string> frames = absl::StrSplit(k.source_stack(), '\n', absl::SkipEmpty());
    out << "stack        " << absl::StrJoin(frames, " <- ") << "\n";
  }
  const size_t lines = options.full ? 0 : 12;
  if (!k.hlo_text().empty()) Block("HLO", k.hlo_text(), lines, out);
  if (!k.mlir().empty()) Block("MLIR", k.mlir(), options.full ? 0 : 20, out);
  for (const v1::KernelDef& o : r.others()) {
    out << "also named so: module " << o.module() << ", program " << o.program_id()
        << " (--module picks one)\n";
  }
  out << "\nin capture " << r.capture_id() << ":\n";
  WriteStatsLine(r.rollup(), out);
  if (r.rollup().insight().has_kernel_profile()) {
    WriteUtilization(r.rollup().insight().kernel_profile(), r.rollup().chip_count(), options.fit,
                     out);
  }
  if (!r.scopes().empty()) WriteScopes(r, r.rollup().total_ps(), out);
  if (r.per_chip_size() > 1) WritePerChip(r, options.fit, out);
  if (!r.history().empty()) WriteHistory(r, options.fit, out);
}

}  // namespace podprof::cli
