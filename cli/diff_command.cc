#include "cli/diff_command.h"

#include <cmath>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/exit_codes.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

class DiffCommand : public AggregatorCommand {
 public:
  DiffCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
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
  return absl::StrFormat("%+.1f%%", change * 100);
}

// The MXU's busy share on one side, from its sampled performance counters; null without them.
const double* MxuOf(bool present, const v1::KernelStats& s) {
  if (!present || !s.insight().has_kernel_profile()) return nullptr;
  const auto& units = s.insight().kernel_profile().units();
  auto it = units.find("mxu");
  return it == units.end() ? nullptr : &it->second;
}

// "72%→31%", "-" when neither side measured it.
std::string MxuCell(const v1::KernelDelta& d) {
  const double* a = MxuOf(d.has_baseline(), d.baseline());
  const double* b = MxuOf(d.has_candidate(), d.candidate());
  if (a == nullptr && b == nullptr) return "-";
  return absl::StrCat(a == nullptr ? "-" : Percent(*a), "→", b == nullptr ? "-" : Percent(*b));
}

nlohmann::json DeltaSideJson(bool present, const v1::KernelStats& s) {
  if (!present) return nullptr;
  nlohmann::json j = {{"count", s.count()},     {"total_ps", s.total_ps()},
                      {"mean_ps", s.mean_ps()}, {"p50_ps", s.p50_ps()},
                      {"p90_ps", s.p90_ps()},   {"p99_ps", s.p99_ps()},
                      {"max_ps", s.max_ps()},   {"verdict", s.insight().verdict()}};
  if (const double* mxu = MxuOf(true, s)) j["mxu"] = *mxu;
  if (s.insight().has_kernel_profile()) {
    j["throttled"] = s.insight().kernel_profile().throttled();
    j["sync_wait"] = s.insight().kernel_profile().sync_wait();
  }
  return j;
}

// The threshold the aggregator applied: 0 in the request means its default.
double EffectiveThreshold(const v1::CompareCapturesRequest& request) {
  return request.regression_threshold() > 0 ? request.regression_threshold() : 0.05;
}

}  // namespace

std::unique_ptr<Command> AddDiffCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<DiffCommand>(
      app.add_subcommand("diff", "Compare the kernels of two captures and flag regressions"),
      context);
}

const char* const kDiffCsvHeader =
    "kernel,module,baseline_mean_ps,candidate_mean_ps,mean_change,baseline_p99_ps,"
    "candidate_p99_ps,p99_change,regression,baseline_mxu,candidate_mxu,baseline_verdict,"
    "candidate_verdict";

absl::StatusOr<uint32_t> RunDiff(AggregatorClient& client, const DiffOptions& options,
                                 std::ostream& out) {
  v1::CompareCapturesRequest request;
  request.set_baseline_capture_id(options.baseline_capture_id);
  request.set_candidate_capture_id(options.candidate_capture_id);
  request.mutable_filter()->set_op_regex(options.kernel_regex);
  request.set_regression_threshold(options.threshold);
  request.set_top_n(DefaultTop(options.top, options.format));

  v1::CompareCapturesResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::CompareCaptures, request, &response));
  WriteCaptureDiff(request, response, options.format, out);
  RETURN_IF_ERROR(FlushOutput(out));
  return response.regression_count();
}

