#include "cli/cli_main.h"

#include <map>
#include <memory>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "cli/agents_command.h"
#include "cli/capture_command.h"
#include "cli/captures_command.h"
#include "cli/cli_profile.h"
#include "cli/command.h"
#include "cli/demo_command.h"
#include "cli/diff_command.h"
#include "cli/exit_codes.h"
#include "cli/export_command.h"
#include "cli/fleet_command.h"
#include "cli/history_command.h"
#include "cli/import_command.h"
#include "cli/inspect_command.h"
#include "cli/kernel_command.h"
#include "cli/stats_command.h"
#include "cli/stragglers_command.h"
#include "common/clock.h"
#include "podprof_version.h"
#include "security/refusal_log.h"

namespace podprof::cli {
namespace {

// Flags that may come before the subcommand ("podprof --aggregator h:7100 captures"); they
// bind the same context as the subcommands' own.
void AddGlobalFlags(CLI::App& app, CliContext& context, std::string& profile) {
  // Read before the parse (ProfileName); declared so that the parse accepts it.
  app.add_option("--profile", profile,
                 "Use [profiles.NAME] of the CLI's configuration file (or $PODPROF_PROFILE): "
                 "aggregator, TLS files, format, timeout and export's max_size");
  app.add_flag("--no-color", context.no_color,
               "No colors in tables and the live display (also NO_COLOR)");
  app.add_option("--aggregator", context.target.address,
                 "Aggregator address for every subcommand, host:port")
      ->envname("PODPROF_AGGREGATOR");
  AddTlsFlags(&app, context.tls);
  AddFormatFlag(&app, context.format);
}

}  // namespace

int CliMain(int argc, char** argv, std::ostream& out, std::ostream& err) {
  CLI::App app{"podprof: profile TPU pods: capture kernel timelines, keep kernel statistics"};
  app.name("podprof");
  app.set_version_flag("--version", std::string("podprof ") + kVersion);
  app.require_subcommand(1);
  // Global flags may come before or after the subcommand.
  app.fallthrough();
  // gRPC's own lines in our format; a failed handshake is reported once, by the command.
  security::RouteGrpcLogs(nullptr);
  RealClock clock;
  CliContext context(clock);
  // The configuration file's values are where the parse starts: flags and environment
  // variables override them.
  const std::string config_path = CliConfigPath();
  std::string profile = ProfileName(argc, argv);
  if (absl::Status s = ApplyCliProfile(config_path, profile, context); !s.ok()) {
    err << "podprof: " << s.message() << "\n";
    return kExitUsage;
  }
  AddGlobalFlags(app, context, profile);
  app.footer(absl::StrCat(
      "Start with `podprof demo`: a simulated 4-host pod on this machine, captured once.\n"
      "Every command has --help with examples. Defaults for the aggregator, TLS files and format "
      "come from ",
      config_path.empty() ? "$PODPROF_CLI_CONFIG" : config_path, " when it exists."));

  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(AddInspectCommand(app, context));
  commands.push_back(AddCapturesCommand(app, context));
  commands.push_back(AddStatsCommand(app, context));
  commands.push_back(AddHistoryCommand(app, context));
  commands.push_back(AddKernelCommand(app, context));
  commands.push_back(AddStragglersCommand(app, context));
  commands.push_back(AddDiffCommand(app, context));
  commands.push_back(AddImportCommand(app, context));
  commands.push_back(AddAgentsCommand(app, context));
  commands.push_back(AddCaptureCommand(app, context));
  commands.push_back(AddExportCommand(app, context));
  commands.push_back(AddFleetCommand(app, context));
  commands.push_back(AddDemoCommand(app, context));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 reports help and usage errors by exception; this is the one place they stop.
    return app.exit(e, out, err) == 0 ? 0 : kExitUsage;
  }
  for (const std::unique_ptr<Command>& command : commands) {
    if (command->app()->parsed()) return command->Run(context, out, err);
  }
  return kExitUsage;  // unreachable: exactly one subcommand is required
}

}  // namespace podprof::cli
