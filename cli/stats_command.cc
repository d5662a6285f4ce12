#include "cli/stats_command.h"

#include <map>

#include "CLI/CLI.hpp"
#include "cli/exit_codes.h"
#include "cli/one_of.h"
#include "common/pattern.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

v1::KernelGrouping ToProto(StatsGrouping by) {
  switch (by) {
    case StatsGrouping::kKernel:
      return v1::KERNEL_GROUPING_KERNEL;
    case StatsGrouping::kChip:
      return v1::KERNEL_GROUPING_CHIP;
    case StatsGrouping::kHost:
      return v1::KERNEL_GROUPING_HOST;
    case StatsGrouping::kCategory:
      return v1::KERNEL_GROUPING_CATEGORY;
  }
  return v1::KERNEL_GROUPING_UNSPECIFIED;
}

class StatsCommand : public AggregatorCommand {
 public:
  StatsCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    AddWideFlag(cmd, context.table_fit);
    cmd->add_option("capture", options_.capture_id, "Capture id")->required();
    by_ = cmd->add_option("--by", by_value_,
                          "Rows per kernel, per (host, chip, kernel), per (host, kernel) or per "
                          "HLO category; default kernel for the table, chip for csv and json")
              ->transform(OneOf<StatsGrouping>({{"kernel", StatsGrouping::kKernel},
                                                {"chip", StatsGrouping::kChip},
                                                {"host", StatsGrouping::kHost},
                                                {"category", StatsGrouping::kCategory}}))
              ->option_text("kernel|chip|host|category");
    cmd->add_option("--kernel", options_.kernel_regex,
                    "Only kernels whose op name matches this regular expression (RE2 syntax, "
                    "unanchored, at most 4096 bytes)");
    cmd->add_option("--category", options_.category, "Only kernels of this HLO category");
    cmd->add_option("--host", options_.host, "Only chips of this host");
    chip_ = cmd->add_option("--chip", chip_value_, "Only this chip ordinal");
    cmd->add_option("--sort", options_.order,
                    "Order of the rows: total (default), count, mean, p50, p99, max or name")
        ->transform(OneOf<v1::KernelOrder>({{"total", v1::KERNEL_ORDER_TOTAL_TIME},
                                            {"count", v1::KERNEL_ORDER_COUNT},
                                            {"mean", v1::KERNEL_ORDER_MEAN},
                                            {"p50", v1::KERNEL_ORDER_P50},
                                            {"p99", v1::KERNEL_ORDER_P99},
                                            {"max", v1::KERNEL_ORDER_MAX},
                                            {"name", v1::KERNEL_ORDER_NAME}}))
        ->option_text("total|count|mean|p50|p99|max|name");
    cmd->add_option("--top", options_.top,
                    "Show only the first N rows (0 = all; default 25 for the table, all for "
                    "csv and json)");
    cmd->footer(
        "Examples:\n  podprof stats cap-1796003829474-cf16\n"
        "  podprof stats cap-1796003829474-cf16 --by host --kernel 'fusion\\..*' --top 10\n"
        "  podprof stats cap-1796003829474-cf16 --format csv > stats.csv");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    if (by_->count() > 0) options_.by = by_value_;
    if (chip_->count() > 0) options_.chip = chip_value_;
    options_.format = context.format;
    options_.fit = context.table_fit;
    absl::Status s = RunStats(client, options_, out);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  StatsOptions options_;
  StatsGrouping by_value_ = StatsGrouping::kKernel;
  int32_t chip_value_ = 0;
  CLI::Option* by_ = nullptr;
  CLI::Option* chip_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> AddStatsCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<StatsCommand>(
      app.add_subcommand("stats", "Print kernel statistics of one stored capture"), context);
}

absl::Status RunStats(AggregatorClient& client, const StatsOptions& options, std::ostream& out) {
  RETURN_IF_ERROR(CheckUserPattern("--kernel", options.kernel_regex));
  const StatsGrouping by = options.by.value_or(
      options.format == OutputFormat::kTable ? StatsGrouping::kKernel : StatsGrouping::kChip);
  v1::GetKernelStatsRequest request;
  request.set_capture_id(options.capture_id);
  request.set_group_by(ToProto(by));
  // For aggregators that predate group_by.
  request.set_per_chip(by == StatsGrouping::kChip);
  request.mutable_filter()->set_op_regex(options.kernel_regex);
  request.mutable_filter()->set_category(options.category);
  if (options.chip.has_value()) request.mutable_filter()->set_chip_ordinal(*options.chip);
  request.set_host_name(options.host);
  request.set_order(options.order);
  request.set_top_n(DefaultTop(options.top, options.format));

  v1::GetKernelStatsResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::GetKernelStats, request, &response));
  WriteKernelStats(response, by, options.format, out, options.fit);
  return FlushOutput(out);
}

void WriteKernelStats(const v1::GetKernelStatsResponse& response, StatsGrouping by,
                      OutputFormat format, std::ostream& out, const TableFit& fit) {
  switch (format) {
    case OutputFormat::kCsv:
      WriteKernelRowsCsv(response.capture_id(), response.stats(), out);
      break;
    case OutputFormat::kJson:
      WriteJson({{"capture", response.capture_id()},
                 {"group_by", GroupingName(by)},
                 {"matched_count", response.matched_count()},
                 {"rows", KernelRowsJson(response.stats())}},
                out);
      break;
    case OutputFormat::kTable: {
      out << "capture " << response.capture_id() << ": " << response.matched_count() << " rows by "
          << GroupingName(by) << "\n\n";
      WriteKernelRowsTable(response.stats(), by, out, fit);
      const size_t shown = response.stats_size();
      if (response.matched_count() > shown) {
        out << "... " << response.matched_count() - shown << " more rows (--top 0 shows all)\n";
      }
      break;
    }
  }
}

}  // namespace podprof::cli