void WriteCaptureDiff(const v1::CompareCapturesRequest& request,
                      const v1::CompareCapturesResponse& response, OutputFormat format,
                      std::ostream& out) {
  switch (format) {
    case OutputFormat::kCsv:
      out << kDiffCsvHeader << "\n";
      for (const v1::KernelDelta& d : response.deltas()) {
        const bool both = d.has_baseline() && d.has_candidate();
        auto side = [](bool present, int64_t v) { return present ? absl::StrCat(v) : ""; };
        out << CsvField(d.kernel().op_name()) << ',' << CsvField(d.kernel().module()) << ','
            << side(d.has_baseline(), std::llround(d.baseline().mean_ps())) << ','
            << side(d.has_candidate(), std::llround(d.candidate().mean_ps())) << ','
            << (both ? CsvDouble(d.mean_change()) : "") << ','
            << side(d.has_baseline(), d.baseline().p99_ps()) << ','
            << side(d.has_candidate(), d.candidate().p99_ps()) << ','
            << (both ? CsvDouble(d.p99_change()) : "") << ','
            << (d.regression() ? "true" : "false");
        const double* a = MxuOf(d.has_baseline(), d.baseline());
        const double* b = MxuOf(d.has_candidate(), d.candidate());
        out << ',' << (a == nullptr ? "" : CsvDouble(*a)) << ','
            << (b == nullptr ? "" : CsvDouble(*b)) << ','
            << CsvField(d.has_baseline() ? d.baseline().insight().verdict() : "") << ','
            << CsvField(d.has_candidate() ? d.candidate().insight().verdict() : "") << "\n";
      }
      break;
    case OutputFormat::kJson: {
      nlohmann::json deltas = nlohmann::json::array();
      for (const v1::KernelDelta& d : response.deltas()) {
        deltas.push_back({{"kernel", d.kernel().op_name()},
                          {"module", d.kernel().module()},
                          {"category", d.kernel().category()},
                          {"kernel_id", d.kernel().kernel_id()},
                          {"baseline", DeltaSideJson(d.has_baseline(), d.baseline())},
                          {"candidate", DeltaSideJson(d.has_candidate(), d.candidate())},
                          {"mean_change", d.mean_change()},
                          {"p50_change", d.p50_change()},
                          {"p99_change", d.p99_change()},
                          {"total_ps_change", d.total_ps_change()},
                          {"regression", d.regression()}});
      }
      WriteJson({{"baseline", request.baseline_capture_id()},
                 {"candidate", request.candidate_capture_id()},
                 {"threshold", EffectiveThreshold(request)},
                 {"regression_count", response.regression_count()},
                 {"deltas", std::move(deltas)}},
                out);
      break;
    }
    case OutputFormat::kTable: {
      out << "baseline " << request.baseline_capture_id() << " vs candidate "
          << request.candidate_capture_id() << "\n\n";
      using Align = TextTable::Align;
      TextTable table({{"KERNEL", Align::kLeft, 32},
                       {"MODULE", Align::kLeft, 20},
                       {"BASE MEAN", Align::kRight},
                       {"CAND MEAN", Align::kRight},
                       {"ΔMEAN%", Align::kRight},
                       {"BASE P99", Align::kRight},
                       {"CAND P99", Align::kRight},
                       {"ΔP99%", Align::kRight},
                       {"MXU", Align::kRight},
                       {""}});
      auto duration = [](bool present, int64_t ps) {
        return present ? FormatDurationPs(ps) : std::string("-");
      };
      for (const v1::KernelDelta& d : response.deltas()) {
        table.AddRow(
            {d.kernel().op_name(), d.kernel().module().empty() ? "-" : d.kernel().module(),
             duration(d.has_baseline(), std::llround(d.baseline().mean_ps())),
             duration(d.has_candidate(), std::llround(d.candidate().mean_ps())),
             ChangeCell(d, d.mean_change()), duration(d.has_baseline(), d.baseline().p99_ps()),
             duration(d.has_candidate(), d.candidate().p99_ps()), ChangeCell(d, d.p99_change()),
             MxuCell(d), d.regression() ? "REGRESSION" : ""});
      }
      table.Write(out);
      if (request.top_n() > 0 && static_cast<uint32_t>(response.deltas_size()) >= request.top_n()) {
        out << "showing the " << request.top_n()
            << " kernels whose total time changed most (--top 0 shows all)\n";
      }
      const uint32_t n = response.regression_count();
      out << CountOf(n, "regression") << " (p50 slower by more than "
          << absl::StrFormat("%g", EffectiveThreshold(request) * 100) << "%)\n";
      break;
    }
  }
}

}  // namespace podprof::cli
