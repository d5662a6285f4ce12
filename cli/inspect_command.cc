#include "cli/inspect_command.h"

#include <map>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "cli/exit_codes.h"
#include "cli/kernel_executions.h"
#include "cli/one_of.h"
#include "common/clock.h"
#include "insight/dcn.h"
#include "insight/host_insight.h"
#include "insight/insight_proto.h"
#include "insight/kernel_utilization.h"
#include "nlohmann/json.hpp"
#include "report/dcn_rows.h"
#include "trace/xspace_reader.h"

namespace podprof::cli {
namespace {

using trace::HostCapture;
using trace::KernelStats;

class InspectCommand : public Command {
 public:
  InspectCommand(CLI::App* cmd, CliContext& context) : Command(cmd) {
    cmd->add_option("file", options_.path, "XSpace capture file")->required();
    cmd->add_option("--top", options_.top,
                    "Show only the N kernels with the most total time (0 = all; default 25 for "
                    "the table, all for csv and json)");
    by_ = cmd->add_option("--by", by_value_,
                          "Rows per chip and kernel (chip) or per kernel across chips (kernel); "
                          "default kernel for the table, chip for csv and json")
              ->transform(OneOf<StatsGrouping>(
                  {{"chip", StatsGrouping::kChip}, {"kernel", StatsGrouping::kKernel}}))
              ->option_text("chip|kernel");
    cmd->add_flag("--executions", options_.executions,
                  "One row per kernel execution that performance counters counted over "
                  "(kernel profiling), with the figures XProf's per-kernel tool "
                  "(kernel_utilization) shows; json in that tool's shape");
    cmd->add_flag("--megascale", options_.megascale,
                  "The host's cross-slice (DCN) transfers per rendezvous, with the figures "
                  "XProf's megascale_stats computes for this host (chip 0, this file's clock): "
                  "slack, observed, stall, occurrences, and the recv stall as XProf shows it "
                  "and corrected");
    AddFormatFlag(cmd, context.format);
    AddWideFlag(cmd, context.table_fit);
    cmd->footer(
        "Examples:\n  podprof inspect host0.xplane.pb\n"
        "  podprof inspect host0.xplane.pb --by chip --format csv > kernels.csv\n"
        "  podprof inspect host0.xplane.pb --executions --format json\n"
        "  podprof inspect host0.xplane.pb --megascale");
  }

  int Run(CliContext& context, std::ostream& out, std::ostream& err) override {
    if (by_->count() > 0) options_.by = by_value_;
    options_.format = context.format;
    options_.fit = context.table_fit;
    absl::Status s = RunInspect(options_, out);
    return s.ok() ? 0 : Fail(err, "inspect", s, kExitBadInput);
  }

