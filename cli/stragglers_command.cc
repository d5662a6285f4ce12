#include "cli/stragglers_command.h"

#include <algorithm>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/exit_codes.h"
#include "cli/report.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "insight/collectives.h"
#include "nlohmann/json.hpp"
#include "report/pod_rows.h"

namespace podprof::cli {
namespace {

using Stub = v1::Aggregator::StubInterface;

class StragglersCommand : public AggregatorCommand {
 public:
  StragglersCommand(CLI::App* cmd, CliContext& context) : AggregatorCommand(cmd) {
    AddAggregatorFlags(cmd, context);
    cmd->add_option("capture", options_.capture_id, "Capture id")->required();
    cmd->add_option("--top", options_.top, "Worst collectives shown (default 10)");
    cmd->footer(
        "Examples:\n  podprof stragglers cap-1796003829474-cf16\n"
        "  podprof stragglers cap-1796003829474-cf16 --format json | jq '.chips[0]'");
  }

 protected:
  int RunWith(AggregatorClient& client, CliContext& context, std::ostream& out,
              std::ostream& err) override {
    options_.format = context.format;
    absl::Status s = RunStragglers(client, options_, out);
    return s.ok() ? 0 : Failed(err, s, kExitBadInput);
  }

 private:
  StragglerOptions options_;
};

// How much later than the next-to-last chip `c` came, on average, when it came last.
int64_t MeanLatenessPs(const v1::StragglerChip& c) {
  return c.times_last() > 0 ? c.lateness_ps() / static_cast<int64_t>(c.times_last()) : 0;
}

}  // namespace

std::unique_ptr<Command> AddStragglersCommand(CLI::App& app, CliContext& context) {
  return std::make_unique<StragglersCommand>(
      app.add_subcommand("stragglers",
                         "Show which chips made the others wait at a capture's collectives"),
      context);
}

absl::Status RunStragglers(AggregatorClient& client, const StragglerOptions& options,
                           std::ostream& out) {
  v1::GetStragglersRequest request;
  request.set_capture_id(options.capture_id);
  v1::GetStragglersResponse response;
  RETURN_IF_ERROR(client.Call(&Stub::GetStragglers, request, &response));
  if (options.format == OutputFormat::kJson) {
    WriteJson(ProtoToJson(response), out);
  } else {
    WriteStragglers(response, options, out);
  }
  return FlushOutput(out);
}

void WriteStragglers(const v1::GetStragglersResponse& r, const StragglerOptions& options,
                     std::ostream& out) {
  if (options.format == OutputFormat::kCsv) {
    report::WriteStragglersCsv(r, out);
    return;
  }
  if (r.chips().empty()) {
    out << "capture " << r.capture_id()
        << ": no collective joined chips that waited for each other (no all_reduce_unique_id "
           "seen on two chips)\n";
    return;
  }
  // The verdict, not the table's first row: some chip always tops the table, straggler or not.
  out << "capture " << r.capture_id() << ": " << r.verdict() << "\n";
  if (r.left_out() > 0) {
    out << "warning: "
        << insight::LeftOutWarning(static_cast<int64_t>(r.left_out()), r.left_out_example())
        << "\n";
  }
  out << "\n";
  TextTable chips({{"HOST", TextTable::Align::kLeft, 24},
                   {"CHIP", TextTable::Align::kRight},
                   {"LAST", TextTable::Align::kRight},
                   {"OF", TextTable::Align::kRight},
                   {"CHANCE", TextTable::Align::kRight},
                   {"STRAGGLER", TextTable::Align::kLeft},
                   {"CAUSED WAIT", TextTable::Align::kRight},
                   {"MEAN LATENESS", TextTable::Align::kRight},
                   {"STEPS", TextTable::Align::kLeft, 40}});
  for (const auto& c : r.chips()) {
    chips.AddRow({c.host_name(), absl::StrCat(c.chip_ordinal()), absl::StrCat(c.times_last()),
                  absl::StrCat(c.instances()),
                  c.expected_last() < 0 ? "-" : absl::StrFormat("%.0f", c.expected_last()),
                  c.significant() ? "yes" : "no", FormatDurationPs(c.caused_wait_ps()),
                  FormatDurationPs(MeanLatenessPs(c)),
                  c.steps().empty() ? "-" : absl::StrJoin(c.steps(), " ")});
  }
  chips.Write(out);
  out << "\nworst collectives:\n";
  TextTable worst({{"KERNEL", TextTable::Align::kLeft, 28},
                   {"STEP", TextTable::Align::kRight},
                   {"STRAGGLER", TextTable::Align::kLeft, 28},
                   {"CHIPS", TextTable::Align::kRight},
                   {"SPREAD", TextTable::Align::kRight},
                   {"LATENESS", TextTable::Align::kRight},
                   {"CAUSED", TextTable::Align::kRight}});
  for (int i = 0; i < std::min(options.top, r.worst_size()); ++i) {
    const auto& w = r.worst(i);
    worst.AddRow({w.kernel_name(), w.step() >= 0 ? absl::StrCat(w.step()) : "-",
                  absl::StrCat(w.straggler_host(), " chip ", w.straggler_chip()),
                  absl::StrCat(w.chips()), FormatDurationPs(w.spread_ps()),
                  FormatDurationPs(w.lateness_ps()), FormatDurationPs(w.caused_wait_ps())});
  }
  worst.Write(out);
}

}  // namespace podprof::cli
