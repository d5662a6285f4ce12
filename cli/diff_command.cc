#include "cli/diff_command.h"

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
#include "nlohmann/json.hpp"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

class DiffCommand : public AggregatorCommand {
 public:
  DiffCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    AddWideFlag(cmd, context.table_fit);
    cmd->add_option("baseline", options_.baseline_capture_id, "Capture id of the reference")
        ->required();
    cmd->add_option("candidate", options_.candidate_capture_id, "Capture id to judge")->required();
    cmd->add_option("--kernel", options_.kernel_regex,
                    "Only kernels whose op name matches this regular expression");
    cmd->add_option("--threshold", options_.threshold,
                    "Relative p50 slowdown that counts as a regression (0.05 = 5%)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    cmd->add_option("--top", options_.top,
                    "Show only the N kernels whose total time changed most (0 = all; "
                    "default 25 for the table, all for csv and json)");
    cmd->add_flag("--fail-on-regression", fail_on_regression_,
                  "Exit with status 1 when a kernel regressed");
    cmd->footer(
        "Examples:\n  podprof diff cap-A cap-B\n"
        "  podprof diff cap-A cap-B --threshold 0.1 --fail-on-regression   # exit 1 on a "
        "regression");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    options_.format = context.format;
    options_.fit = context.table_fit;
    absl::StatusOr<uint32_t> regressions = RunDiff(client, options_, out);
    if (!regressions.ok()) return Failed(err, regressions.status(), kExitBadInput);
    return fail_on_regression_ && *regressions > 0 ? kExitRegression : 0;
  }

 private:
  DiffOptions options_;
  bool fail_on_regression_ = false;
};

// A relative change for people: "+5.2%", or what an absent side means.
std::string ChangeCell(const v1::KernelDelta& d, double change) {
  if (!d.has_baseline()) return "new";
  if (!d.has_candidate()) return "gone";
  return FormatChange(change);
}

// "72.0%→31.0%" as `stats` shows each side's MXU figure, "-" when neither side measured it.
std::string MxuCell(const v1::KernelDelta& d, const MxuSources& sources) {
  const MxuFigure a = MxuOf(d.has_baseline(), d.baseline());
  const MxuFigure b = MxuOf(d.has_candidate(), d.candidate());
  if (!a.known() && !b.known()) return "-";
  return absl::StrCat(sources.Cell(a), "→", sources.Cell(b));
}

// The candidate's verdict (the baseline's for a kernel that is gone), "a → b" where it changed.
std::string VerdictCell(const v1::KernelDelta& d) {
  const std::string before = d.has_baseline() ? report::VerdictCell(d.baseline().insight()) : "-";
  const std::string after = d.has_candidate() ? report::VerdictCell(d.candidate().insight()) : "-";
  if (before == "-" || before == after) return after;
  if (after == "-") return before;
  return absl::StrCat(before, " → ", after);
}

void WriteDiffTable(const v1::CompareCapturesRequest& request,
                    const v1::CompareCapturesResponse& response, std::ostream& out,
                    const TableFit& fit) {
  out << "baseline " << request.baseline_capture_id() << " vs candidate "
      << request.candidate_capture_id() << "\n\n";
  using Align = TextTable::Align;
  constexpr int kAlways = TextTable::kAlways;
  TextTable table({{"KERNEL", Align::kLeft, 32, kAlways, 24},
                   {"", Align::kLeft},
                   {"VERDICT", Align::kLeft, 40, kAlways, 13},
                   {"MODULE", Align::kLeft, 20, 30},
                   {"BASE MEAN", Align::kRight, 0, 60},
                   {"CAND MEAN", Align::kRight, 0, 70},
                   {"ΔMEAN%", Align::kRight, 0, 90},
                   {"BASE P99", Align::kRight, 0, 40},
                   {"CAND P99", Align::kRight, 0, 50},
                   {"ΔP99%", Align::kRight, 0, 80},
                   {"MXU", Align::kRight, 0, 75}});
  MxuSources sources;
  for (const v1::KernelDelta& d : response.deltas()) {
    sources.Add(MxuOf(d.has_baseline(), d.baseline()));
    sources.Add(MxuOf(d.has_candidate(), d.candidate()));
  }
  auto duration = [](bool present, int64_t ps) {
    return present ? FormatDurationPs(ps) : std::string("-");
  };
  for (const v1::KernelDelta& d : response.deltas()) {
    table.AddRow({d.kernel().op_name(), d.regression() ? "REGRESSION" : "", VerdictCell(d),
                  d.kernel().module().empty() ? "-" : d.kernel().module(),
                  duration(d.has_baseline(), std::llround(d.baseline().mean_ps())),
                  duration(d.has_candidate(), std::llround(d.candidate().mean_ps())),
                  ChangeCell(d, d.mean_change()), duration(d.has_baseline(), d.baseline().p99_ps()),
                  duration(d.has_candidate(), d.candidate().p99_ps()),
                  ChangeCell(d, d.p99_change()), MxuCell(d, sources)});
  }
  table.Write(out, fit);
  WriteMxuFootnote(sources, table, fit, out);
  if (request.top_n() > 0 && static_cast<uint32_t>(response.deltas_size()) >= request.top_n()) {
    out << "showing the " << request.top_n()
        << " kernels whose total time changed most (--top 0 shows all)\n";
  }
  const uint32_t n = response.regression_count();
  out << CountOf(n, "regression") << " (p50 slower by more than "
      << FormatSignificant(EffectiveThreshold(request) * 100, 6) << "%)\n";
}

}  // namespace

std::unique_ptr<Command> AddDiffCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<DiffCommand>(
      app.add_subcommand("diff", "Compare the kernels of two captures and flag regressions"),
      context);
}

absl::StatusOr<uint32_t> RunDiff(AggregatorClient& client, const DiffOptions& options,
                                 std::ostream& out) {
  RETURN_IF_ERROR(CheckUserPattern("--kernel", options.kernel_regex));
  v1::CompareCapturesRequest request;
  request.set_baseline_capture_id(options.baseline_capture_id);
  request.set_candidate_capture_id(options.candidate_capture_id);
  request.mutable_filter()->set_op_regex(options.kernel_regex);
  request.set_regression_threshold(options.threshold);
  request.set_top_n(DefaultTop(options.top, options.format));

  v1::CompareCapturesResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::CompareCaptures, request, &response));
  WriteCaptureDiff(request, response, options.format, out, options.fit);
  RETURN_IF_ERROR(FlushOutput(out));
  return response.regression_count();
}

void WriteCaptureDiff(const v1::CompareCapturesRequest& request,
                      const v1::CompareCapturesResponse& response, OutputFormat format,
                      std::ostream& out, const TableFit& fit) {
  switch (format) {
    case OutputFormat::kCsv:
      WriteDiffCsv(response, out);
      break;
    case OutputFormat::kJson:
      WriteJson(DiffJson(request, response), out);
      break;
    case OutputFormat::kTable:
      WriteDiffTable(request, response, out, fit);
      break;
  }
}

}  // namespace podprof::cli