 private:
  InspectOptions options_;
  StatsGrouping by_value_ = StatsGrouping::kKernel;
  CLI::Option* by_ = nullptr;
};

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

// How many chips ran each kernel, from per-chip statistics.
std::map<uint32_t, uint32_t> ChipsPerKernel(const std::vector<KernelStats>& per_chip) {
  std::map<uint32_t, uint32_t> counts;
  for (const KernelStats& s : per_chip) ++counts[s.kernel];
  return counts;
}

// The host, its chips, and the kernels that ran (its rows' kernels: a module also defines
// kernels that did not run in the window, which have no row).
void WriteSummary(const HostCapture& c, size_t kernels_run, std::ostream& out) {
  out << "host " << c.host.name << ": " << c.host.chips.size() << " chips";
  if (!c.host.chips.empty() && !c.host.chips[0].device_type.empty()) {
    out << " (" << c.host.chips[0].device_type << ")";
  }
  out << ", " << CountOf(kernels_run, "kernel");
  if (c.kernels.size() > kernels_run) {
    out << " (" << c.kernels.size() - kernels_run << " more defined, not run)";
  }
  out << ", " << c.EventCount() << " events";
  if (c.host.profile_stop_ns > c.host.profile_start_ns && c.host.profile_start_ns > 0) {
    out << ", window "
        << FormatDurationPs((c.host.profile_stop_ns - c.host.profile_start_ns) * 1000);
  }
  out << "\n\n";
}

nlohmann::json HostJson(const HostCapture& c, const KernelRows& rows) {
  nlohmann::json chips = nlohmann::json::array();
  for (const trace::Chip& chip : c.host.chips) {
    chips.push_back({{"ordinal", chip.ordinal},
                     {"kind", chip.kind == trace::DeviceKind::kTpu   ? "tpu"
                              : chip.kind == trace::DeviceKind::kCpu ? "cpu"
                                                                     : "gpu"},
                     {"global_id", chip.global_id},
                     {"generation", chip.generation},
                     {"device_type", chip.device_type},
                     {"peak_tflops", chip.peak_tflops},
                     {"peak_hbm_gbps", chip.peak_hbm_gbps}});
  }
  return {{"host", c.host.name},
          {"profile_start_ns", c.host.profile_start_ns},
          {"profile_stop_ns", c.host.profile_stop_ns},
          {"chips", std::move(chips)},
          {"event_count", c.EventCount()},
          {"kernels", KernelRowsJson(rows)},
          {"warnings", c.warnings}};
}

// The rows of `stats` (per chip, or rolled up over the host's chips) with their rates against
// the chips' peaks and their verdicts, as the aggregator's API gives them.
KernelRows InspectRows(const HostCapture& c, const std::vector<KernelStats>& stats,
                       const std::map<uint32_t, uint32_t>& chips,
                       std::vector<std::string>* warnings) {
  const std::vector<insight::KernelFacts> facts = insight::HostFacts(c, stats, warnings);
  KernelRows rows;
  for (size_t i = 0; i < stats.size(); ++i) {
    const KernelStats& s = stats[i];
    const trace::KernelDef& k = c.kernels[s.kernel];
    v1::KernelStats& row = *rows.Add();
    row.set_host_name(c.host.name);
    row.set_chip_ordinal(s.chip == KernelStats::kAllChips ? -1 : c.host.chips[s.chip].ordinal);
    v1::KernelDef& def = *row.mutable_kernel();
    def.set_op_name(k.name);
    def.set_module(k.module);
    def.set_category(k.category);
    def.set_program_id(k.program_id);
    def.set_flops(k.flops);
    def.set_bytes_accessed(k.bytes_accessed);
    row.set_count(s.count);
    row.set_total_ps(s.total_ps);
    row.set_min_ps(s.min_ps);
    row.set_max_ps(s.max_ps);
    row.set_mean_ps(s.mean_ps());
    row.set_p50_ps(s.QuantilePs(0.5));
    row.set_p90_ps(s.QuantilePs(0.9));
    row.set_p99_ps(s.QuantilePs(0.99));
    row.set_chip_count(s.chip == KernelStats::kAllChips ? chips.at(s.kernel) : 1);
    auto [peak_tflops, peak_gbps] = PeaksFor(c, s);
    const trace::KernelRates r = trace::ComputeRates(s, k, peak_tflops, peak_gbps);
    row.set_achieved_tflops(r.achieved_tflops);
    row.set_achieved_hbm_gbps(r.achieved_hbm_gbps);
    row.set_fraction_of_peak_flops(r.fraction_of_peak_flops);
    row.set_fraction_of_peak_hbm(r.fraction_of_peak_hbm);
    insight::VerdictToProto(facts[i], insight::Decide(facts[i]), row.mutable_insight());
  }
  return rows;
}

absl::Status WriteExecutions(const InspectOptions& options, const HostCapture& c,
                             std::ostream& out) {
  const std::vector<insight::ExecutionUtilization> runs = insight::ExecutionUtilizations(c);
  switch (options.format) {
    case OutputFormat::kJson:
      WriteJson(KernelExecutionsJson(c, runs), out);
      break;
    case OutputFormat::kCsv:
      return absl::InvalidArgumentError("--executions writes a table or json, not csv");
    case OutputFormat::kTable:
      WriteSummary(c, c.kernels.size(), out);
      WriteKernelExecutionsTable(c, runs, options.fit, out);
      for (const std::string& w : c.warnings) out << "warning: " << w << "\n";
      break;
  }
  return FlushOutput(out);
}

// XProf's megascale_stats figures for this one host. Nothing is paired: the other ends of its
// transfers are in other hosts' files (`podprof dcn` pairs a stored capture's).
absl::Status WriteMegascale(const InspectOptions& options, const HostCapture& c,
                            std::ostream& out) {
  v1::GetDcnResponse r;
  r.set_capture_id(options.path);
  const std::vector<insight::XprofRendezvousRow> rows =
      insight::HostXprofFigures(insight::DcnHostFromCapture(c, -1, {}));
  for (const insight::XprofRendezvousRow& x : rows) insight::XprofRowToProto(x, r.add_xprof());
  r.set_verdict(rows.empty() ? "no cross-slice (host-transfer) ops on chip 0 of this host"
                             : "one host's figures (podprof dcn pairs both ends of a stored "
                               "capture's transfers)");
  switch (options.format) {
    case OutputFormat::kJson:
      out << report::DcnJsonText(r);
      break;
    case OutputFormat::kCsv:
      report::WriteDcnCsv(r, report::DcnTable::kXprof, out);
      break;
    case OutputFormat::kTable:
      out << "host " << c.host.name << ": " << r.verdict() << "\n";
      if (!rows.empty()) report::WriteDcnXprofTable(r, out);
      break;
  }
  return FlushOutput(out);
}

}  // namespace

std::unique_ptr<Command> AddInspectCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<InspectCommand>(
      app.add_subcommand("inspect", "Print kernel statistics of one capture (.xplane.pb)"),
      context);
}

absl::Status RunInspect(const InspectOptions& options, std::ostream& out) {
  absl::StatusOr<HostCapture> capture = trace::ReadXSpaceFile(options.path);
  if (!capture.ok()) return capture.status();
  if (options.executions) return WriteExecutions(options, *capture, out);
  if (options.megascale) return WriteMegascale(options, *capture, out);
  const StatsGrouping by = options.by.value_or(
      options.format == OutputFormat::kTable ? StatsGrouping::kKernel : StatsGrouping::kChip);
  std::vector<KernelStats> stats = trace::ComputeKernelStats(*capture);
  const std::map<uint32_t, uint32_t> chips = ChipsPerKernel(stats);
  if (by == StatsGrouping::kKernel) stats = trace::RollUpByKernel(stats);
  const size_t total_rows = stats.size();
  const int top = DefaultTop(options.top, options.format);
  if (top > 0 && stats.size() > static_cast<size_t>(top)) stats.resize(top);
  const KernelRows rows = InspectRows(*capture, stats, chips, &capture->warnings);
  switch (options.format) {
    case OutputFormat::kCsv:
      WriteKernelRowsCsv(options.path, rows, out);
      break;
    case OutputFormat::kJson:
      WriteJson(HostJson(*capture, rows), out);
      break;
    case OutputFormat::kTable:
      WriteSummary(*capture, chips.size(), out);
      WriteKernelRowsTable(rows, by, out, options.fit);
      if (total_rows > stats.size()) {
        out << "... " << total_rows - stats.size() << " more rows (--top 0 shows all)\n";
      }
      for (const std::string& w : capture->warnings) out << "warning: " << w << "\n";
      break;
  }
  return FlushOutput(out);
}

}  // namespace podprof::cli
