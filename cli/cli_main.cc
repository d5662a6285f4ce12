#include "cli/cli_main.h"

#include <map>
#include <string>

#include "CLI/CLI.hpp"
#include "cli/inspect.h"

namespace podprof::cli {

int CliMain(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"podprof: profile TPU pods: capture kernel timelines, keep kernel statistics"};
  app.name("podprof");
  app.require_subcommand(1);

  InspectOptions inspect;
  std::string by;
  CLI::App* inspect_cmd =
      app.add_subcommand("inspect", "Print kernel statistics of one capture (.xplane.pb)");
  inspect_cmd->add_option("file", inspect.path, "XSpace capture file")->required();
  inspect_cmd->add_option("--top", inspect.top,
                          "Show only the N kernels with the most total time (0 = all; "
                          "default 25 for the table, all for csv and json)");
  inspect_cmd
      ->add_option("--by", by,
                   "Rows per chip and kernel (chip) or per kernel across chips (kernel); "
                   "default kernel for the table, chip for csv and json")
      ->check(CLI::IsMember({"chip", "kernel"}));
  const std::map<std::string, OutputFormat> formats = {
      {"table", OutputFormat::kTable}, {"json", OutputFormat::kJson}, {"csv", OutputFormat::kCsv}};
  inspect_cmd->add_option("--format", inspect.format, "Output format: table, json or csv")
      ->transform(CLI::CheckedTransformer(formats, CLI::ignore_case));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports help and usage errors by exception; this is the one place they stop.
    return app.exit(e, out, err) == 0 ? 0 : kExitUsage;
  }

  if (inspect_cmd->parsed()) {
    if (!by.empty()) {
      inspect.by_set = true;
      inspect.by = by == "chip" ? GroupBy::kChip : GroupBy::kKernel;
    }
    absl::Status s = RunInspect(inspect, out);
    if (!s.ok()) {
      err << "podprof inspect: " << s.message() << "\n";
      return kExitBadInput;
    }
  }
  return 0;
}

}  // namespace podprof::cli
