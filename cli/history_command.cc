#include "cli/history_command.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_codes.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "report/history.h"
#include "report/mxu.h"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

class HistoryCommand : public AggregatorCommand {
 public:
  HistoryCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    AddWideFlag(cmd, context.table_fit);
    cmd->add_option("kernel", options_.kernel_regex,
                    "RE2 regular expression matched against op names, at most 4096 bytes "
                    "(e.g. 'fusion\\.1[0-9]')")
        ->required();
    cmd->add_option("--module", options_.module, "Only kernels whose module name contains this");
    AddStartRangeFlags(cmd, options_.range, "168h");
    cmd->add_option("--max-kernels", options_.max_kernels,
                    "Most kernels, those with the largest total time (default: the "
                    "aggregator's, 20)");
    cmd->footer(
        "Examples:\n  podprof history 'fusion\\.5$' --since 168h\n"
        "  podprof history all-reduce --module jit_train_step --format csv");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    options_.format = context.format;
    options_.fit = context.table_fit;
    absl::Status s = RunHistory(client, options_, out);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  HistoryOptions options_;
};

// One kernel's points, a row per capture, with the MXU figure `stats` shows and its source.
void WritePointsTable(const v1::KernelHistorySeries& series, const TableFit& fit,
                      std::ostream& out) {
  using Align = TextTable::Align;
  TextTable table({{"CAPTURE", Align::kLeft},
                   {"START", Align::kLeft, 0, 30},
                   {"COUNT", Align::kRight, 0, 40},
                   {"MEAN", Align::kRight},
                   {"P50", Align::kRight, 0, 50},
                   {"P99", Align::kRight, 0, 70},
                   {"TOTAL", Align::kRight, 0, 60},
                   {"TFLOP/S", Align::kRight, 0, 20},
                   {"MXU", Align::kRight, 0, 80}});
  MxuSources mxu;
  for (const v1::KernelHistoryPoint& p : series.points()) mxu.Add(MxuOf(p));
  for (const v1::KernelHistoryPoint& p : series.points()) {
    table.AddRow({p.capture_id(), FormatTimestampNs(p.capture_start_ns()), absl::StrCat(p.count()),
                  FormatMeanPs(p.mean_ps()), FormatDurationPs(p.p50_ps()),
                  FormatDurationPs(p.p99_ps()), FormatDurationPs(p.total_ps()),
                  FormatTflops(p.achieved_tflops()), mxu.Cell(MxuOf(p))});
  }
  table.Write(out, fit);
  WriteMxuFootnote(mxu, table, fit, out);
}

}  // namespace

std::unique_ptr<Command> AddHistoryCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<HistoryCommand>(
      app.add_subcommand("history", "Print how matching kernels behaved over the stored captures"),
      context);
}

absl::Status RunHistory(AggregatorClient& client, const HistoryOptions& options,
                        std::ostream& out) {
  RETURN_IF_ERROR(CheckUserPattern("kernel", options.kernel_regex));
  v1::KernelHistoryRequest request;
  request.mutable_filter()->set_op_regex(options.kernel_regex);
  request.mutable_filter()->set_module(options.module);
  request.set_since_ns(options.range.SinceNs(client.clock().NowNs()));
  request.set_until_ns(options.range.until_ns);
  request.set_max_kernels(options.max_kernels);

  v1::KernelHistoryResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::KernelHistory, request, &response));
  // As `podprof kernel` does for a name it does not know: nothing matched is an error, in
  // every format, so that scripts need not tell an empty answer from a wrong name.
  if (response.series().empty()) {
    const bool narrowed = !options.module.empty() || options.range.since_ns > 0 ||
                          options.range.since_ago_ns.has_value() || options.range.until_ns > 0;
    return absl::NotFoundError(
        absl::StrCat("no stored kernel matches '", options.kernel_regex, "'",
                     options.module.empty() ? "" : absl::StrCat(" in module ", options.module),
                     narrowed ? " in the selected captures" : "",
                     "; `podprof stats CAPTURE` lists a capture's kernels"));
  }
  WriteKernelHistory(response, options.format, out, options.fit);
  return FlushOutput(out);
}

void WriteKernelHistory(const v1::KernelHistoryResponse& response, OutputFormat format,
                        std::ostream& out, const TableFit& fit) {
  switch (format) {
    case OutputFormat::kCsv:
      WriteHistoryCsv(response, out);
      break;
    case OutputFormat::kJson:
      WriteJson(HistoryJson(response), out);
      break;
    case OutputFormat::kTable: {
      if (response.series().empty()) out << "no matching kernels in the selected captures\n";
      bool first = true;
      for (const v1::KernelHistorySeries& series : response.series()) {
        if (!first) out << "\n";
        first = false;
        const v1::KernelDef& k = series.kernel();
        out << k.op_name() << " (module " << (k.module().empty() ? "-" : k.module());
        if (!k.category().empty()) out << ", " << k.category();
        out << "): " << CountOf(series.points_size(), "capture") << "\n";
        if (series.points_size() > 1) {
          // The trend at a glance, oldest capture first.
          std::vector<double> mean, p99;
          for (const v1::KernelHistoryPoint& p : series.points()) {
            mean.push_back(p.mean_ps());
            p99.push_back(static_cast<double>(p.p99_ps()));
          }
          out << "  mean " << Sparkline(mean) << "  p99 " << Sparkline(p99) << "\n";
        }
        WritePointsTable(series, fit, out);
      }
      break;
    }
  }
}

}  // namespace podprof::cli
