#include "cli/cli_main.h"

#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/agents_command.h"
#include "cli/capture_command.h"
#include "cli/captures_command.h"
#include "cli/cli_profile.h"
#include "cli/command.h"
#include "cli/dcn_command.h"
#include "cli/demo_command.h"
#include "cli/diff_command.h"
#include "cli/exit_codes.h"
#include "cli/export_command.h"
#include "cli/fleet_command.h"
#include "cli/history_command.h"
#include "cli/import_command.h"
#include "cli/inspect_command.h"
#include "cli/kernel_command.h"
#include "cli/sql_command.h"
#include "cli/stats_command.h"
#include "cli/stragglers_command.h"
#include "cli/telemetry_command.h"
#include "cli/tools_command.h"
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
                 "Aggregator address for every subcommand, host:port (or $PODPROF_AGGREGATOR)");
  AddTlsFlags(&app, context.tls);
  AddFormatFlag(&app, context.format);
}

constexpr char kDemoHint[] =
    "Start with `podprof demo`: a simulated 4-host pod on this machine, captured once.";

// "usage: ..." and the commands `app` has, one a line with its description: what a command
// line that names none of them gets.
std::string ShortUsage(CLI::App& app, const std::string& name) {
  std::string usage =
      absl::StrCat("usage: ", name, " ",
                   app.get_parent() == nullptr ? "[--aggregator HOST:PORT] [--profile NAME] " : "",
                   "COMMAND [flags]\n\ncommands:\n");
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    absl::StrAppend(&usage, "  ", absl::StrFormat("%-12s", sub->get_name()), sub->get_description(),
                    "\n");
  }
  if (app.get_parent() == nullptr) absl::StrAppend(&usage, "\n", kDemoHint, "\n");
  absl::StrAppend(&usage, "`", name, " COMMAND --help` shows a command's flags and examples.\n");
  return usage;
}

// CLI11 reports help, --version and usage errors by exception; this is the one place they
// stop. A usage error is one line naming the command and saying where to look; a command
// line that names no command gets the short usage instead.
int ParseFailed(CLI::App& app, const CLI::ParseError& e, std::ostream& out, std::ostream& err) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e, out, err);
  // The innermost command the parse reached.
  CLI::App* command = &app;
  std::string name = "podprof";
  while (!command->get_subcommands().empty()) {
    command = command->get_subcommands().front();
    absl::StrAppend(&name, " ", command->get_name());
  }
  const bool has_commands = !command->get_subcommands([](CLI::App*) { return true; }).empty();
  if (has_commands && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    // A word that is no command ("podprof caputre") is left over; say so before the list.
    if (std::vector<std::string> rest = command->remaining(); !rest.empty()) {
      err << name << ": no command \"" << rest.front() << "\"\n";
    }
    err << ShortUsage(*command, name);
    return kExitUsage;
  }
  err << name << ": " << e.what() << "; see `" << name << " --help`\n";
  return kExitUsage;
}

// Every subcommand, added to `app` (CliMain's and CommandNames' one list).
std::vector<std::unique_ptr<Command>> AddCommands(CLI::App& app, CliContext& context) {
  std::vector<std::unique_ptr<Command>> commands;
  commands.push_back(AddInspectCommand(app, context));
  commands.push_back(AddCapturesCommand(app, context));
  commands.push_back(AddStatsCommand(app, context));
  commands.push_back(AddHistoryCommand(app, context));
  commands.push_back(AddKernelCommand(app, context));
  commands.push_back(AddStragglersCommand(app, context));
  commands.push_back(AddSqlCommand(app, context));
  commands.push_back(AddDcnCommand(app, context));
  commands.push_back(AddDiffCommand(app, context));
  commands.push_back(AddImportCommand(app, context));
  commands.push_back(AddAgentsCommand(app, context));
  commands.push_back(AddCaptureCommand(app, context));
  commands.push_back(AddSnapshotCommand(app, context));
  commands.push_back(AddTelemetryCommand(app, context));
  commands.push_back(AddExportCommand(app, context));
  commands.push_back(AddFleetCommand(app, context));
  commands.push_back(AddDemoCommand(app, context));
  commands.push_back(AddToolsCommand(app, context));
  return commands;
}

// The leaves under `app`, each as its path of names below the root ("fleet top").
void LeafNames(CLI::App& app, const std::string& prefix, std::vector<std::string>& out) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string name = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
    if (sub->get_subcommands([](CLI::App*) { return true; }).empty()) {
      out.push_back(name);
    } else {
      LeafNames(*sub, name, out);
    }
  }
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
  // The parse starts from the configuration file's values, then the environment's, so that
  // the flags it parses win wherever they stand (cli/cli_profile.h).
  const std::string config_path = CliConfigPath();
  std::string profile = ProfileName(argc, argv);
  if (absl::Status s = ApplyCliProfile(config_path, profile, context); !s.ok()) {
    err << "podprof: " << s.message() << "\n";
    return kExitUsage;
  }
  ApplyCliEnvironment(context);
  AddGlobalFlags(app, context, profile);
  app.footer(absl::StrCat(
      kDemoHint,
      "\nEvery command has --help with examples. Each setting comes from its flag, else its "
      "environment variable, else the profile in ",
      config_path.empty() ? "$PODPROF_CLI_CONFIG" : config_path,
      " (when it exists), else the default.\n"
      "Exit codes: 0 success, 1 partial, 2 usage error, bad input or not found, 3 aggregator "
      "unreachable, 4 refused by the aggregator (README.md, \"Exit codes\")."));

  std::vector<std::unique_ptr<Command>> commands = AddCommands(app, context);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return ParseFailed(app, e, out, err);
  }
  context.table_fit.width = TerminalWidth(std::getenv("COLUMNS"), STDOUT_FILENO);
  for (const std::unique_ptr<Command>& command : commands) {
    if (command->app()->parsed()) return command->Run(context, out, err);
  }
  return kExitUsage;  // unreachable: exactly one subcommand is required
}

std::vector<std::string> CommandNames() {
  CLI::App app{"podprof"};
  FakeClock clock(0);  // nothing reads it: the commands are only added
  CliContext context(clock);
  const std::vector<std::unique_ptr<Command>> commands = AddCommands(app, context);
  std::vector<std::string> names;
  LeafNames(app, "", names);
  return names;
}

}  // namespace podprof::cli
